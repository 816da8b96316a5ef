"""Conversations, the ingress that admits a turn, and the one automatic writer of memory.

Linearization. An automatic write commits in one transaction that first takes, in this
fixed order, a share lock on each row a retiring action updates: the workspace's memory
policy (mode change, Clear), the workspace (AI consent), the conversation's credential
slot (a newer turn), the key session (revocation); then the admission itself for update.
The revision and the fence row follow. A retiring action that commits first is therefore
seen by the fence's predicate, which reads the rows afresh in its own statement; one
that comes later waits for the lock and finds the capture already done. On SQLite the
IMMEDIATE transaction serialises writers outright, which gives the same order.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Max
from django.utils import timezone

from automation.errors import (
    CaptureConflict,
    CaptureRetired,
    IdempotencyKeyReused,
    MemoryOversized,
    WorkspaceAiDisabled,
)
from automation.models import (
    FENCE_CONSTRAINT,
    Admission,
    CommitFence,
    Conversation,
    DeliveryCredential,
    Message,
    RecallStatus,
    Turn,
)
from automation.selectors import fence_failed_predicates, recall_facts
from automation.tokens import delivery_credential_cache_key, delivery_credential_generate
from memory.edits import MemoryChange, apply_memory_changes, is_encodable
from memory.models import MEMORY_PATH, MemoryPolicy
from memory.selectors import memory_current_get, memory_policy_get
from memory.services import memory_proposal_create
from workspaces.crypto import record_associated_data, seal
from workspaces.errors import (
    DocumentUnreadable,
    DomainError,
    InvalidText,
    KeySessionUnavailable,
    VersionConflict,
)
from workspaces.models import (
    FileVersion,
    KeySession,
    KeySessionRevocation,
    User,
    Workspace,
)
from workspaces.services import (
    file_write,
    key_session_cached_key,
    key_session_resolve,
    workspace_key_unwrap,
)


def conversation_create(*, workspace: Workspace, owner: User) -> Conversation:
    return Conversation.objects.create(workspace=workspace, owner=owner)


@dataclass(frozen=True)
class MemoryState:
    """What the sender's client reported with X-Memory-State about its own Saves: the
    version its last Save was acknowledged at, whether a Save was still in flight after
    waiting, and whether its last Save met a conflict it has not resolved. An unsaved
    draft is never reported: it is not saved memory."""

    acknowledged_version: int
    save_in_flight: bool
    has_unresolved_conflict: bool = False


@dataclass(frozen=True)
class AdmittedTurn:
    admission: Admission
    turn: Turn
    is_new: bool


def message_admit(
    *,
    conversation: Conversation,
    sender: User,
    text: str,
    idempotency_key: str,
    key_session_id: uuid.UUID | None,
    memory_state: MemoryState | None,
) -> AdmittedTurn:
    """Admit one sent message before it reaches the assistant.

    Freezes the authority the turn runs under and writes a fresh delivery credential
    into the conversation's slot, in one transaction. A resend with the same key and
    body returns the original admission and turn; with another body it is refused.
    The credential itself goes only to the cache, for the runtime; the database keeps
    its SHA-256.
    """
    if not is_encodable(text):
        raise InvalidText()
    request_digest = hashlib.sha256(text.encode()).hexdigest()
    existing = _admission_for_key(conversation, idempotency_key, request_digest)
    if existing is not None:
        return existing
    workspace = Workspace.objects.get(pk=conversation.workspace_id)
    if not workspace.ai_enabled:
        raise WorkspaceAiDisabled()
    key_session = None
    if key_session_id is not None:
        key_session = KeySession.objects.filter(
            pk=key_session_id, user=sender, workspace=workspace, revoked_at__isnull=True
        ).first()
        if key_session is None:
            raise KeySessionUnavailable(reason="unknown")
    raw_credential, credential_digest = delivery_credential_generate()
    now = timezone.now()
    expires_at = now + timedelta(seconds=settings.ADMISSION_TTL_SECONDS)
    policy = memory_policy_get(workspace=workspace)
    try:
        with transaction.atomic():
            DeliveryCredential.objects.update_or_create(
                conversation=conversation,
                defaults={
                    "credential_digest": credential_digest,
                    "expires_at": expires_at,
                    "updated_at": now,
                },
            )
            admission = Admission.objects.create(
                owner=sender,
                workspace=workspace,
                conversation=conversation,
                idempotency_key=idempotency_key,
                request_digest=request_digest,
                mode=policy.mode,
                policy_revision=policy.policy_revision,
                clear_generation=policy.clear_generation,
                ai_consent_revision=workspace.ai_consent_revision,
                key_session=key_session,
                acknowledged_version=memory_state.acknowledged_version if memory_state else None,
                save_in_flight=memory_state.save_in_flight if memory_state else None,
                has_unresolved_conflict=(
                    memory_state.has_unresolved_conflict if memory_state else None
                ),
                credential_digest=credential_digest,
                admitted_at=now,
                expires_at=expires_at,
            )
            turn = Turn.objects.create(admission=admission, created_at=now)
            transcript_append(
                turn=turn, workspace=workspace, role=Message.Role.USER, body={"content": text}
            )
            cache_key = delivery_credential_cache_key(admission.pk)
            transaction.on_commit(
                lambda: cache.set(cache_key, raw_credential, settings.ADMISSION_TTL_SECONDS)
            )
            # After the credential is in the cache: the runtime needs it. Eager in the
            # embedded default, so the turn has run by the time the request answers.
            transaction.on_commit(lambda: turn_enqueue(turn_id=turn.pk))
    except IntegrityError:
        # A concurrent resend with the same key won the insert; answer as a resend.
        raced = _admission_for_key(conversation, idempotency_key, request_digest)
        if raced is None:
            raise
        return raced
    return AdmittedTurn(admission=admission, turn=turn, is_new=True)


def _admission_for_key(
    conversation: Conversation, idempotency_key: str, request_digest: str
) -> AdmittedTurn | None:
    admission = (
        Admission.objects.select_related("turn")
        .filter(conversation=conversation, idempotency_key=idempotency_key)
        .first()
    )
    if admission is None:
        return None
    if admission.request_digest != request_digest:
        raise IdempotencyKeyReused()
    return AdmittedTurn(admission=admission, turn=admission.turn, is_new=False)


@dataclass(frozen=True)
class CaptureReceipt:
    admission_id: uuid.UUID
    version: int
    bytes: int
    committed_at: datetime
    is_replay: bool
    is_unchanged: bool = False


def capture_request_digest(*, expected_version: int, changes: list[MemoryChange]) -> str:
    body = {"expectedVersion": expected_version, "changes": [c.as_dict() for c in changes]}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _checkpoint(stage: str) -> None:
    """A named point in the capture. Does nothing; tests replace it to interleave a
    retiring action at an exact moment ("validated": key session checked, before the
    transaction; "locked": inside the transaction, all fence locks held)."""


def capture_commit(
    *,
    admission: Admission,
    owner: User,
    workspace: Workspace,
    key_session_id: uuid.UUID,
    expected_version: int,
    changes: list[MemoryChange],
) -> CaptureReceipt:
    """Run the automatic writer (`_capture`), and record on the admission why it was
    refused, if it was, so that staff can answer "why was this not remembered?"."""
    try:
        return _capture(
            admission=admission,
            owner=owner,
            workspace=workspace,
            key_session_id=key_session_id,
            expected_version=expected_version,
            changes=changes,
        )
    except DomainError as refusal:
        reason = refusal.detail.get("predicate") or refusal.detail.get("reason") or ""
        Admission.objects.filter(pk=admission.pk).update(
            capture_refusal_code=refusal.code,
            capture_refusal_reason=str(reason)[:64],
            capture_refused_at=timezone.now(),
        )
        raise


def _capture(
    *,
    admission: Admission,
    owner: User,
    workspace: Workspace,
    key_session_id: uuid.UUID,
    expected_version: int,
    changes: list[MemoryChange],
) -> CaptureReceipt:
    """The automatic writer: apply `changes` to memory at `expected_version`, fenced.

    A retry of the committed capture with the same body replays its receipt without a
    new revision; any other second capture in the turn is refused. The key session is
    re-validated against the cache right before the transaction. The revision, the
    fence row and the admission's commit are one transaction: if any fence clause is
    false the CHECK aborts it and nothing remains. On a version conflict the newer text
    stays and the change is stored as a proposal (never rebased).
    """
    request_digest = capture_request_digest(expected_version=expected_version, changes=changes)
    if admission.is_committed:
        if admission.capture_digest == request_digest:
            return _receipt(admission_id=admission.pk, is_replay=True)
        raise CaptureRetired(predicate="admission_unconsumed", failed=["admission_unconsumed"])
    data_key = key_session_resolve(session_id=key_session_id, workspace=workspace, user=owner)
    current = (
        memory_current_get(workspace=workspace, data_key=data_key) if expected_version else None
    )
    if current is not None and current.version != expected_version:
        _refuse_if_retired(admission, owner, workspace, key_session_id)
        raise _conflict_with_proposal(admission, changes, current.version, data_key)
    current_text = current.content if current else ""
    bound = settings.MEMORY_RECALL_MAX_BYTES
    if len(current_text.encode()) > bound:
        raise MemoryOversized(reason="memory_over_bound", boundBytes=bound)
    new_text = apply_memory_changes(current_text, changes)
    if len(new_text.encode()) > bound:
        raise MemoryOversized(reason="result_over_bound", boundBytes=bound)
    if new_text == current_text and expected_version:
        return CaptureReceipt(
            admission_id=admission.pk,
            version=expected_version,
            bytes=len(current_text.encode()),
            committed_at=timezone.now(),
            is_replay=False,
            is_unchanged=True,
        )
    _checkpoint("validated")
    now = timezone.now()
    try:
        with transaction.atomic():
            _fence_locks_take(admission)
            _checkpoint("locked")
            revision = file_write(
                workspace=workspace,
                path=MEMORY_PATH,
                plaintext=new_text,
                base_version=expected_version,
                data_key=data_key,
                author=owner,
                author_kind=FileVersion.AuthorKind.AUTOMATIC,
                change_kind=FileVersion.ChangeKind.CAPTURE,
            )
            _fence_insert(
                admission=admission,
                revision=revision,
                owner=owner,
                workspace=workspace,
                key_session_id=key_session_id,
                now=now,
            )
            Admission.objects.filter(pk=admission.pk).update(
                status=Admission.Status.COMMITTED,
                committed_at=now,
                committed_revision=revision,
                capture_digest=request_digest,
            )
    except IntegrityError as error:
        if FENCE_CONSTRAINT not in str(error):
            raise
        failed = fence_failed_predicates(
            admission_id=admission.pk,
            owner=owner,
            workspace=workspace,
            key_session_id=key_session_id,
            now=now,
        )
        raise CaptureRetired(predicate=failed[0] if failed else "unknown", failed=failed) from None
    except VersionConflict as conflict:
        _refuse_if_retired(admission, owner, workspace, key_session_id)
        current_version = int(conflict.detail.get("currentVersion", 0))
        raise _conflict_with_proposal(admission, changes, current_version, data_key) from None
    return CaptureReceipt(
        admission_id=admission.pk,
        version=revision.version,
        bytes=revision.size_bytes,
        committed_at=now,
        is_replay=False,
    )


def _refuse_if_retired(
    admission: Admission, owner: User, workspace: Workspace, key_session_id: uuid.UUID
) -> None:
    # A turn that lost its authority gets no proposal either: its change is not kept.
    failed = fence_failed_predicates(
        admission_id=admission.pk,
        owner=owner,
        workspace=workspace,
        key_session_id=key_session_id,
        now=timezone.now(),
    )
    if failed:
        raise CaptureRetired(predicate=failed[0], failed=failed)


def _conflict_with_proposal(
    admission: Admission, changes: list[MemoryChange], current_version: int, data_key: bytes
) -> CaptureConflict:
    proposal = memory_proposal_create(
        workspace=admission.workspace,
        admission_id=admission.pk,
        changes=changes,
        base_version=current_version,
        clear_generation=admission.clear_generation,
        reason="version_conflict",
        data_key=data_key,
    )
    return CaptureConflict(currentVersion=current_version, proposalId=str(proposal.pk))


def _receipt(*, admission_id: uuid.UUID, is_replay: bool) -> CaptureReceipt:
    fence = CommitFence.objects.select_related("revision", "admission").get(
        admission_id=admission_id
    )
    return CaptureReceipt(
        admission_id=admission_id,
        version=fence.revision.version,
        bytes=fence.revision.size_bytes,
        committed_at=fence.created_at,
        is_replay=is_replay,
    )


def _table(model: type) -> str:
    return connection.ops.quote_name(model._meta.db_table)  # type: ignore[attr-defined]


def _uuid(model: type, value: uuid.UUID) -> Any:
    return model._meta.pk.get_db_prep_value(value, connection)  # type: ignore[attr-defined]


def _fence_locks_take(admission: Admission) -> None:
    """Take the fence's locks in the documented order (PostgreSQL; SQLite is already
    serialised by its IMMEDIATE transaction). Call inside the capture's transaction."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        # Order: policy, workspace, credential slot, key session (shared), admission.
        for sql, param in [
            (
                f"SELECT 1 FROM {_table(MemoryPolicy)} WHERE workspace_id = %s FOR SHARE",
                admission.workspace_id,
            ),
            (f"SELECT 1 FROM {_table(Workspace)} WHERE id = %s FOR SHARE", admission.workspace_id),
            (
                f"SELECT 1 FROM {_table(DeliveryCredential)} WHERE conversation_id = %s FOR SHARE",
                _uuid(Conversation, admission.conversation_id),
            ),
            (
                f"SELECT 1 FROM {_table(KeySession)} WHERE id = %s FOR SHARE",
                _uuid(KeySession, admission.key_session_id) if admission.key_session_id else None,
            ),
            (
                f"SELECT 1 FROM {_table(Admission)} WHERE id = %s FOR UPDATE",
                _uuid(Admission, admission.pk),
            ),
        ]:
            if param is not None:
                cursor.execute(sql, [param])


