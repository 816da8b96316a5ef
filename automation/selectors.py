"""Reads of conversations and admissions, with tenancy."""

from __future__ import annotations

import functools
import itertools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone
from pydantic import BaseModel, ConfigDict

from automation.errors import CredentialSuperseded, WorkspaceAiDisabled
from automation.models import (
    Admission,
    CommitFence,
    Conversation,
    DeliveryCredential,
    Message,
    Turn,
)
from memory.documents import ActorKind, DocumentActor
from memory.models import MEMORY_PATH, MemoryPolicy
from memory.provenance import CaptureLink
from memory.selectors import MemoryText
from workspaces.crypto import RecordAddress, record_open, revision_open
from workspaces.errors import CredentialExpired, NotFound
from workspaces.models import (
    File,
    FileVersion,
    KeySession,
    Org,
    Team,
    TeamMembership,
    User,
    Workspace,
    WorkspaceMembership,
)
from workspaces.selectors import workspace_data_key, workspace_membership_get
from workspaces.sql import (
    CALLER_DEFERRED,
    any_of,
    columns,
    datetime_param,
    driver_cursor,
    fetch_one,
    field_value,
    instance,
    key_session_unrevoked,
    pk_param,
    table,
    width,
)


def conversation_list_for_user(
    *, user: User, team: Team, workspace_id: int | None = None
) -> QuerySet[Conversation]:
    """The caller's own conversations in the workspaces they are still a member of; only
    those in `workspace_id` when it is given (none when the caller is not its member)."""
    conversations = Conversation.objects.filter(
        owner=user, workspace__team=team, workspace__memberships__user=user
    )
    if workspace_id is not None:
        conversations = conversations.filter(workspace_id=workspace_id)
    return conversations.order_by("-created_at")


def conversation_get_for_owner(
    *, user: User, team: Team, conversation_id: uuid.UUID
) -> Conversation:
    """The caller's own conversation in a workspace they are still a member of, or 404."""
    conversation = (
        Conversation.objects.select_related("workspace")
        .filter(
            pk=conversation_id,
            owner=user,
            workspace__team=team,
            workspace__memberships__user=user,
        )
        .first()
    )
    if conversation is None:
        raise NotFound("No such conversation.")
    return conversation


@dataclass(frozen=True)
class CredentialSlot:
    """What the conversation's credential slot says about one turn's delivery credential:
    whether it still carries it (no newer turn took it), and if so whether it is unexpired."""

    is_current: bool
    is_unexpired: bool


def credential_slot_get(*, admission: Admission, now: datetime) -> CredentialSlot:
    slot = (
        DeliveryCredential.objects.filter(conversation_id=admission.conversation_id)
        .values_list("credential_digest", "expires_at")
        .first()
    )
    if slot is None or slot[0] != admission.credential_digest:
        return CredentialSlot(is_current=False, is_unexpired=False)
    return CredentialSlot(is_current=True, is_unexpired=slot[1] > now)


def turn_expiry_refuse(*, admission: Admission, slot: CredentialSlot, now: datetime) -> None:
    """Refuse (TOKEN_EXPIRED) a turn past its admission's original expiry, or whose
    credential, still the conversation's current one, is past the slot's expiry.

    Every use of a turn's authority starts here (recall, the document routes and tools),
    so a dead credential is refused the same way everywhere, before anything is read.
    `detail.reason` says which: `expired`, or `turn_ended` for a slot that expired before
    its admission did, which only the end of its turn does (`turn_finish`): the two are
    written with one expiry, and a newer turn replaces the credential rather than expire it.
    """
    if admission.expires_at <= now:
        raise CredentialExpired(
            "This turn's delivery credential is past its expiry.", reason="expired"
        )
    if slot.is_current and not slot.is_unexpired:
        raise CredentialExpired(
            "This turn has ended; its delivery credential no longer authorizes anything.",
            reason="turn_ended",
        )


