"""Staff inspection of tenancy, the document store, key sessions and the audit trail.

What the admin never shows: file and message ciphertext, wrapped data keys, token hashes
or any other digest of a secret. Those columns are left out of `fields` (a read-only
BinaryField would still render its bytes), and deferred on list pages so they are not even
loaded. Rows that record history are view-only; state changes go through the services.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from workspaces import models
from workspaces.errors import DomainError
from workspaces.services import (
    StaffAccess,
    api_token_revoke,
    key_session_revoke,
    org_create,
    org_deletion_request,
    org_quota_set,
    org_rename,
    org_restore,
    team_create,
    team_member_remove,
    team_membership_staff_add,
    team_membership_staff_role_set,
    team_rename,
    user_access_changed_record,
    user_created_record,
    user_deactivate,
    user_reactivate,
    workspace_membership_staff_remove,
    workspace_membership_staff_role_set,
)


def change_link(model_label: str, pk: object, text: object) -> str:
    """A link to the admin change page of `model_label` ("app.model") row `pk`."""
    if pk is None:
        return "-"
    app_label, model_name = model_label.lower().split(".")
    url = reverse(f"admin:{app_label}_{model_name}_change", args=[pk])
    return format_html('<a href="{}">{}</a>', url, text)


def changelist_link(model_label: str, text: object, **filters: object) -> str:
    """A link to the admin list of `model_label`, filtered by `filters` (field lookups)."""
    app_label, model_name = model_label.lower().split(".")
    url = reverse(f"admin:{app_label}_{model_name}_changelist")
    query = "&".join(f"{lookup}={value}" for lookup, value in filters.items())
    return format_html('<a href="{}?{}">{}</a>', url, query, text)


def workspace_search_fields(via: str = "") -> tuple[str, str]:
    """The search fields finding a row by its workspace's name or exact id; `via` names the
    relation through which a row with no workspace of its own reaches one."""
    prefix = f"{via}__" if via else ""
    return (f"{prefix}workspace__name", f"{prefix}workspace__id__exact")


def workspace_column(via: str) -> Callable[[Any, Any], str]:
    """An admin column (assign it as `workspace`) linking the workspace of a row that has
    none of its own but reaches one through its `via` relation (a turn, its admission)."""

    @admin.display(description="Workspace", ordering=f"{via}__workspace__name")
    def workspace(model_admin: Any, row: Any) -> str:
        workspace = getattr(row, via).workspace
        return change_link("workspaces.workspace", workspace.pk, workspace)

    return workspace


def id_link_column(description: str, model_label: str, id_path: str) -> Callable[[Any, Any], str]:
    """An admin column linking the `model_label` row whose id the row holds at `id_path`
    (attribute names joined by "__", as in "admission__conversation_id"), shown by its id."""

    @admin.display(description=description)
    def link(model_admin: Any, row: Any) -> str:
        row_id = row
        for name in id_path.split("__"):
            row_id = getattr(row_id, name)
        return change_link(model_label, row_id, row_id)

    return link


def one_to_one_link_column(
    description: str, relation: str, *, missing: str, text: Callable[[Any], object] = str
) -> Callable[[Any, Any], str]:
    """An admin column linking the row on the other side of the reverse one-to-one
    `relation`, shown as `text(row)`, or saying `missing` where there is none."""

    @admin.display(description=description)
    def link(model_admin: Any, row: Any) -> str:
        related = getattr(row, relation, None)
        if related is None:
            return missing
        return change_link(related._meta.label, related.pk, text(related))

    return link


def acting_user(request: HttpRequest) -> models.User:
    """The staff member behind an admin request, to name as the actor of a service call."""
    user = request.user
    if not isinstance(user, models.User):  # the admin site serves only authenticated staff
        raise PermissionDenied
    return user


class ViewOnlyAdmin(admin.ModelAdmin):
    """A row staff may inspect but never add, edit or delete here: history (revisions,
    admissions, fences, revocations, the audit trail), or state a service owns.

    `never_loaded` names the columns (sealed text, wrapped keys, signed documents, or the
    same across a relation) that no page of it reads from the database at all."""

    never_loaded: ClassVar[tuple[str, ...]] = ()

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).defer(*self.never_loaded)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReachesWorkspaceAdmin(ViewOnlyAdmin):
    """The page of a row with no workspace of its own that reaches one through its
    `workspace_via` relation (a turn, its admission): a read-only `workspace` column linking
    it, the join that column needs in the list, and search by the workspace's name or id."""

    workspace_via: ClassVar[str]
    workspace: ClassVar[Callable[[Any, Any], str]]
    list_select_related: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.workspace = workspace_column(cls.workspace_via)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return (*super().get_readonly_fields(request, obj), "workspace")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # A queryset that already selects related rows makes the changelist skip
        # list_select_related, so the page's own joins are named here too.
        joins = (*self.list_select_related, f"{self.workspace_via}__workspace")
        return super().get_queryset(request).select_related(*joins)

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        own = super().get_search_fields(request)
        return (*own, *workspace_search_fields(self.workspace_via))


