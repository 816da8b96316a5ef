"""Staff inspection of memory policies, proposals, line provenance and reviews, memory
spaces, and bots.

Policies and proposals are view-only: the mode moves only by the compare-and-set service
(which audits it), and a proposal is history whose changes are memory text, so its sealed
body is never shown or loaded. Spaces and their documents show metadata only: a body is
never shown nor loaded, not even as ciphertext. The one thing staff change here is a
team's space quota, through the audited service, and bots, through their service."""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib import admin
from django.forms import ModelForm
from django.http import HttpRequest

from memory.bots import bot_create, bot_spec_require_valid, bot_update
from memory.errors import BotSpecInvalid
from memory.models import (
    LineProvenance,
    LineReview,
    MemoryPolicy,
    MemorySpace,
    Proposal,
    SpaceDocument,
    SpaceKey,
    TenantSpaceUsage,
)
from memory.spaces.quotas import space_tenant_quota_override_set, tenant_quota_in_force
from workspaces.admin import (
    NoHardDeleteMixin,
    ViewOnlyAdmin,
    WrappedDataKeyAdmin,
    acting_user,
    changelist_link,
    workspace_search_fields,
)
from workspaces.models import Bot


@admin.register(MemoryPolicy)
class MemoryPolicyAdmin(ViewOnlyAdmin):
    fields = (
        "workspace",
        "mode",
        "policy_revision",
        "clear_generation",
        "updated_at",
        "updated_by",
    )
    list_display = fields
    list_select_related = ("workspace", "updated_by")
    list_filter = ("mode", "updated_at")
    search_fields = workspace_search_fields()


@admin.register(Proposal)
class ProposalAdmin(ViewOnlyAdmin):
    fields: ClassVar[tuple[str, ...]] = (
        "id",
        "workspace",
        "reason",
        "flagged_rules",
        "status",
        "base_version",
        "clear_generation",
        "created_at",
        "resolved_at",
        "resolved_by",
    )
    list_display = ("id", "workspace", "reason", "status", "base_version", "created_at")
    list_select_related = ("workspace",)
    list_filter = ("status", "reason", "created_at")
    search_fields = ("=id", "=admission_id", *workspace_search_fields())

    never_loaded = ("changes_ciphertext",)


@admin.register(LineProvenance)
class LineProvenanceAdmin(ViewOnlyAdmin):
    # Runs of (origin version, line index, count): where lines came from, never their text.
    fields = ("revision", "line_count", "origin_runs", "created_at")
    list_display = ("revision", "line_count", "created_at")
    list_select_related = ("revision",)
    search_fields = ("=revision__file__workspace__id",)

    never_loaded = ("revision__ciphertext",)


@admin.register(LineReview)
class LineReviewAdmin(ViewOnlyAdmin):
    # A line is named by where it came from (origin revision and index), never by its text.
    fields = ("workspace", "origin", "origin_line", "reviewed_version", "reviewer", "reviewed_at")
    list_display = fields
    list_select_related = ("workspace", "origin", "reviewer")
    list_filter = ("reviewed_at",)
    search_fields = workspace_search_fields()

    never_loaded = ("origin__ciphertext",)


@admin.register(MemorySpace)
class MemorySpaceAdmin(ViewOnlyAdmin):
    fields = (
        "handle_id",
        "visibility",
        "name",
        "tenant",
        "project",
        "bot",
        "user_id",
        "run",
        "used_bytes",
        "created_at",
        "documents",
    )
    list_display = ("name", "visibility", "tenant", "project", "bot", "run", "used_bytes")
    list_select_related = ("tenant",)
    list_filter = ("visibility",)
    search_fields = ("name", "=handle_id", "tenant__name", "tenant__org__name", "project", "bot")

    @admin.display(description="Documents")
    def documents(self, space: MemorySpace) -> str:
        return changelist_link(
            "memory.spacedocument", "Documents of this space", space__id=space.pk
        )


@admin.register(SpaceDocument)
class SpaceDocumentAdmin(ViewOnlyAdmin):
    fields = ("space", "path", "revision", "size", "updated_by", "updated_at")
    list_display = fields
    list_select_related = ("space",)
    list_filter = ("space__visibility", "updated_at")
    search_fields = ("path", "=space__handle_id", "space__tenant__name", "=updated_by")
    raw_id_fields = ("space",)

    never_loaded = ("body_ciphertext", "checksum_ciphertext")