def document_actor_for_turn(
    *, admission: Admission, key_session_id: uuid.UUID | None = None
) -> DocumentActor:
    """The assistant acting for one admitted turn, in the admission's workspace, as the
    document service's actor (`memory.documents`, which checks its key session on use).

    Refused once the turn is past its expiry (the delivery credential's life), when the
    sender is no longer a member of the workspace (404, as for any other caller), when
    workspace AI was switched off since, or when a newer message in the conversation took
    the credential slot (as recall then withholds memory). The key session is the
    admission's unless the caller names one (a tool that was handed it).
    """
    now = timezone.now()
    slot = credential_slot_get(admission=admission, now=now)
    turn_expiry_refuse(admission=admission, slot=slot, now=now)
    membership = workspace_membership_get(
        user=admission.owner, team=admission.workspace.team, workspace_id=admission.workspace_id
    )
    if not membership.workspace.ai_enabled:
        raise WorkspaceAiDisabled()
    if not slot.is_current:
        raise CredentialSuperseded()
    return DocumentActor(
        kind=ActorKind.ASSISTANT,
        workspace=membership.workspace,
        user=admission.owner,
        key_session_id=key_session_id or admission.key_session_id,
    )


# The commit fence's predicate, one name per clause, in the order the seed states them.
FENCE_PREDICATES = (
    "owner_matches",
    "workspace_matches",
    "admission_unconsumed",
    "admission_unexpired",
    "admitted_in_auto",
    "policy_still_auto",
    "policy_revision_unchanged",
    "clear_generation_unchanged",
    "ai_still_enabled",
    "consent_revision_unchanged",
    "credential_current",
    "credential_unexpired",
    "key_session_matches",
    "key_session_unrevoked",
)


@dataclass(frozen=True)
class FenceClaim:
    """What a capture (or a Read only turn's proposal) claims, for the fence's predicate to
    weigh: that `owner` holds admission `admission_id` in `workspace` and presents key
    session `key_session_id`. The judge (`fence_failed_predicates`) and the fence row
    (`automation.capture._fence_commit`) weigh the same claim."""

    admission_id: uuid.UUID
    owner: User
    workspace: Workspace
    key_session_id: uuid.UUID


def fence_failed_predicates(*, claim: FenceClaim, now: datetime) -> list[str]:
    """Which clauses of the fence predicate are false right now.

    Only explains a refusal: it runs after the fence's transaction rolled back, so it
    reads a later state than the fence did. The fence's own INSERT ... SELECT decides.
    A missing policy row reads as Read only at revision 0, generation 0.
    """
    # SQL because it was measured: every capture asks this before anything else, and the
    # ORM took four queries (admission, policy, credential slot, revocation) to answer it.
    # One column per clause, in FENCE_PREDICATES' order; NULL (a missing row) is false.
    sql = f"""
        SELECT a.owner_id = %s,
            a.workspace_id = %s,
            a.status = %s,
            a.expires_at > %s,
            a.mode = %s,
            p.mode = %s,
            COALESCE(p.policy_revision, 0) = a.policy_revision,
            COALESCE(p.clear_generation, 0) = a.clear_generation,
            w.ai_enabled,
            w.ai_consent_revision = a.ai_consent_revision,
            c.credential_digest = a.credential_digest,
            c.expires_at > %s,
            a.key_session_id = %s,
            a.key_session_id IS NOT NULL AND {key_session_unrevoked("a.key_session_id")}
        FROM {table(Admission)} a
        JOIN {table(Workspace)} w ON w.id = a.workspace_id
        LEFT JOIN {table(MemoryPolicy)} p ON p.workspace_id = a.workspace_id
        LEFT JOIN {table(DeliveryCredential)} c ON c.conversation_id = a.conversation_id
        WHERE a.id = %s
    """  # identifiers come from model metadata; every value is a parameter
    moment = datetime_param(now)
    params = [
        claim.owner.pk,
        claim.workspace.pk,
        Admission.Status.ADMITTED,
        moment,
        MemoryPolicy.Mode.AUTO,
        MemoryPolicy.Mode.AUTO,
        moment,
        pk_param(KeySession, claim.key_session_id),
        pk_param(Admission, claim.admission_id),
    ]
    with driver_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return ["admission_exists"]
    return [name for name, holds in zip(FENCE_PREDICATES, row, strict=True) if not holds]


