"""The org purge: hard-delete everything an org owns once its grace period is over.

It lives in the top app because an org owns rows in every app. `PURGE_PLAN` names every
model that holds an org's data, with the path from it to the org, children before
parents; a test enumerates the app registry, so a new model that is neither in the plan
nor deliberately retained fails the suite instead of being missed.

Each batch deletes at most `PURGE_BATCH_ROWS` rows in its own short transaction, so no
lock is held for long. Rows are deleted with one DELETE per batch rather than Django's
`delete()`, which would read every related row into Python first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from automation.models import Admission
from automation.tokens import delivery_credential_cache_key
from memory.spaces.filesystem import FilesystemStore
from workspaces.crypto import unwrapped_keys_forget
from workspaces.models import AuditEvent, KeySession, Org, Team, key_session_cache_key
from workspaces.services import audit_record, cached_secrets_discard
from workspaces.sql import pk_param, table

PURGE_BATCH_ROWS = 1000
# A purge that has not advanced for this long is presumed dead and may be taken over.
PURGE_RECLAIM_AFTER = timedelta(hours=1)


@dataclass(frozen=True)
class PurgeStep:
    # By label, as the purge's audit event counts them, so the plan reads as one list of
    # every app's models without importing each by name.
    label: str
    org_path: str

    @property
    def model(self) -> type[models.Model]:
        return apps.get_model(self.label)


# Children before parents: when a step runs, nothing left references its rows.
PURGE_PLAN: tuple[PurgeStep, ...] = (
    PurgeStep("automation.CommitFence", "admission__workspace__team__org"),
    PurgeStep("automation.Message", "conversation__workspace__team__org"),
    PurgeStep("automation.Turn", "admission__workspace__team__org"),
    PurgeStep("automation.Admission", "workspace__team__org"),
    PurgeStep("automation.DeliveryCredential", "conversation__workspace__team__org"),
    PurgeStep("automation.Conversation", "workspace__team__org"),
    PurgeStep("automation.BotDocumentSeen", "bot__team__org"),
    PurgeStep("memory.Proposal", "workspace__team__org"),
    PurgeStep("memory.MemoryPolicy", "workspace__team__org"),
    PurgeStep("memory.SpaceDocument", "space__tenant__org"),
    PurgeStep("memory.MemorySpace", "tenant__org"),
    PurgeStep("memory.TenantSpaceUsage", "team__org"),
    PurgeStep("memory.SpaceKey", "tenant__org"),
    PurgeStep("workspaces.FileVersion", "file__workspace__team__org"),
    PurgeStep("workspaces.File", "workspace__team__org"),
    PurgeStep("workspaces.WorkspaceKey", "workspace__team__org"),
    PurgeStep("workspaces.KeySessionRevocation", "key_session__workspace__team__org"),
    PurgeStep("workspaces.KeySession", "workspace__team__org"),
    PurgeStep("workspaces.WorkspaceMembership", "workspace__team__org"),
    PurgeStep("workspaces.Workspace", "team__org"),
    PurgeStep("workspaces.ApiToken", "team__org"),
    PurgeStep("workspaces.Bot", "team__org"),
    PurgeStep("workspaces.TeamStorageUsage", "team__org"),
    PurgeStep("workspaces.TeamMembership", "team__org"),
    PurgeStep("workspaces.Team", "org"),
)

# Deliberately kept, with the reason. Everything else an org owns is in PURGE_PLAN.
RETAINED: dict[str, str] = {
    "workspaces.AuditEvent": (
        "the audit trail must outlive what it records; it holds ids, never content"
    ),
    "workspaces.User": "a person is not owned by one org; only their memberships of it are removed",
    "workspaces.Org": "deleted by the purge itself, last, once nothing references it",
}


def org_purge_due(*, now: datetime | None = None) -> list[int]:
    """The nightly sweep: purge every org whose grace is over. Returns the purged ids.

    Safe to run twice at once: each org is claimed by a conditional update, so only one
    sweep purges it and the other moves on.
    """
    now = now or timezone.now()
    due = Org.objects.filter(_purgeable(now)).order_by("pk").values_list("pk", flat=True)
    return [org_id for org_id in list(due) if org_purge(org_id=org_id, now=now)]


def org_purge(*, org_id: int, now: datetime | None = None) -> bool:
    """Purge one org if it is (still) pending and past its grace, or its purge stalled.

    Returns False when there was nothing to do: restored in time, already purged, or
    being purged by someone else right now.
    """
    now = now or timezone.now()
    claimed = Org.objects.filter(_purgeable(now), pk=org_id).update(
        status=Org.Status.PURGING, purge_claimed_at=now
    )
    if claimed != 1:
        return False
    # The filesystem store's spaces first, while the teams that name them still exist: a
    # purge that dies after this is taken over and finds nothing left there. Both stores
    # are purged whichever is configured, so switching MEMORY_STORE leaves nothing behind.
    team_ids = list(Team.objects.filter(org_id=org_id).values_list("pk", flat=True))
    spaces_removed = FilesystemStore(root=settings.DATA_DIR / "spaces").purge_tenants(team_ids)
    counts = {step.label: _purge_step(step, org_id) for step in PURGE_PLAN}
    # The org's data keys are deleted; none stays unwrapped in this process either.
    unwrapped_keys_forget()
    with transaction.atomic():
        audit_record(
            actor=None,
            action=AuditEvent.Action.ORG_PURGED,
            org_id=org_id,
            detail={"deletedRows": counts, "filesystemSpaceDocuments": spaces_removed},
        )
        # By now nothing references the org, so the collector's look for related rows is
        # one empty read.
        Org.objects.filter(pk=org_id, status=Org.Status.PURGING).delete()
    return True


def _purgeable(now: datetime) -> Q:
    return Q(status=Org.Status.PENDING_DELETION, deletion_due_at__lte=now) | Q(
        status=Org.Status.PURGING, purge_claimed_at__lte=now - PURGE_RECLAIM_AFTER
    )


def _purge_step(step: PurgeStep, org_id: int) -> int:
    deleted = 0
    rows = step.model._base_manager.filter(**{step.org_path: org_id}).order_by("pk")
    while rows.exists():
        # Keyset pagination: each batch starts after the last primary key it deleted, so
        # rows of other orgs interleaved with this org's are walked past once in all,
        # not once per batch (which made the purge quadratic in the table's size).
        last: object = None
        while True:
            page = rows if last is None else rows.filter(pk__gt=last)
            with transaction.atomic():
                batch = list(page.values_list("pk", flat=True)[:PURGE_BATCH_ROWS])
                if not batch:
                    break
                _forget_cached_secrets(step.model, batch)
                _rows_delete(step.model, batch)
                Org.objects.filter(pk=org_id).update(purge_claimed_at=timezone.now())
            deleted += len(batch)
            last = batch[-1]
    return deleted


def _rows_delete(model: type[models.Model], pks: list[object]) -> None:
    # SQL: QuerySet.delete() reads the related rows of every batch first, and the form that
    # skips that (`_raw_delete`) is private. One DELETE: no per-row Python work.
    placeholders = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table(model)} "
            f"WHERE {connection.ops.quote_name(str(model._meta.pk.column))} IN ({placeholders})",
            [pk_param(model, pk) for pk in pks],
        )


def _forget_cached_secrets(model: type[models.Model], pks: list[object]) -> None:
    # The cache holds unwrapped keys and delivery credentials by id; they go with the rows.
    if model is KeySession:
        cached_secrets_discard(cache_keys=[key_session_cache_key(pk) for pk in pks])
    elif model is Admission:
        cached_secrets_discard(cache_keys=[delivery_credential_cache_key(pk) for pk in pks])