@admin.register(TenantSpaceUsage)
class TenantSpaceUsageAdmin(admin.ModelAdmin):
    """A team's bytes over all its spaces, and its own quota. Adding a row for a team that
    has not written yet sets its quota ahead; either way the change goes through the
    audited service. The counter itself is read-only."""

    list_display = ("team", "org", "used_bytes", "quota_override_bytes", "quota_bytes")
    list_select_related = ("team", "team__org")
    list_filter = ("team__org",)
    search_fields = ("team__name", "team__org__name", "team__id__exact")
    raw_id_fields = ("team",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("team", "quota_override_bytes")
        return ("team", "used_bytes", "quota_override_bytes", "quota_bytes")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ()
        return ("team", "used_bytes", "quota_bytes")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Org")
    def org(self, usage: TenantSpaceUsage) -> str:
        return str(usage.team.org)

    @admin.display(description="Quota in force (bytes, 0: no cap)")
    def quota_bytes(self, usage: TenantSpaceUsage) -> int:
        return tenant_quota_in_force(usage.quota_override_bytes)

    def save_model(
        self, request: HttpRequest, obj: TenantSpaceUsage, form: ModelForm, change: bool
    ) -> None:
        space_tenant_quota_override_set(
            team=obj.team,
            quota_bytes=form.cleaned_data["quota_override_bytes"],
            actor=acting_user(request),
        )


@admin.register(SpaceKey)
class SpaceKeyAdmin(WrappedDataKeyAdmin):
    owner = "tenant"


class BotForm(ModelForm):
    """Judges the spec as the service will (`bot_spec_require_valid`), so a spec with an
    error diagnostic is refused here with every diagnostic, before anything is saved."""

    class Meta:
        model = Bot
        fields = ("team", "slug", "name", "runtime", "memory_spec", "auto_memory")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        runtime = cleaned.get("runtime") or getattr(self.instance, "runtime", "")
        spec = cleaned.get("memory_spec")
        if spec is not None and not isinstance(spec, dict):
            self.add_error("memory_spec", "The memory spec is a JSON object, or empty.")
        elif runtime:
            try:
                bot_spec_require_valid(
                    runtime=runtime, memory=spec, auto_memory=cleaned.get("auto_memory")
                )
            except BotSpecInvalid as invalid:
                for each in invalid.detail["diagnostics"]:
                    self.add_error(
                        "memory_spec",
                        f"{each['code']} {each['severity']} ({each['field']}): {each['message']}",
                    )
        return cleaned


@admin.register(Bot)
class BotAdmin(NoHardDeleteMixin, admin.ModelAdmin):
    """Staff manage every team's bots. Saving goes through `memory.bots`; a bot's team, id
    and runtime are fixed once it exists (its spec was judged against that runtime). A bot
    is never deleted here: that would take its tokens with it, unrevoked and unaudited."""

    form = BotForm
    list_display = ("slug", "name", "team", "runtime", "auto_memory", "created_at")
    list_select_related = ("team",)
    list_filter = ("runtime", "auto_memory")
    search_fields = ("slug", "name", "team__name")
    raw_id_fields = ("team",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else ("team", "slug", "runtime", "created_at")

    def save_model(self, request: HttpRequest, obj: Bot, form: ModelForm, change: bool) -> None:
        data = form.cleaned_data
        if not change:
            created = bot_create(
                team=obj.team,
                actor=None,
                staff=acting_user(request),
                slug=obj.slug,
                name=obj.name,
                runtime=obj.runtime,
                memory=data.get("memory_spec"),
                auto_memory=data.get("auto_memory"),
            )
            # The admin goes on with `obj` (its log entry, its redirect): make it the row.
            obj.pk = created.pk
            obj.refresh_from_db()
            return
        bot_update(
            bot=obj,
            actor=None,
            staff=acting_user(request),
            name=obj.name,
            memory=data.get("memory_spec"),
            auto_memory=data["auto_memory"],
        )
