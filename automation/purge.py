"""The org purge: hard-delete everything an org owns once its grace period is over.

It lives in the top app because an org owns rows in every app. `PURGE_PLAN` names every
model that holds an org's data, with the path from it to the org, children before
parents; a test enumerates the app registry, so a new model that is neither in the plan
nor deliberately retained fails the suite instead of being missed.

Every data key of the org (each workspace's, and its teams' space keys: every model that
is a `WrappedDataKey`), and the cache's unwrapped copies of them, is destroyed before any
other row: once the keys are gone, a backup holding the org's ciphertext (revisions, space
documents, transcripts, proposals) can no longer be read. The plan lists the keys first,
`_keys_first` refuses a plan that does not, and each run checks that no key row is left
before it deletes anything else.

Each batch deletes at most `PURGE_BATCH_ROWS` rows in its own short transaction, so no
lock is held for long. Rows are deleted with one DELETE per batch rather than Django's
`delete()`, which would read every related row into Python first.

When the org is gone, the purge records a signed `PurgeReceipt` (automation/receipts.py):
the rows it deleted per model, a digest of their ids, and that the keys went first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection, models, transaction
from django.db.models import Q
from django.utils import timezone

from automation.models import Admission, PurgeReceipt
from automation.receipts import (
    RECEIPT_FORMAT,
    RECEIPT_TYPE,
    deleted_ids_digest,
    deployment_public_key,
    name_digest,
    receipt_sign,
    timestamp,
)
from automation.tokens import delivery_credential_cache_key
from memory.spaces.filesystem import FilesystemStore
from workspaces.crypto import unwrapped_keys_forget
from workspaces.models import (
    AuditEvent,
    KeySession,
    Org,
    Team,
    WrappedDataKey,
    key_session_cache_key,
)
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

    @property
    def destroys_keys(self) -> bool:
        return issubclass(self.model, WrappedDataKey)

    def rows(self, org_id: int) -> models.QuerySet[models.Model]:
        return self.model._base_manager.filter(**{self.org_path: org_id})


class PurgeOrderBroken(RuntimeError):
    """A data key of the org would outlive the first row of anything else. The purge stops
    before deleting that row; a later sweep takes the stalled org over."""


# The data keys first (nothing references them), then children before parents: when a
# step runs, nothing left references its rows.
PURGE_PLAN: tuple[PurgeStep, ...] = (
    PurgeStep("workspaces.WorkspaceKey", "workspace__team__org"),
    PurgeStep("memory.SpaceKey", "tenant__org"),
    PurgeStep("automation.CommitFence", "admission__workspace__team__org"),
    PurgeStep("automation.Message", "conversation__workspace__team__org"),
    PurgeStep("automation.Turn", "admission__workspace__team__org"),
    PurgeStep("automation.Admission", "workspace__team__org"),
    PurgeStep("automation.DeliveryCredential", "conversation__workspace__team__org"),
    PurgeStep("automation.Conversation", "workspace__team__org"),
    PurgeStep("automation.BotDocumentSeen", "bot__team__org"),
    PurgeStep("memory.Proposal", "workspace__team__org"),
    PurgeStep("memory.LineReview", "workspace__team__org"),
    PurgeStep("memory.LineProvenance", "revision__file__workspace__team__org"),
    PurgeStep("memory.MemoryPolicy", "workspace__team__org"),
    PurgeStep("memory.SpaceDocument", "space__tenant__org"),
    PurgeStep("memory.MemorySpace", "tenant__org"),
    PurgeStep("memory.TenantSpaceUsage", "team__org"),
    PurgeStep("workspaces.FileVersion", "file__workspace__team__org"),
    PurgeStep("workspaces.File", "workspace__team__org"),
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
    "automation.PurgeReceipt": (
        "the proof of the purge must outlive it; it holds ids, counts and digests, never content"
    ),
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
    """Purge one org if it is (still) pending and past its grace, or its purge stalled,
    and record its signed receipt.

    Returns False when there was nothing to do: restored in time, already purged, or
    being purged by someone else right now.
    """
    started_at = timezone.now()
    now = now or started_at
    # Two claims, not one: the receipt says whether this run took over a stalled one
    # (whose deletions it cannot count).
    claimed = Org.objects.filter(_due(now), pk=org_id).update(
        status=Org.Status.PURGING, purge_claimed_at=now
    )
    resumed = not claimed and bool(
        Org.objects.filter(_stalled(now), pk=org_id).update(
            status=Org.Status.PURGING, purge_claimed_at=now
        )
    )
    if not (claimed or resumed):
        return False
    org_name = Org.objects.values_list("name", flat=True).get(pk=org_id)
    _keys_first(PURGE_PLAN)
    # The filesystem store's spaces first, while the teams that name them still exist: a
    # purge that dies after this is taken over and finds nothing left there. Both stores
    # are purged whichever is configured, so switching MEMORY_STORE leaves nothing behind.
    team_ids = list(Team.objects.filter(org_id=org_id).values_list("pk", flat=True))
    spaces_removed = FilesystemStore(root=settings.DATA_DIR / "spaces").purge_tenants(team_ids)
    # The cache's unwrapped copies of the workspace keys go with the wrapped keys, before
    # anything they could decrypt.
    _forget_cached_secrets(KeySession, _org_key_session_ids(org_id))
    unwrapped_keys_forget()
    history: list[object] = []  # the admin's history of the rows deleted
    deleted = {
        step.label: _purge_step(step, org_id, history) for step in PURGE_PLAN if step.destroys_keys
    }
    _require_no_keys_left(org_id)
    for step in PURGE_PLAN:
        if not step.destroys_keys:
            deleted[step.label] = _purge_step(step, org_id, history)
    # The org's own history before the receipt that counts it; the org row goes last.
    history.extend(_admin_history_delete(Org, [org_id]))
    deleted[LogEntry._meta.label] = history
    counts = {label: len(pks) for label, pks in deleted.items()}
    # Digested and signed before the last transaction, which stays as short as the others.
    receipt = _receipt_signed(
        org_id=org_id,
        org_name=org_name,
        started_at=started_at,
        finished_at=timezone.now(),
        deleted={**deleted, Org._meta.label: [org_id]},
        filesystem_documents=spaces_removed,
        resumed=resumed,
    )
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
        receipt.save(force_insert=True)
    return True


def _receipt_signed(
    *,
    org_id: int,
    org_name: str,
    started_at: datetime,
    finished_at: datetime,
    deleted: dict[str, list[object]],
    filesystem_documents: int,
    resumed: bool,
) -> PurgeReceipt:
    """The org's receipt, signed and not yet saved."""
    ids_digest = deleted_ids_digest((label, pk) for label, pks in deleted.items() for pk in pks)
    counts = {label: len(pks) for label, pks in deleted.items()}
    document = receipt_sign(
        {
            "type": RECEIPT_TYPE,
            "format": RECEIPT_FORMAT,
            "org": {"id": org_id, "nameSha256": name_digest(org_name)},
            "startedAt": timestamp(started_at),
            "finishedAt": timestamp(finished_at),
            "deletedRows": counts,
            "deletedIds": {"count": sum(counts.values()), "sha256": ids_digest},
            "filesystemSpaceDocuments": filesystem_documents,
            # True by construction: `_keys_first` and `_require_no_keys_left` stop the
            # purge before any other row is deleted while a key of the org remains, and a
            # run that took over a stalled one repeated both.
            "keysDestroyedBeforeRevisions": True,
            "resumedAfterStall": resumed,
        }
    )
    return PurgeReceipt(
        org_id=org_id,
        org_name_sha256=name_digest(org_name),
        started_at=started_at,
        finished_at=finished_at,
        deleted_rows=sum(counts.values()),
        deleted_ids_sha256=ids_digest,
        signing_key_id=deployment_public_key().key_id,
        document=document,
    )