class NoHardDeleteMixin:
    """A hard delete here would cascade through memory, history and keys with no audit
    event and around the org purge; people are deactivated, orgs go through deletion,
    tokens are revoked (their bots' with them)."""

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ChangedFieldsOnlyMixin:
    """Saves an edited row's changed fields alone, so an edit never writes back state that a
    service changed while the form was open (a workspace's AI consent): a whole-row save
    would undo it, unaudited."""

    def save_model(self, request: HttpRequest, obj: Any, form: ModelForm, change: bool) -> None:
        if change:
            obj.save(update_fields=form.changed_data)
        else:
            obj.save()


class ServiceRefusalAdmin(admin.ModelAdmin):
    """The page of a row whose saves go through services: a service's refusal of a save (a
    role change, a name taken meanwhile) is shown on the page it came from, as on the delete
    page; the view's transaction, its log entry included, is rolled back by it."""

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as refusal:
            self.message_user(request, refusal.message, messages.ERROR)
            return HttpResponseRedirect(request.path)


def staff_access(values: Mapping[str, Any]) -> StaffAccess:
    """The admin access a person's form holds in `values` (its initial or cleaned data)."""
    return StaffAccess(
        is_staff=bool(values.get("is_staff")),
        is_superuser=bool(values.get("is_superuser")),
        group_pks=frozenset(group.pk for group in values.get("groups", ())),
        permission_pks=frozenset(perm.pk for perm in values.get("user_permissions", ())),
    )


@admin.register(models.User)
class WorkspaceUserAdmin(NoHardDeleteMixin, UserAdmin):
    """A person's page. Creating them, (de)activating them and changing their admin access
    (staff, superuser, groups, permissions) are each audited, with the staff member who did it."""

    list_display = ("username", "email", "is_active", "is_staff")
    list_filter = ("is_active", "is_staff")

    def save_model(
        self, request: HttpRequest, obj: models.User, form: ModelForm, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        actor = acting_user(request)
        if not change:
            user_created_record(user=obj, actor=actor)
        # (De)activating goes through the services, in the view's transaction: deactivating
        # revokes their key sessions (the keys leave the cache on commit) and tokens at once.
        elif "is_active" in form.changed_data:
            (user_reactivate if obj.is_active else user_deactivate)(user=obj, actor=actor)

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool
    ) -> None:
        # Groups and permissions are saved here, after the row: what changed is known now.
        super().save_related(request, form, formsets, change)
        if change:
            user_access_changed_record(
                user=form.instance,
                actor=acting_user(request),
                before=staff_access(form.initial),
                after=staff_access({**form.initial, **form.cleaned_data}),
            )


class OrgQuotaForm(forms.Form):
    memory_quota_bytes = forms.IntegerField(
        min_value=0,
        help_text=(
            "The most document bytes each of the org's teams may store (enforced on every "
            "write); 0 means unlimited."
        ),
    )