@dataclass(frozen=True)
class TranscriptEntry:
    turn_id: uuid.UUID
    role: str
    body: dict[str, Any]
    created_at: datetime


def transcript_for_conversation(
    *, conversation: Conversation, limit: int = 200
) -> list[TranscriptEntry]:
    """The conversation's sealed transcript, opened, oldest first (the latest `limit`)."""
    messages = list(
        Message.objects.filter(conversation=conversation).order_by("-created_at", "-sequence")[
            :limit
        ]
    )
    return transcript_entries_opened(conversation=conversation, messages=messages[::-1])


def transcript_messages(*, conversation: Conversation) -> QuerySet[Message]:
    """The conversation's sealed messages, oldest first."""
    return Message.objects.filter(conversation=conversation).order_by("created_at", "sequence")


def transcript_entries_opened(
    *, conversation: Conversation, messages: list[Message]
) -> list[TranscriptEntry]:
    """`messages` of the conversation, opened, in the order given."""
    if not messages:
        return []
    workspace = conversation.workspace
    data_key = workspace_data_key(workspace=workspace)
    return [
        TranscriptEntry(
            turn_id=message.turn_id,
            role=message.role,
            body=_message_open(message, workspace, data_key),
            created_at=message.created_at,
        )
        for message in messages
    ]


def _message_open(message: Message, workspace: Workspace, data_key: bytes | None) -> dict[str, Any]:
    raw = record_open(
        data_key=data_key,
        ciphertext=bytes(message.ciphertext),
        record=RecordAddress("message", workspace.pk, message.pk),
    )
    body: dict[str, Any] = json.loads(raw)
    return body


def memory_receipts_for_conversation(*, conversation: Conversation) -> QuerySet[Admission]:
    """Each turn's memory receipt: ids, versions and statuses, never text."""
    return (
        Admission.objects.filter(conversation=conversation)
        .select_related("turn", "committed_revision")
        .order_by("-admitted_at", "-id")
    )


def turn_answer(*, turn: Turn) -> str | None:
    """The turn's final answer once it has one."""
    if turn.state != Turn.State.COMPLETED:
        return None
    message = (
        Message.objects.filter(turn=turn, role=Message.Role.ASSISTANT)
        .select_related("conversation__workspace")
        .order_by("-sequence")
        .first()
    )
    if message is None:
        return None
    workspace = message.conversation.workspace
    body = _message_open(message, workspace, workspace_data_key(workspace=workspace))
    return str(body.get("content", ""))


class TurnProgress(BaseModel):
    """Where a turn stands, with its answer once it has one. A pydantic model, so that the MCP
    tool's answer extends it instead of declaring its fields again."""

    model_config = ConfigDict(frozen=True)

    conversation_id: uuid.UUID
    admission_id: uuid.UUID
    turn_id: uuid.UUID
    state: str
    answer: str | None
    failure_code: str | None


def turn_progress_get(*, turn_id: uuid.UUID, owner: User) -> TurnProgress:
    """A turn of `owner`'s, read now (in the embedded default it ran eagerly once its
    admission committed, so it may already have its answer), or 404."""
    turn = (
        Turn.objects.select_related("admission").filter(pk=turn_id, admission__owner=owner).first()
    )
    if turn is None:
        raise NotFound("No such turn.")
    return TurnProgress(
        conversation_id=turn.admission.conversation_id,
        admission_id=turn.admission_id,
        turn_id=turn.pk,
        state=turn.state,
        answer=turn_answer(turn=turn),
        failure_code=turn.failure_code or None,
    )