def _fence_insert(
    *,
    admission: Admission,
    revision: FileVersion,
    owner: User,
    workspace: Workspace,
    key_session_id: uuid.UUID,
    now: datetime,
) -> None:
    """Insert the fence row with `ok` computed from the admission and the live rows.

    Two traps are closed here: CASE turns an unknown (NULL) comparison into 0, since a
    CHECK passes on NULL; and an INSERT ... SELECT that finds no admission inserts
    nothing and raises nothing, so the row count is asserted.
    """
    moment = connection.ops.adapt_datetimefield_value(now)
    presented = _uuid(KeySession, key_session_id)
    sql = f"""
        INSERT INTO {_table(CommitFence)}
            (admission_id, revision_id, presented_key_session_id, ok, created_at)
        SELECT a.id, %s, %s,
            CASE WHEN a.owner_id = %s
                AND a.workspace_id = %s
                AND a.status = 'admitted'
                AND a.expires_at > %s
                AND a.mode = 'auto'
                AND p.mode = 'auto'
                AND p.policy_revision = a.policy_revision
                AND p.clear_generation = a.clear_generation
                AND w.ai_enabled = %s
                AND w.ai_consent_revision = a.ai_consent_revision
                AND c.credential_digest = a.credential_digest
                AND c.expires_at > %s
                AND a.key_session_id = %s
                AND NOT EXISTS (
                    SELECT 1 FROM {_table(KeySessionRevocation)} r
                    WHERE r.key_session_id = %s
                )
            THEN 1 ELSE 0 END,
            %s
        FROM {_table(Admission)} a
        JOIN {_table(Workspace)} w ON w.id = a.workspace_id
        LEFT JOIN {_table(MemoryPolicy)} p ON p.workspace_id = a.workspace_id
        LEFT JOIN {_table(DeliveryCredential)} c ON c.conversation_id = a.conversation_id
        WHERE a.id = %s
    """  # identifiers come from model metadata; every value is a parameter
    params: list[Any] = [
        revision.pk,
        presented,
        owner.pk,
        workspace.pk,
        moment,
        True,
        moment,
        presented,
        presented,
        moment,
        _uuid(Admission, admission.pk),
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        inserted = cursor.rowcount
    if inserted != 1:
        raise CaptureRetired(predicate="admission_exists", failed=["admission_exists"])


TURN_TASK = "automation.turn_run"


def turn_enqueue(*, turn_id: uuid.UUID) -> None:
    """Hand a turn to the runtime: a Celery worker, or this process when eager."""
    current_app.tasks[TURN_TASK].delay(str(turn_id))


def transcript_append(
    *, turn: Turn, workspace: Workspace, role: str, body: dict[str, Any]
) -> Message:
    """Append a sealed entry to the turn's transcript.

    The transcript is the conversation's own record; the memory block a model call
    was given is never passed here.
    """
    message_id = uuid.uuid4()
    sequence = (turn.messages.aggregate(last=Max("sequence"))["last"] or 0) + 1
    sealed = seal(
        data_key=workspace_key_unwrap(workspace=workspace),
        plaintext=json.dumps(body).encode(),
        associated_data=record_associated_data(
            kind="message", workspace_id=workspace.pk, record_id=message_id
        ),
    )
    return Message.objects.create(
        id=message_id,
        conversation_id=turn.admission.conversation_id,
        turn=turn,
        role=role,
        sequence=sequence,
        ciphertext=sealed,
    )


def turn_finish(*, turn: Turn, failure_code: str = "") -> None:
    """Mark a running turn completed (or failed, with a code and never any text)."""
    state = Turn.State.FAILED if failure_code else Turn.State.COMPLETED
    Turn.objects.filter(pk=turn.pk, state=Turn.State.RUNNING).update(
        state=state, finished_at=timezone.now(), failure_code=failure_code
    )


def turn_claim(*, turn_id: uuid.UUID) -> bool:
    """Move a queued turn to running; False if another worker already has it."""
    return (
        Turn.objects.filter(pk=turn_id, state=Turn.State.QUEUED).update(state=Turn.State.RUNNING)
        == 1
    )


@dataclass(frozen=True)
class Recall:
    """What one model call is given: the text only when provided, else the reason."""

    status: str
    version: int | None
    text: str | None = None


def memory_recall(*, admission: Admission) -> Recall:
    """Read memory for one model call, as the turn may see it now, and record the receipt.

    Runs before every model call, so a Save, a Clear or Off between two calls of one
    turn reaches the second. When memory is withheld the status says why; an older
    copy is never substituted. One query reads every live fact the decision needs.
    """
    recall = _recall_inspect(admission)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # The receipt is a diagnostic record: losing the last few to a server crash
            # is acceptable, waiting for a WAL flush on every model call is not.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        Admission.objects.filter(pk=admission.pk).update(
            recall_status=recall.status,
            recall_version=recall.version,
            recalled_at=timezone.now(),
            recall_count=F("recall_count") + 1,
        )
    return recall


