"""Staff inspection of conversations, turns, admissions and their commit fences.

All of it is history, so every page is view-only. Pages link along the chain a capture
leaves (admission -> fence -> revision, and back), and an admission's page says in plain
words what became of its capture and what its latest model call was given. No page shows
a transcript (messages appear by role and sequence only) or any credential digest.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, ClassVar

from celery import current_app
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django_celery_beat.admin import PeriodicTaskAdmin, PeriodicTaskForm
from django_celery_beat.models import PeriodicTask

from automation.explain import capture_explanation, recall_explanation
from automation.models import (
    Admission,
    CommitFence,
    Conversation,
    DeliveryCredential,
    Message,
    PurgeReceipt,
    Turn,
)
from memory.admin import ProposalAdmin
from memory.models import Proposal
from workspaces.admin import (
    FileVersionAdmin,
    ReachesWorkspaceAdmin,
    ViewOnlyAdmin,
    change_link,
    changelist_link,
    id_link_column,
    one_to_one_link_column,
    workspace_search_fields,
)
from workspaces.models import FileVersion


@admin.register(Conversation)
class ConversationAdmin(ViewOnlyAdmin):
    fields = ("id", "workspace", "owner", "created_at", "credential_link", "history")
    readonly_fields = ("credential_link", "history")
    list_display = ("id", "workspace", "owner", "created_at")
    list_select_related = ("workspace", "owner")
    list_filter = ("created_at",)
    search_fields = ("=id", *workspace_search_fields(), "owner__username")

    credential_link = one_to_one_link_column(
        "Delivery credential", "credential", missing="None", text=lambda _: "Credential slot"
    )

    @admin.display(description="History")
    def history(self, conversation: Conversation) -> str:
        admissions = changelist_link(
            "automation.admission", "Admissions", conversation__id__exact=conversation.pk
        )
        messages = changelist_link(
            "automation.message", "Messages", conversation__id__exact=conversation.pk
        )
        return format_html("{} · {}", admissions, messages)


@admin.register(DeliveryCredential)
class DeliveryCredentialAdmin(ReachesWorkspaceAdmin):
    workspace_via = "conversation"
    # Never `credential_digest`.
    fields = ("conversation", "workspace", "expires_at", "updated_at")
    list_display = fields
    list_filter = ("expires_at", "updated_at")
    search_fields = ("=conversation__id",)


class RevisionJoinedAdmin(ViewOnlyAdmin):
    """A row listed with the memory revision it names (`revision_field`), which is joined
    for its version only: its ciphertext is never loaded."""

    revision_field: ClassVar[str]
    list_select_related: ClassVar[tuple[str, ...]]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # A queryset that already selects related rows makes the changelist skip
        # list_select_related, so name them all.
        return (
            super()
            .get_queryset(request)
            .select_related(*self.list_select_related)
            .defer(f"{self.revision_field}__ciphertext")
        )


@admin.register(Admission)
class AdmissionAdmin(RevisionJoinedAdmin):
    revision_field = "committed_revision"
    # Never `request_digest`, `credential_digest` or `capture_digest`.
    fieldsets = (
        ("What happened", {"fields": ("capture_explained", "recall_explained")}),
        (
            "Turn",
            {
                "fields": (
                    "id",
                    "owner",
                    "workspace",
                    "conversation_link",
                    "turn_link",
                    "idempotency_key",
                    "admitted_at",
                    "expires_at",
                )
            },
        ),
        (
            "Authority frozen when the message was sent",
            {
                "fields": (
                    "mode",
                    "policy_revision",
                    "clear_generation",
                    "ai_consent_revision",
                    "key_session",
                    "acknowledged_version",
                    "save_in_flight",
                    "has_unresolved_conflict",
                )
            },
        ),
        (
            "Capture",
            {
                "fields": (
                    "status",
                    "committed_at",
                    "fence_link",
                    "revision_link",
                    "capture_refusal_code",
                    "capture_refusal_reason",
                    "capture_refused_at",
                )
            },
        ),
        (
            "Recall receipt",
            {"fields": ("recall_status", "recall_version", "recalled_at", "recall_count")},
        ),
    )
    readonly_fields = (
        "capture_explained",
        "recall_explained",
        "conversation_link",
        "turn_link",
        "fence_link",
        "revision_link",
    )
    list_display = (
        "id",
        "workspace",
        "conversation_link",
        "owner",
        "mode",
        "status",
        "revision_link",
        "recall_status",
        "capture_refusal_code",
        "admitted_at",
    )
    list_select_related = ("workspace", "owner", "committed_revision")
    list_filter = ("mode", "status", "recall_status", "capture_refusal_code", "admitted_at")
    search_fields = (
        "=id",
        "=conversation__id",
        "=turn__id",
        *workspace_search_fields(),
        "owner__username",
    )

    @admin.display(description="Capture")
    def capture_explained(self, admission: Admission) -> str:
        return capture_explanation(admission)

    @admin.display(description="Recall")
    def recall_explained(self, admission: Admission) -> str:
        return recall_explanation(admission)

    conversation_link = id_link_column("Conversation", "automation.conversation", "conversation_id")

    turn_link = one_to_one_link_column("Turn", "turn", missing="None")
    fence_link = one_to_one_link_column(
        "Commit fence", "fence", missing="None (nothing was committed)"
    )

    @admin.display(description="Committed revision", ordering="committed_revision__version")
    def revision_link(self, admission: Admission) -> str:
        revision = admission.committed_revision
        if revision is None:
            return "-"
        return change_link("workspaces.fileversion", revision.pk, f"version {revision.version}")


@admin.register(CommitFence)
class CommitFenceAdmin(RevisionJoinedAdmin, ReachesWorkspaceAdmin):
    revision_field = "revision"
    workspace_via = "admission"
    fields = ("admission", "revision", "workspace", "presented_key_session", "ok", "created_at")
    list_display = ("admission", "revision_version", "workspace", "created_at")
    list_select_related = ("revision",)
    list_filter = ("created_at",)
    search_fields = ("=admission__id", "=admission__conversation__id")

    @admin.display(description="Revision", ordering="revision__version")
    def revision_version(self, fence: CommitFence) -> str:
        return change_link(
            "workspaces.fileversion", fence.revision_id, f"version {fence.revision.version}"
        )


@admin.register(Turn)
class TurnAdmin(ReachesWorkspaceAdmin):
    workspace_via = "admission"
    fields = (
        "id",
        "admission",
        "conversation_link",
        "state",
        "failure_code",
        "created_at",
        "finished_at",
        "messages_link",
    )
    readonly_fields = ("conversation_link", "messages_link")
    list_display = ("id", "admission", "workspace", "state", "failure_code", "created_at")
    list_filter = ("state", "created_at")
    search_fields = ("=id", "=admission__id", "=admission__conversation__id")

    conversation_link = id_link_column(
        "Conversation", "automation.conversation", "admission__conversation_id"
    )

    @admin.display(description="Messages")
    def messages_link(self, turn: Turn) -> str:
        return changelist_link("automation.message", "Messages", turn__id__exact=turn.pk)


@admin.register(Message)
class MessageAdmin(ReachesWorkspaceAdmin):
    workspace_via = "conversation"
    # Metadata only: the sealed body (`ciphertext`) is never shown, nor loaded.
    fields = ("id", "conversation", "turn", "role", "sequence", "created_at")
    list_display = (
        "id",
        "conversation_link",
        "turn_link",
        "workspace",
        "role",
        "sequence",
        "created_at",
    )
    list_filter = ("role", "created_at")
    search_fields = ("=conversation__id", "=turn__id", "=turn__admission__id")

    never_loaded = ("ciphertext",)

    conversation_link = id_link_column("Conversation", "automation.conversation", "conversation_id")
    turn_link = id_link_column("Turn", "automation.turn", "turn_id")


# The revision and proposal pages belong to lower apps, which know nothing of admissions
# and fences (imports point automation -> memory -> workspaces): this app extends them
# with the links along a capture.
admin.site.unregister(FileVersion)
admin.site.unregister(Proposal)


@admin.register(FileVersion)
class CapturedFileVersionAdmin(FileVersionAdmin):
    fields = (*FileVersionAdmin.fields, "fence_link")
    readonly_fields = (*FileVersionAdmin.readonly_fields, "fence_link")
    search_fields = (*FileVersionAdmin.search_fields, "=fence__admission__id")

    # Only automatic captures have a fence; the fence is named by its admission.
    fence_link = one_to_one_link_column(
        "Commit fence",
        "fence",
        missing="None (not an automatic capture)",
        text=lambda fence: f"Fence of admission {fence.pk}",
    )


@admin.register(Proposal)
class ProposingTurnProposalAdmin(ProposalAdmin):
    fields = (*ProposalAdmin.fields, "admission_link")
    readonly_fields = (*ProposalAdmin.readonly_fields, "admission_link")

    admission_link = id_link_column("Admission", "automation.admission", "admission_id")


@admin.register(PurgeReceipt)
class PurgeReceiptAdmin(ViewOnlyAdmin):
    """The signed receipts of purged orgs, each downloadable byte for byte for
    `manage.py purge_receipt verify`. The document is never shown on a page: it is served
    whole, as the file that was signed."""

    fields = (
        "org_id",
        "org_name_sha256",
        "started_at",
        "finished_at",
        "deleted_rows",
        "deleted_ids_sha256",
        "signing_key_id",
        "rows_per_model",
        "download_link",
    )
    readonly_fields = ("rows_per_model", "download_link")
    list_display = (
        "org_id",
        "started_at",
        "finished_at",
        "deleted_rows",
        "signing_key_id",
        "download_link",
    )
    list_select_related = ()
    list_filter = ("finished_at",)
    search_fields = ("org_id__exact", "=org_name_sha256", "=deleted_ids_sha256")

    never_loaded = ("document",)

    def get_urls(self) -> list[URLPattern]:
        download = path(
            "<int:receipt_id>/download/",
            self.admin_site.admin_view(self.download_view),
            name="automation_purgereceipt_download",
        )
        return [download, *super().get_urls()]

    def download_view(self, request: HttpRequest, receipt_id: int) -> HttpResponse:
        # admin_view has already sent anyone who is not active staff to the sign-in page.
        if not self.has_view_permission(request):
            raise PermissionDenied
        receipt = get_object_or_404(PurgeReceipt, pk=receipt_id)
        response = HttpResponse(bytes(receipt.document), content_type="application/json")
        response["Content-Disposition"] = (
            f'attachment; filename="purge-receipt-org-{receipt.org_id}.json"'
        )
        return response

    @admin.display(description="Rows deleted per model")
    def rows_per_model(self, receipt: PurgeReceipt) -> str:
        counts = json.loads(bytes(receipt.document))["receipt"]["deletedRows"]
        return format_html_join(mark_safe("<br>"), "{}: {}", sorted(counts.items()))

    @admin.display(description="Receipt")
    def download_link(self, receipt: PurgeReceipt) -> str:
        url = reverse("admin:automation_purgereceipt_download", args=[receipt.pk])
        return format_html('<a href="{}" download>Download (signed JSON)</a>', url)


class RunnableTaskForm(PeriodicTaskForm):
    """django-celery-beat's form, which saves any task name and any JSON as arguments: a
    misspelt name or arguments the task does not take would be found only when beat fires
    it (the nightly purge failing at 02:00, in a worker's log). Refused here, with why."""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        name, args, kwargs = (cleaned.get(field) for field in ("task", "args", "kwargs"))
        current_app.loader.import_default_modules()
        task = current_app.tasks.get(name) if name else None
        if name and task is None:
            self.add_error("task", f"No such task: {name!r} is not a registered Celery task.")
        args = json.loads(args) if isinstance(args, str) else None
        kwargs = json.loads(kwargs) if isinstance(kwargs, str) else None
        if args is not None and not isinstance(args, list):
            self.add_error("args", "The positional arguments are a JSON list, such as [].")
        elif kwargs is not None and not isinstance(kwargs, dict):
            self.add_error("kwargs", "The keyword arguments are a JSON object, such as {}.")
        elif task is not None and args is not None and kwargs is not None:
            try:
                inspect.signature(task.run).bind(*args, **kwargs)
            except TypeError as mismatch:
                self.add_error(None, f"{name} does not take these arguments: {mismatch}.")
        return cleaned


# The beat schedules (the nightly org purge, the turn reaper): a schedule is refused when
# beat could not run it, and its enable, disable, toggle and run-now actions, which
# django-celery-beat offers to anyone who may view the list, are for staff who may change it.
admin.site.unregister(PeriodicTask)


@admin.register(PeriodicTask)
class BeatScheduleAdmin(PeriodicTaskAdmin):
    form = RunnableTaskForm

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if self.has_change_permission(request):
            return actions
        return {name: action for name, action in actions.items() if name not in self.actions}