@dataclass(frozen=True)
class RecallFacts:
    """Everything a recall decides on, read in one statement at `read_at`."""

    read_at: datetime
    ai_enabled: bool
    is_member: bool
    credential_digest: str | None
    credential_unexpired: bool
    mode: str
    key_session_usable: bool
    memory_file_id: int | None
    memory_version: int
    memory_deleted: bool
    memory_bytes: int
    memory_ciphertext: bytes | None

    def credential_slot(self, *, admission: Admission) -> CredentialSlot:
        is_current = self.credential_digest == admission.credential_digest
        return CredentialSlot(
            is_current=is_current, is_unexpired=is_current and self.credential_unexpired
        )

    def memory_text(self, *, data_key: bytes, workspace_id: int) -> MemoryText:
        """The live memory text, opened with the turn's key session key."""
        if self.memory_file_id is None or self.memory_ciphertext is None:
            return MemoryText(content="", version=0, bytes=0)
        plaintext = revision_open(
            data_key=data_key,
            ciphertext=self.memory_ciphertext,
            workspace_id=workspace_id,
            file_id=self.memory_file_id,
            version=self.memory_version,
        )
        return MemoryText(
            content=plaintext.decode(), version=self.memory_version, bytes=self.memory_bytes
        )


class RecallSender(Protocol):
    """Whom a recall reads for: an admitted turn, or the next turn a person would send (a
    preview, which has no conversation yet). Read-only, so a row and a frozen dataclass
    both fit."""

    @property
    def owner_id(self) -> int: ...
    @property
    def workspace_id(self) -> int: ...
    @property
    def conversation_id(self) -> uuid.UUID | None: ...
    @property
    def key_session_id(self) -> uuid.UUID | None: ...
    @property
    def acknowledged_version(self) -> int | None: ...
    @property
    def save_in_flight(self) -> bool | None: ...
    @property
    def has_unresolved_conflict(self) -> bool | None: ...


def _recall_facts_sql(*, owner: str, key_session: str, conversation: str) -> tuple[str, str]:
    """The select list of the live facts and their joins onto the workspace `w`, for a sender
    whose owner, key session and conversation are the SQL expressions given: named parameters,
    or the columns of the admission the same statement finds. Their own parameters are
    `active` (True), `now` and `memory_path` (`_recall_facts_params`); `_recall_facts_from`
    reads the columns back."""
    select = f"""w.ai_enabled,
            EXISTS (
                SELECT 1 FROM {table(WorkspaceMembership)} m
                JOIN {table(User)} mu ON mu.id = m.user_id
                WHERE m.workspace_id = w.id AND m.user_id = {owner} AND mu.is_active = %(active)s
            ),
            c.credential_digest,
            c.expires_at > %(now)s,
            (SELECT p.mode FROM {table(MemoryPolicy)} p WHERE p.workspace_id = w.id),
            EXISTS (
                SELECT 1 FROM {table(KeySession)} k
                WHERE k.id = {key_session} AND k.workspace_id = w.id AND k.user_id = {owner}
                    AND k.revoked_at IS NULL
                    AND {key_session_unrevoked("k.id")}
            ),
            f.id, f.current_version, f.deleted_at, v.size_bytes, v.ciphertext"""
    joins = f"""
        LEFT JOIN {table(DeliveryCredential)} c ON c.conversation_id = {conversation}
        LEFT JOIN {table(File)} f ON f.workspace_id = w.id AND f.path = %(memory_path)s
        LEFT JOIN {table(FileVersion)} v ON v.file_id = f.id AND v.version = f.current_version"""
    return select, joins


def _recall_facts_params(now: datetime) -> dict[str, Any]:
    return {"active": True, "now": datetime_param(now), "memory_path": MEMORY_PATH}


def _recall_facts_from(row: Sequence[Any], *, read_at: datetime) -> RecallFacts:
    (ai_enabled, is_member, slot_digest, slot_unexpired, mode, session_usable, file_id, version,
     deleted_at, size_bytes, ciphertext) = row  # fmt: skip
    return RecallFacts(
        read_at=read_at,
        ai_enabled=bool(ai_enabled),
        is_member=bool(is_member),
        credential_digest=slot_digest,
        credential_unexpired=bool(slot_unexpired),
        mode=mode or MemoryPolicy.Mode.READ_ONLY,
        key_session_usable=bool(session_usable),
        memory_file_id=file_id,
        memory_version=version or 0,
        memory_deleted=deleted_at is not None,
        memory_bytes=size_bytes or 0,
        memory_ciphertext=bytes(ciphertext) if ciphertext is not None else None,
    )