def _keys_first(plan: tuple[PurgeStep, ...]) -> None:
    """Refuse a plan in which a data key's step follows any other step."""
    seen_other = False
    for step in plan:
        if step.destroys_keys and seen_other:
            raise PurgeOrderBroken(f"{step.label} must come before every step that is not a key")
        seen_other = seen_other or not step.destroys_keys


def _require_no_keys_left(org_id: int) -> None:
    for step in PURGE_PLAN:
        if step.destroys_keys and step.rows(org_id).exists():
            raise PurgeOrderBroken(f"a {step.label} of org {org_id} is still there")


def _org_key_session_ids(org_id: int) -> list[object]:
    return list(KeySession.objects.filter(workspace__team__org=org_id).values_list("pk", flat=True))


def _purgeable(now: datetime) -> Q:
    return _due(now) | _stalled(now)


def _due(now: datetime) -> Q:
    return Q(status=Org.Status.PENDING_DELETION, deletion_due_at__lte=now)


def _stalled(now: datetime) -> Q:
    return Q(status=Org.Status.PURGING, purge_claimed_at__lte=now - PURGE_RECLAIM_AFTER)


def _purge_step(step: PurgeStep, org_id: int, history: list[object]) -> list[object]:
    """Delete the org's rows of one step, and their admin history, whose primary keys go
    to `history`; return the rows' primary keys."""
    deleted: list[object] = []
    rows = step.rows(org_id).order_by("pk")
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
                # A key has no admin history to delete: its admin is view-only
                # (`WrappedDataKeyAdmin`), so no LogEntry names one.
                if not step.destroys_keys:
                    history.extend(_admin_history_delete(step.model, batch))
                Org.objects.filter(pk=org_id).update(purge_claimed_at=timezone.now())
            deleted.extend(batch)
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


def _admin_history_delete(model: type[models.Model], pks: list[object]) -> list[object]:
    """Delete the admin's history of the rows `pks` of `model`; return its primary keys."""
    # The admin's history of a row names it (`object_repr`: an org's, a team's, a
    # workspace's name) and says what changed. It refers to the row by content type and
    # text id, not a foreign key, so nothing deletes it with the row.
    entries: list[object] = list(
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(model),
            object_id__in=[str(pk) for pk in pks],
        ).values_list("pk", flat=True)
    )
    if entries:
        _rows_delete(LogEntry, entries)
    return entries


def _forget_cached_secrets(model: type[models.Model], pks: list[object]) -> None:
    # The cache holds unwrapped keys and delivery credentials by id; they go with the rows.
    if model is KeySession:
        cached_secrets_discard(cache_keys=[key_session_cache_key(pk) for pk in pks])
    elif model is Admission:
        cached_secrets_discard(cache_keys=[delivery_credential_cache_key(pk) for pk in pks])
