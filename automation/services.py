"""Conversations, the ingress that admits a turn, the turn's lifecycle and transcript, and
recall at the model binding. The automatic writer of memory is in `automation.capture`."""

from __future__ import annotations

import functools
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone
from kombu.exceptions import OperationalError

from automation.errors import (
    IdempotencyKeyReused,
    WorkspaceAiDisabled,
)
from automation.models import (
    Admission,
    Conversation,
    DeliveryCredential,
    Message,
    RecallStatus,
    Turn,
)
from automation.prompts import memory_block
from automation.selectors import RecallFacts, RecallSender, recall_facts, turn_expiry_refuse
from automation.tokens import delivery_credential_cache_key, delivery_credential_generate
from memory.edits import is_encodable
from memory.models import MemoryPolicy
from memory.selectors import memory_policy_get
from workspaces.crypto import RecordAddress, record_seal, text_digest
from workspaces.errors import (
    DocumentUnreadable,
    InvalidText,
    KeySessionUnavailable,
)
from workspaces.models import (
    KeySession,
    User,
    Workspace,
    WorkspaceMembership,
)
from workspaces.services import (
    cached_secrets_discard,
    key_session_cached_data_key,
    key_session_open,
    key_session_revoke,
    workspace_key_ensure,
)
from workspaces.sql import (
    datetime_param,
    driver_cursor,
    key_session_revoked,
    pk_param,
    table,
    unsynchronized,
)
from workspaces.violations import violation_code

logger = logging.getLogger(__name__)


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
    request_digest = text_digest(purpose="message", text=text.encode())
    existing = _admission_for_key(conversation, idempotency_key, request_digest)
    if existing is not None:
        return existing
    workspace = Workspace.objects.get(pk=conversation.workspace_id)
    if not workspace.ai_enabled:
        raise WorkspaceAiDisabled()
    if key_session_id is not None:
        # Refused with the reasons key-session resolution gives, so the sender's own
        # revoked session (stamped, or with a durable revocation row) is `revoked`.
        revoked = key_session_revoked(
            session_id=key_session_id, workspace_id=workspace.pk, user_id=sender.pk
        )
        if revoked is None:
            raise KeySessionUnavailable(reason="unknown")
        if revoked:
            raise KeySessionUnavailable(reason="revoked")
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
                key_session_id=key_session_id,
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
                turn=turn,
                workspace=workspace,
                data_key=workspace_key_ensure(workspace=workspace),
                role=Message.Role.USER,
                body={"content": text},
            )
            cache_key = delivery_credential_cache_key(admission.pk)
            # Robust: with the cache unreachable an out-of-process runtime cannot pick the
            # credential up, but the turn must still be enqueued and end.
            transaction.on_commit(
                lambda: cache.set(cache_key, raw_credential, settings.ADMISSION_TTL_SECONDS),
                robust=True,
            )
            # After the credential is in the cache: the runtime needs it. Eager in the
            # embedded default, so the turn has run by the time the request answers.
            transaction.on_commit(lambda: turn_enqueue(turn_id=turn.pk))
    except IntegrityError as error:
        if violation_code(error) != IdempotencyKeyReused.code:
            raise
        # A concurrent send with the same key won the insert; answer as to a resend of it.
        raced = _admission_for_key(conversation, idempotency_key, request_digest)
        if raced is None:
            raise
        return raced
    return AdmittedTurn(admission=admission, turn=turn, is_new=True)


def message_admit_from_mcp(*, conversation: Conversation, sender: User, text: str) -> AdmittedTurn:
    """Admit a message sent through the MCP server's `ask_zudo_agent` by a client acting as
    its user with a token, with that user's authority for this one turn.

    Such a client holds no key session, so one is opened for the turn and frozen into its
    admission: recall and capture then work as for a turn sent from the app, under the
    same fence and policy. The caller ends it (`turn_key_session_end`) once it stops
    waiting for the turn. No memory state is reported, so recall uses the server's current
    revision; a fresh idempotency key makes every call a new turn. A refused admission
    (workspace AI off, invalid text) leaves no session: its row rolls back with the
    admission and its cached key is dropped.
    """
    with transaction.atomic():
        session = key_session_open(workspace=conversation.workspace, user=sender)
        try:
            return message_admit(
                conversation=conversation,
                sender=sender,
                text=text,
                idempotency_key=f"mcp:{uuid.uuid4()}",
                key_session_id=session.pk,
                memory_state=None,
            )
        except BaseException:
            cache.delete(session.cache_key)
            raise


def turn_key_session_end(*, admission: Admission) -> None:
    """Revoke the key session opened for one turn by `message_admit_from_mcp`; a
    turn still running loses its access to memory and notes from here on."""
    if admission.key_session_id is None:
        return
    session = KeySession.objects.get(pk=admission.key_session_id)
    key_session_revoke(session=session, revoked_by=admission.owner)


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