def recall_facts(*, admission: RecallSender, now: datetime) -> RecallFacts | None:
    """Read, in one statement, the live facts a recall checks: workspace AI, the sender's
    membership, the conversation's credential slot (and whether it is unexpired at `now`),
    the memory mode, the key session's row, and the memory document's current revision.
    A sender without a conversation (a preview) finds no credential slot.

    Hand-written SQL because it runs before every model call: the same query built with
    the ORM (nine subqueries) cost four times as long, almost all of it in Python. The
    recall route reads the same facts in its credential's lookup
    (`admission_with_recall_facts_by_credential_digest`).
    """
    params = {
        **_recall_facts_params(now),
        "owner_id": admission.owner_id,
        "key_session_id": pk_param(KeySession, admission.key_session_id),
        "conversation_id": pk_param(Conversation, admission.conversation_id),
        "workspace_id": admission.workspace_id,
    }
    with driver_cursor() as cursor:
        cursor.execute(_recall_facts_by_sender_sql(connection.vendor), params)
        row = cursor.fetchone()
    return None if row is None else _recall_facts_from(row, read_at=now)


@functools.cache
def _recall_facts_by_sender_sql(vendor: str) -> str:
    # Built once per process: the identifiers come from model metadata; every value is a
    # parameter.
    select, joins = _recall_facts_sql(
        owner="%(owner_id)s", key_session="%(key_session_id)s", conversation="%(conversation_id)s"
    )
    return f"""
        SELECT {select}
        FROM {table(Workspace)} w {joins}
        WHERE w.id = %(workspace_id)s
    """


def capture_links_for_revisions(revision_ids: list[int]) -> dict[int, CaptureLink]:
    """The conversation and admission behind each of `revision_ids` that a capture wrote
    (its commit fence names it), for the memory document's line provenance."""
    if not revision_ids:
        return {}
    # Raw: part of every blame, and the ORM compiled this join anew for every length of the
    # list.
    among, params = any_of("f.revision_id", revision_ids)
    sql = f"""
        SELECT f.revision_id, f.admission_id, a.conversation_id
        FROM {table(CommitFence)} f
        JOIN {table(Admission)} a ON a.id = f.admission_id
        WHERE {among}
    """  # identifiers come from model metadata; every value is a parameter
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fences = cursor.fetchall()
    # UUIDs are text on SQLite: read back as the ORM reads them.
    return {
        revision_id: CaptureLink(
            conversation_id=field_value(Admission, "conversation_id", conversation_id),
            admission_id=field_value(Admission, "id", admission_id),
        )
        for revision_id, admission_id, conversation_id in fences
    }


def admission_by_credential_digest(digest: str) -> Admission | None:
    """The admission whose delivery credential's SHA-256 is `digest`, with its owner and
    its workspace's team and org (its conversation is loaded only if used)."""
    row = fetch_one(_admission_by_credential_digest_sql(connection.vendor), [digest], binary=True)
    return None if row is None else _admission_grant_from(row)


@functools.cache
def _admission_by_credential_digest_sql(vendor: str) -> str:
    # Raw: it authenticates every runtime request, and the ORM spent longer compiling this
    # join than PostgreSQL spent answering it. Built once per process: the identifiers come
    # from model metadata; the digest is a parameter.
    select, joins = _admission_grant_sql()
    return f"SELECT {select} FROM {joins} WHERE a.credential_digest = %s"


def admission_with_recall_facts_by_credential_digest(
    digest: str, *, now: datetime
) -> tuple[Admission, RecallFacts] | None:
    """`admission_by_credential_digest`, with `recall_facts` of that admission at `now` read
    in the same statement: the recall route authenticates with it, so a recall before a
    model call makes one statement before its receipt, not two."""
    # In the binary format: the memory's ciphertext (up to the recall bound) arrives as it
    # is stored, not as hex (decoding it was about a twentieth of a recall's instructions).
    with driver_cursor(binary=True) as cursor:
        cursor.execute(
            _admission_with_recall_facts_sql(connection.vendor),
            {**_recall_facts_params(now), "digest": digest},
        )
        row = cursor.fetchone()
    if row is None:
        return None
    facts_at = _grant_offsets()[-1]
    return _admission_grant_from(row), _recall_facts_from(row[facts_at:], read_at=now)