@admin.register(models.Org)
class OrgAdmin(ServiceRefusalAdmin):
    list_display = ("name", "status", "deletion_due_at", "memory_quota_bytes", "created_at")
    list_select_related = ()
    list_filter = ("status", "deletion_due_at", "created_at")
    search_fields = ("name", "id__exact")
    # Lifecycle and quota change only through the actions below, which call the audited
    # services; the form edits the name alone.
    readonly_fields = (
        "status",
        "deletion_due_at",
        "purge_claimed_at",
        "memory_quota_bytes",
        "created_at",
        "audit_trail",
    )
    actions = ("schedule_deletion", "restore", "set_memory_quota")

    def save_model(
        self, request: HttpRequest, obj: models.Org, form: ModelForm, change: bool
    ) -> None:
        # Through the audited services, which write the name alone: a whole-row save would
        # write back the status, deadline or quota a lifecycle service changed meanwhile.
        actor = acting_user(request)
        if not change:
            obj.pk = org_create(name=obj.name, actor=actor).pk
        elif "name" in form.changed_data:
            org_rename(org=obj, name=obj.name, actor=actor)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # An org is deleted by scheduling it: the grace period, then the audited purge.
        return False

    def has_schedule_deletion_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workspaces.delete_org")

    @admin.display(description="Audit trail")
    def audit_trail(self, org: models.Org) -> str:
        if org.pk is None:
            return "-"
        return changelist_link("workspaces.auditevent", "Audit events of this org", org_id=org.pk)

    @admin.action(
        description="Schedule deletion of the selected orgs", permissions=["schedule_deletion"]
    )
    def schedule_deletion(self, request: HttpRequest, queryset: QuerySet[models.Org]) -> None:
        actor = acting_user(request)
        for org in queryset.order_by("pk"):
            try:
                scheduled = org_deletion_request(org=org, actor=actor)
            except DomainError as refusal:
                self.message_user(request, f"{org}: {refusal.message}", messages.WARNING)
            else:
                due = scheduled.deletion_due_at
                self.message_user(request, f"{org}: to be purged after {due:%Y-%m-%d %H:%M %Z}.")

    @admin.action(description="Restore the selected orgs", permissions=["change"])
    def restore(self, request: HttpRequest, queryset: QuerySet[models.Org]) -> None:
        actor = acting_user(request)
        for org in queryset.order_by("pk"):
            try:
                org_restore(org=org, actor=actor)
            except DomainError as refusal:
                self.message_user(request, f"{org}: {refusal.message}", messages.WARNING)
            else:
                self.message_user(request, f"{org}: restored.")

    @admin.action(description="Set the memory quota of the selected orgs", permissions=["change"])
    def set_memory_quota(
        self, request: HttpRequest, queryset: QuerySet[models.Org]
    ) -> TemplateResponse | None:
        form = OrgQuotaForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            actor = acting_user(request)
            quota = form.cleaned_data["memory_quota_bytes"]
            for org in queryset.order_by("pk"):
                org_quota_set(org=org, memory_quota_bytes=quota, actor=actor)
            self.message_user(
                request, f"Memory quota set to {quota} bytes on {queryset.count()} org(s)."
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Set the memory quota",
            "opts": self.opts,
            "orgs": queryset.order_by("name"),
            "form": form,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/workspaces/org/set_memory_quota.html", context)


@admin.register(models.Team)
class TeamAdmin(NoHardDeleteMixin, ServiceRefusalAdmin):
    list_display = ("name", "org", "created_at")
    list_select_related = ("org",)
    search_fields = ("name", "org__name")
    raw_id_fields = ("org",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Moving a team to another org would carry its memory out from under the org's
        # quota, audit trail and purge.
        return ("org", "created_at") if obj is not None else ("created_at",)

    def save_model(
        self, request: HttpRequest, obj: models.Team, form: ModelForm, change: bool
    ) -> None:
        # Creating and renaming go through the audited services; the other fields (the
        # auto-memory default) are saved alone, as they changed.
        actor = acting_user(request)
        if not change:
            obj.pk = team_create(
                org=obj.org, name=obj.name, actor=actor, auto_memory_default=obj.auto_memory_default
            ).pk
            return
        if "name" in form.changed_data:
            team_rename(team=obj, name=obj.name, actor=actor)
        if others := [field for field in form.changed_data if field != "name"]:
            obj.save(update_fields=others)


class MembershipAdmin(ServiceRefusalAdmin):
    """A user's role in a team or a workspace: one page shape for both, named by `scope`
    (the field that holds the team or the workspace).

    Ending a membership ends more than its row (key sessions, memberships of the team's
    workspaces) and may be refused, so a row is removed only through the service
    `remove` calls: its delete page and the page's bulk action (no generic bulk delete,
    which would report success for the rows the service refused). Of an existing row
    only the role is edited: changing its person or scope would move them around the
    service."""

    scope: ClassVar[str]
    list_filter = ("role",)

    def remove(self, membership: Any, actor: models.User) -> None:
        raise NotImplementedError

    def change_role(self, membership: Any, actor: models.User) -> None:
        """Give an existing membership the role its form set, through the scope's service
        (its checks and its audit event)."""
        raise NotImplementedError

    def add(self, membership: Any, actor: models.User) -> Any:
        """Create the membership the add form built, through the scope's service (its
        audit event); answer the row it made. Only a scope whose page offers adding has one."""
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: ModelForm, change: bool) -> None:
        if change:
            self.change_role(obj, acting_user(request))
        else:
            obj.pk = self.add(obj, acting_user(request)).pk

    def get_list_display(self, request: HttpRequest) -> tuple[str, ...]:
        return ("user", self.scope, "role", "created_at")

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        return ("user__username", f"{self.scope}__name")

    def get_list_select_related(self, request: HttpRequest) -> tuple[str, ...]:
        return ("user", self.scope)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("user", self.scope, "created_at") if obj is not None else ("created_at",)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.remove(obj, acting_user(request))

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # The view's transaction (its log entry included) is rolled back by the refusal.
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as refusal:
            self.message_user(request, refusal.message, messages.ERROR)
            return HttpResponseRedirect(request.path)

    def remove_each(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """The bulk action's body: each selected membership through `remove`, one by one."""
        actor = acting_user(request)
        for membership in queryset.select_related("user", self.scope).order_by("pk"):
            try:
                # The log entry, written first as the delete page writes it, goes with a refusal.
                with transaction.atomic():
                    self.log_deletions(request, queryset.filter(pk=membership.pk))
                    self.remove(membership, actor)
            except DomainError as refusal:
                self.message_user(request, f"{membership}: {refusal.message}", messages.WARNING)
            else:
                self.message_user(request, f"{membership}: removed.")


@admin.register(models.TeamMembership)
class TeamMembershipAdmin(MembershipAdmin):
    """Leaving a team ends the person's memberships of its workspaces and their key
    sessions there (`team_member_remove`); a team keeps an owner
    (`team_membership_staff_role_set`)."""

    scope = "team"
    raw_id_fields = ("user", "team")
    actions = ("remove_from_team",)

    def add(self, membership: models.TeamMembership, actor: models.User) -> models.TeamMembership:
        return team_membership_staff_add(
            team=membership.team, user=membership.user, role=membership.role, actor=actor
        )

    def remove(self, membership: models.TeamMembership, actor: models.User) -> None:
        team_member_remove(membership=membership, actor=actor)

    def change_role(self, membership: models.TeamMembership, actor: models.User) -> None:
        team_membership_staff_role_set(membership=membership, actor=actor, role=membership.role)

    @admin.action(description="Remove the selected people from their teams", permissions=["delete"])
    def remove_from_team(
        self, request: HttpRequest, queryset: QuerySet[models.TeamMembership]
    ) -> None:
        self.remove_each(request, queryset)


@admin.register(models.WorkspaceMembership)
class WorkspaceMembershipAdmin(MembershipAdmin):
    """Leaving a workspace revokes the person's key sessions there, and a workspace keeps
    an admin (`workspace_membership_staff_remove`, `workspace_membership_staff_role_set`).
    People join a workspace through its admins (`workspace_member_add`, which adds only
    members of its team), not here."""

    scope = "workspace"
    raw_id_fields = ("user", "workspace")
    actions = ("remove_from_workspace",)

    def remove(self, membership: models.WorkspaceMembership, actor: models.User) -> None:
        workspace_membership_staff_remove(membership=membership, actor=actor)

    def change_role(self, membership: models.WorkspaceMembership, actor: models.User) -> None:
        workspace_membership_staff_role_set(
            membership=membership, actor=actor, role=membership.role
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(
        description="Remove the selected people from their workspaces", permissions=["delete"]
    )
    def remove_from_workspace(
        self, request: HttpRequest, queryset: QuerySet[models.WorkspaceMembership]
    ) -> None:
        self.remove_each(request, queryset)


@admin.register(models.Workspace)
class WorkspaceAdmin(ChangedFieldsOnlyMixin, NoHardDeleteMixin, admin.ModelAdmin):
    list_display = ("name", "team", "ai_enabled", "ai_consent_revision", "created_at")
    list_select_related = ("team",)
    list_filter = ("ai_enabled",)
    search_fields = ("name", "team__name", "id__exact")
    raw_id_fields = ("team",)
    # Consent changes go through the compare-and-set service so the revision moves; a
    # workspace never moves to another team (its members, key and memory are that team's).
    readonly_fields = ("team", "ai_enabled", "ai_consent_revision", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A workspace is created by a member of its team (`workspace_create`), who becomes
        # its first admin; one made here would have no admin, no key and no audit event.
        return False


@admin.register(models.ApiToken)
class ApiTokenAdmin(ViewOnlyAdmin):
    list_display = ("name", "user", "team", "bot", "created_at", "expires_at", "revoked_at")
    list_select_related = ("user", "team", "bot__team")
    list_filter = ("revoked_at", "expires_at")
    search_fields = ("name", "user__username", "team__name")
    # The hash is never shown; staff can only inspect and revoke. The page is view-only:
    # saving it would write back `revoked_at` as it loaded, un-revoking a token revoked
    # meanwhile.
    fields = (
        "name",
        "user",
        "team",
        "scope",
        "bot",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )
    actions = ("revoke",)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workspaces.change_apitoken")

    # An action naming no permission is offered to anyone who may view the list.
    @admin.action(description="Revoke the selected tokens", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[models.ApiToken]) -> None:
        actor = acting_user(request)
        for token in queryset:
            api_token_revoke(token=token, actor=actor)


class WrappedDataKeyAdmin(ViewOnlyAdmin):
    """The page of a `WrappedDataKey` model, whose key belongs to its `owner` field (a
    workspace, a team). Never `wrapped_key`: reading it unwraps the data key."""

    owner: ClassVar[str]
    list_filter = ("wrapping_key_id", "rewrapped_at")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        owner = cls.owner
        cls.fields = (owner, "wrapping_key_id", "created_at", "rewrapped_at")
        cls.list_display = cls.fields
        cls.list_select_related = (owner,)
        cls.search_fields = (f"{owner}__name", f"{owner}__id__exact", "=wrapping_key_id")

    never_loaded = ("wrapped_key",)


@admin.register(models.WorkspaceKey)
class WorkspaceKeyAdmin(WrappedDataKeyAdmin):
    owner = "workspace"


@admin.register(models.File)
class FileAdmin(ViewOnlyAdmin):
    fields = (
        "workspace",
        "path",
        "current_version",
        "deleted_at",
        "created_at",
        "updated_at",
        "revisions",
    )
    readonly_fields = ("revisions",)
    list_display = ("path", "workspace", "current_version", "deleted_at", "updated_at")
    list_select_related = ("workspace",)
    list_filter = ("deleted_at", "updated_at")
    search_fields = ("path", *workspace_search_fields())

    @admin.display(description="Revisions")
    def revisions(self, file: models.File) -> str:
        return changelist_link("workspaces.fileversion", "All revisions", file__id__exact=file.pk)


# What a revision's page and its row in the list both show.
_REVISION_COLUMNS = ("workspace", "version", "change_kind", "author_kind", "author", "size_bytes")


@admin.register(models.FileVersion)
class FileVersionAdmin(ReachesWorkspaceAdmin):
    workspace_via = "file"
    # Never `ciphertext`. Its digest is shown: a hash of ciphertext reveals no text.
    fields: ClassVar[tuple[str, ...]] = (
        "file_link",
        *_REVISION_COLUMNS,
        "ciphertext_sha256",
        "created_at",
    )
    readonly_fields: ClassVar[tuple[str, ...]] = ("file_link",)
    list_display = ("id", "path", *_REVISION_COLUMNS, "created_at")
    list_select_related = ("author",)
    list_filter = ("change_kind", "author_kind", "created_at")
    search_fields: ClassVar[tuple[str, ...]] = ("file__path",)

    never_loaded = ("ciphertext",)

    @admin.display(description="Path", ordering="file__path")
    def path(self, revision: models.FileVersion) -> str:
        return revision.file.path

    @admin.display(description="File")
    def file_link(self, revision: models.FileVersion) -> str:
        return change_link("workspaces.file", revision.file_id, revision.file.path)


@admin.register(models.KeySession)
class KeySessionAdmin(ViewOnlyAdmin):
    fields = ("id", "workspace", "user", "created_at", "revoked_at", "revocation_link")
    readonly_fields = ("revocation_link",)
    list_display = ("id", "workspace", "user", "created_at", "revoked_at")
    list_select_related = ("workspace", "user")
    list_filter = ("revoked_at", "created_at")
    search_fields = ("=id", *workspace_search_fields(), "user__username")
    actions = ("revoke",)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("workspaces.change_keysession")

    revocation_link = one_to_one_link_column("Revocation", "revocation", missing="Not revoked")

    @admin.action(description="Revoke the selected key sessions", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[models.KeySession]) -> None:
        actor = acting_user(request)
        for session in queryset.order_by("pk"):
            key_session_revoke(session=session, revoked_by=actor)
        self.message_user(request, f"Revoked {queryset.count()} key session(s).")


@admin.register(models.KeySessionRevocation)
class KeySessionRevocationAdmin(ReachesWorkspaceAdmin):
    workspace_via = "key_session"
    fields = ("key_session", "workspace", "revoked_by", "revoked_at")
    list_display = fields
    list_select_related = ("revoked_by",)
    list_filter = ("revoked_at",)
    search_fields = ("=key_session__id", "revoked_by__username")


@admin.register(models.AuditEvent)
class AuditEventAdmin(ViewOnlyAdmin):
    fields = (
        "occurred_at",
        "action",
        "actor",
        "actor_username",
        "org_link",
        "workspace_link",
        "target_type",
        "target_link",
        "detail",
    )
    readonly_fields = ("org_link", "workspace_link", "target_link")
    list_display = (
        "occurred_at",
        "action",
        "actor_username",
        "org_id",
        "workspace_id",
        "target_type",
        "target_id",
    )
    # Every column is the row's own: the trail holds plain ids so it outlives its subjects.
    list_select_related = ()
    list_filter = ("action", "occurred_at")
    search_fields = ("org_id__exact", "workspace_id__exact", "=target_id", "actor_username")
    date_hierarchy = "occurred_at"

    # Targets that have an admin page, by the target_type the services record.
    TARGET_MODELS = {"key_session": "workspaces.keysession"}

    org_link = id_link_column("Org", "workspaces.org", "org_id")

    workspace_link = id_link_column("Workspace", "workspaces.workspace", "workspace_id")

    @admin.display(description="Target")
    def target_link(self, event: models.AuditEvent) -> str:
        model_label = self.TARGET_MODELS.get(event.target_type)
        if model_label is None or not event.target_id:
            return event.target_id or "-"
        return change_link(model_label, event.target_id, event.target_id)


# django-axes' sign-in attempts. Its "Clean up expired attempts" action names no permission,
# so it is offered to anyone who may view the list, and it answers 500 whoever runs it
# (the handler reads an attribute only its middleware sets on a sign-in request). Expired
# attempts are cleaned at every failed sign-in anyway; a lockout is lifted by deleting its row.
admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class SignInAttemptAdmin(AccessAttemptAdmin):
    actions: ClassVar[list[str]] = []