TURN_TASK = "automation.turn_run"


def turn_enqueue(*, turn_id: uuid.UUID) -> None:
    """Hand a turn to the runtime: a Celery worker, or this process when eager.

    An unreachable broker leaves the turn queued (logged); the reaper sends it again.
    """
    try:
        current_app.tasks[TURN_TASK].delay(str(turn_id))
    except OperationalError:
        logger.warning("turn %s not enqueued: the broker is unreachable", turn_id)


def transcript_append(
    *, turn: Turn, workspace: Workspace, data_key: bytes, role: str, body: dict[str, Any]
) -> Message:
    """Append an entry to the turn's transcript, sealed under `data_key` (the workspace's,
    unwrapped once by the caller for the whole turn).

    The transcript is the conversation's own record; the memory block a model call
    was given is never passed here.
    """
    message_id = uuid.uuid4()
    sequence = (turn.messages.aggregate(last=Max("sequence"))["last"] or 0) + 1
    sealed = record_seal(
        data_key=data_key,
        plaintext=json.dumps(body).encode(),
        record=RecordAddress("message", workspace.pk, message_id),
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
    """Mark a running turn completed (or failed, with a code and never any text), and end
    its delivery credential with it.

    A credential authorizes one turn: once the turn has ended, nothing may act under it,
    though its admission's expiry is still minutes away. The conversation's credential slot,
    while it still holds this turn's credential, expires now, in the same transaction, so
    every check that reads the slot refuses it from here on: recall and the document routes
    (TOKEN_EXPIRED, `detail.reason` `turn_ended`) and the commit fence (clause
    `credential_unexpired`). Its cached copy, the runtime's, is dropped after the commit.
    """
    state = Turn.State.FAILED if failure_code else Turn.State.COMPLETED
    admission = turn.admission
    now = timezone.now()
    with transaction.atomic():
        finished = Turn.objects.filter(pk=turn.pk, state=Turn.State.RUNNING).update(
            state=state, finished_at=now, failure_code=failure_code
        )
        if finished:
            DeliveryCredential.objects.filter(
                conversation_id=admission.conversation_id,
                credential_digest=admission.credential_digest,
                expires_at__gt=now,
            ).update(expires_at=now)
            transaction.on_commit(
                lambda: cached_secrets_discard(
                    cache_keys=[delivery_credential_cache_key(admission.pk)]
                )
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


def memory_recall(*, admission: Admission, live: RecallFacts | None = None) -> Recall:
    """Read memory for one model call, as the turn may see it now, and record it in the
    turn's memory receipt.

    Runs before every model call, so a Save, a Clear or Off between two calls of one
    turn reaches the second. When memory is withheld the status says why; an older
    copy is never substituted. One query reads every live fact the decision needs (or the
    caller passes them, read with the admission in the same request:
    `admission_with_recall_facts_by_credential_digest`), and one statement records the
    receipt.

    A turn past its expiry is refused (TOKEN_EXPIRED) as on the document routes, and
    records nothing. Only a recall that reads memory for the model (provided or empty)
    restarts the key session's idle timeout: a withheld one must not keep alive a
    session that nothing is using.
    """
    recall = _recall_inspect(admission, live)
    _recall_receipt_write(admission=admission, recall=recall)
    return recall


def _recall_receipt_write(*, admission: Admission, recall: Recall) -> None:
    params = [
        recall.status,
        recall.version,
        datetime_param(timezone.now()),
        pk_param(Admission, admission.pk),
    ]
    with driver_cursor() as cursor:
        cursor.execute(_recall_receipt_sql(connection.vendor), params)


@functools.cache
def _recall_receipt_sql(vendor: str) -> str:
    # Raw: one statement, where the ORM needs four (BEGIN, SET LOCAL, UPDATE, COMMIT).
    # The receipt is a diagnostic record: losing the last few to a server crash is
    # acceptable, waiting for a WAL flush on every model call is not. Built once per
    # process: the identifiers come from model metadata; every value is a parameter.
    with_clause, from_item = unsynchronized()
    return f"""
        {with_clause}
        UPDATE {table(Admission)} SET recall_status = %s, recall_version = %s,
            recalled_at = %s, recall_count = recall_count + 1
        {f"FROM {from_item}" if from_item else ""}
        WHERE id = %s
    """


def _recall_inspect(admission: Admission, live: RecallFacts | None) -> Recall:
    if live is None:
        live = recall_facts(admission=admission, now=timezone.now())
    if live is None:
        return Recall(RecallStatus.NO_ACCESS, None)
    slot = live.credential_slot(admission=admission)
    turn_expiry_refuse(admission=admission, slot=slot, now=live.read_at)
    return _recall_decide(live, admission, is_superseded=not slot.is_current, restart_idle=True)


def _recall_decide(
    live: RecallFacts, sender: RecallSender, *, is_superseded: bool, restart_idle: bool
) -> Recall:
    """What memory a model call for `sender` is given, decided on the live facts. Recall
    and preview both decide here, so a preview cannot disagree with the call it previews.

    Whether a read counts as use is the caller's decision (`restart_idle`); even then only
    a call about to read memory for the model restarts the key session's idle timeout, in
    the same Redis call that reads its key. (A revision that then fails its integrity check
    has restarted it too: rare, and the session itself was usable.)"""
    if not live.is_member or not live.ai_enabled:
        return Recall(RecallStatus.NO_ACCESS, None)
    if is_superseded:
        return Recall(RecallStatus.SUPERSEDED, None)
    if live.mode == MemoryPolicy.Mode.OFF:
        return Recall(RecallStatus.OFF, None)
    if sender.key_session_id is None or not live.key_session_usable:
        return Recall(RecallStatus.UNAVAILABLE, None)
    withheld = _recall_withheld(sender=sender, live=live)
    data_key = key_session_cached_data_key(
        session_id=sender.key_session_id,
        workspace_id=sender.workspace_id,
        restart_idle=restart_idle and withheld is None,
    )
    if data_key is None:
        return Recall(RecallStatus.UNAVAILABLE, None)
    if withheld is not None:
        return withheld
    try:
        current = live.memory_text(data_key=data_key, workspace_id=sender.workspace_id)
    except DocumentUnreadable:
        # A revision that fails its integrity check is withheld like any other memory
        # the turn cannot have; the turn itself goes on.
        return Recall(RecallStatus.UNAVAILABLE, live.memory_version)
    if not current.content:
        return Recall(RecallStatus.EMPTY, current.version)
    return Recall(RecallStatus.PROVIDED, current.version, current.content)


def _recall_withheld(*, sender: RecallSender, live: RecallFacts) -> Recall | None:
    """What withholds the memory document itself, decided from the facts read (its
    version and size) without opening it; None if it may be read for the model."""
    if live.memory_deleted:
        return Recall(RecallStatus.DELETED, live.memory_version)
    if sender.save_in_flight:
        return Recall(RecallStatus.PENDING, live.memory_version)
    if sender.has_unresolved_conflict:
        return Recall(RecallStatus.CONFLICT, live.memory_version)
    acknowledged = sender.acknowledged_version
    if acknowledged is not None and acknowledged > live.memory_version:
        # The sender saw a Save acknowledged that this server does not hold.
        return Recall(RecallStatus.STALE, live.memory_version)
    if live.memory_bytes > settings.MEMORY_RECALL_MAX_BYTES:
        return Recall(RecallStatus.OVERSIZED, live.memory_version)
    return None


@dataclass(frozen=True)
class NextTurn:
    """The turn a person would send next, as `message_admit` would admit it: their key
    session and the memory state their client reports. It has no conversation yet, so no
    credential slot to be superseded or expire."""

    owner_id: int
    workspace_id: int
    key_session_id: uuid.UUID | None
    acknowledged_version: int | None
    save_in_flight: bool | None
    has_unresolved_conflict: bool | None
    conversation_id: uuid.UUID | None = None


@dataclass(frozen=True)
class MemoryPreview:
    """What the next model call would be given: `block` is exactly the text appended to its
    system message (empty when memory is off or empty)."""

    status: str
    version: int | None
    block: str


def memory_preview(
    *,
    membership: WorkspaceMembership,
    key_session_id: uuid.UUID | None,
    memory_state: MemoryState | None,
) -> MemoryPreview:
    """Show a member what the next model call of a turn they send now would be given: the
    memory block, the note saying why memory is withheld, or nothing. Decided by recall's
    own decision on the same live facts and rendered by the model binding's own function.

    Changes nothing: no memory receipt is written, and the key session's idle timeout is
    not restarted, because a person looking at the preview is not the assistant using
    memory; a session nothing else uses still idles out.
    """
    turn = NextTurn(
        owner_id=membership.user_id,
        workspace_id=membership.workspace_id,
        key_session_id=key_session_id,
        acknowledged_version=memory_state.acknowledged_version if memory_state else None,
        save_in_flight=memory_state.save_in_flight if memory_state else None,
        has_unresolved_conflict=memory_state.has_unresolved_conflict if memory_state else None,
    )
    live = recall_facts(admission=turn, now=timezone.now())
    recall = (
        Recall(RecallStatus.NO_ACCESS, None)
        if live is None
        else _recall_decide(live, turn, is_superseded=False, restart_idle=False)
    )
    block = memory_block(status=recall.status, version=recall.version, text=recall.text)
    return MemoryPreview(status=recall.status, version=recall.version, block=block)