@functools.cache
def _admission_with_recall_facts_sql(vendor: str) -> str:
    # Raw, as the two statements it joins. Built once per process (building it took about
    # 0.03 ms of every recall): the identifiers come from model metadata; every value is a
    # parameter.
    select, joins = _admission_grant_sql()
    facts, facts_joins = _recall_facts_sql(
        owner="a.owner_id", key_session="a.key_session_id", conversation="a.conversation_id"
    )
    return f"""
        SELECT {select}, {facts}
        FROM {joins} {facts_joins}
        WHERE a.credential_digest = %(digest)s
    """


# What a delivery credential's lookup loads, in `_admission_grant_sql`'s order and aliases:
# each model but the fields no request it authenticates reads, left in the database (loaded
# on access, as after `QuerySet.defer`): the admission's timestamps of what the turn did
# (which its receipts and explanation read from their own queries), its workspace's
# creation time, and its owner, team and org as a token's lookup leaves them: every column
# loaded is work on every recall (a timestamp the most), for nothing.
_GRANT_MODELS = {
    Admission: frozenset({"admitted_at", "committed_at", "capture_refused_at", "recalled_at"}),
    User: CALLER_DEFERRED[User],
    Workspace: frozenset({"created_at"}),
    Team: CALLER_DEFERRED[Team],
    Org: CALLER_DEFERRED[Org],
}


@functools.cache
def _grant_offsets() -> tuple[int, ...]:
    """Where each of `_GRANT_MODELS` begins in a grant's row, then where the row's next
    columns begin: the model metadata never changes in a process."""
    widths = (width(model, deferred=deferred) for model, deferred in _GRANT_MODELS.items())
    return (0, *itertools.accumulate(widths))


def _admission_grant_sql() -> tuple[str, str]:
    """The columns and the joined tables (aliases a, u, w, t, o) of an admission with its
    owner and its workspace's team and org; none while the owner is not a member of that
    team. A turn acts with its sender's authority, which leaving the team (a membership
    deleted by staff) ends at once, as it ends the sender's own tokens: the credential then
    names no admission (TOKEN_INVALID)."""
    select = ", ".join(
        columns(model, alias, deferred=deferred)
        for (model, deferred), alias in zip(_GRANT_MODELS.items(), "auwto", strict=True)
    )
    joins = f"""{table(Admission)} a
        JOIN {table(User)} u ON u.id = a.owner_id
        JOIN {table(Workspace)} w ON w.id = a.workspace_id
        JOIN {table(TeamMembership)} tm ON tm.team_id = w.team_id AND tm.user_id = a.owner_id
        JOIN {table(Team)} t ON t.id = w.team_id
        JOIN {table(Org)} o ON o.id = t.org_id"""
    return select, joins


def _admission_grant_from(row: Sequence[Any]) -> Admission:
    at_admission, at_user, at_workspace, at_team, at_org, _end = _grant_offsets()
    admission = instance(Admission, row, at_admission, deferred=_GRANT_MODELS[Admission])
    workspace = instance(Workspace, row, at_workspace, deferred=_GRANT_MODELS[Workspace])
    team = instance(Team, row, at_team, deferred=_GRANT_MODELS[Team])
    # As the ORM's select_related fills them: straight into each relation's cache, without
    # the assignment's checks (its type, the router's consent, the id it already holds).
    Admission.owner.field.set_cached_value(
        admission, instance(User, row, at_user, deferred=_GRANT_MODELS[User])
    )
    Admission.workspace.field.set_cached_value(admission, workspace)
    Workspace.team.field.set_cached_value(workspace, team)
    Team.org.field.set_cached_value(team, instance(Org, row, at_org, deferred=_GRANT_MODELS[Org]))
    return admission