def _recall_inspect(admission: Admission) -> Recall:
    live = recall_facts(admission=admission)
    if live is None or not live.is_member or not live.ai_enabled:
        return Recall(RecallStatus.NO_ACCESS, None)
    if live.credential_digest != admission.credential_digest:
        return Recall(RecallStatus.SUPERSEDED, None)
    if live.mode == MemoryPolicy.Mode.OFF:
        return Recall(RecallStatus.OFF, None)
    data_key = (
        key_session_cached_key(
            session_id=admission.key_session_id, workspace_id=admission.workspace_id
        )
        if admission.key_session_id is not None and live.key_session_usable
        else None
    )
    if data_key is None:
        return Recall(RecallStatus.UNAVAILABLE, None)
    if live.memory_deleted:
        return Recall(RecallStatus.DELETED, live.memory_version)
    try:
        current = live.memory_text(data_key=data_key, workspace_id=admission.workspace_id)
    except DocumentUnreadable:
        # A revision that fails its integrity check is withheld like any other memory
        # the turn cannot have; the turn itself goes on.
        return Recall(RecallStatus.UNAVAILABLE, live.memory_version)
    if admission.save_in_flight:
        return Recall(RecallStatus.PENDING, current.version)
    if admission.has_unresolved_conflict:
        return Recall(RecallStatus.CONFLICT, current.version)
    acknowledged = admission.acknowledged_version
    if acknowledged is not None and acknowledged > current.version:
        # The sender saw a Save acknowledged that this server does not hold.
        return Recall(RecallStatus.STALE, current.version)
    if not current.content:
        return Recall(RecallStatus.EMPTY, current.version)
    if not current.is_recallable:
        return Recall(RecallStatus.OVERSIZED, current.version)
    return Recall(RecallStatus.PROVIDED, current.version, current.content)
