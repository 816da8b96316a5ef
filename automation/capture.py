"""The one automatic writer of memory: the capture and its commit fence.

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

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from automation.errors import (
    CaptureConflict,
    CaptureFlagged,
    CaptureRetired,
    MemoryOversized,
)
from automation.models import (
    Admission,
    CommitFence,
    Conversation,
    DeliveryCredential,
)
from automation.selectors import FenceClaim, fence_failed_predicates
from memory.edits import MemoryChange, apply_memory_changes
from memory.instruction_lint import InstructionFinding, instruction_findings_added
from memory.models import MEMORY_PATH, MemoryPolicy, Proposal, ProposalReason
from memory.secrets import secret_refuse
from memory.selectors import memory_current_get
from memory.services import (
    memory_policy_row_ensure,
    memory_proposal_create,
    memory_revision_write,
)
from workspaces.crypto import text_digest
from workspaces.errors import (
    DomainError,
    VersionConflict,
)
from workspaces.models import (
    FileVersion,
    KeySession,
    User,
    Workspace,
)
from workspaces.services import key_session_resolve
from workspaces.sql import (
    Cursor,
    datetime_param,
    driver_cursor,
    key_session_unrevoked,
    pk_param,
    table,
)
from workspaces.violations import violation_code


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
    return text_digest(purpose="capture", text=json.dumps(body, sort_keys=True).encode())


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
    """The automatic writer: apply `changes` to memory at `expected_version`, fenced.

    Authority is judged first, on every fence clause, before memory is read or the edits
    applied: a turn without it learns nothing about the content (no `no_match`, no
    `unchanged`). A retry of the committed capture with the same body replays its capture
    receipt without a new revision, also when it overlapped the original and found the
    revision already written; any other second capture in the turn is refused. The key
    session is re-validated against the cache right before the transaction. The revision,
    the fence row and the admission's commit are one transaction: if any fence clause is
    false the CHECK aborts it and nothing remains. On a version conflict the newer text stays and
    the change is stored as a proposal (never rebased). A result that holds a credential is
    refused (SECRET_DETECTED) before the transaction, so the admission stays unconsumed. A
    line added or replaced that the instruction lint flags is never committed: the change is
    stored as a proposal naming the rules (CAPTURE_FLAGGED). A refusal is recorded on the
    admission (`_refusal_recorded`).
    """
    with _refusal_recorded(admission):
        request_digest = capture_request_digest(expected_version=expected_version, changes=changes)
        claim = FenceClaim(
            admission_id=admission.pk,
            owner=owner,
            workspace=workspace,
            key_session_id=key_session_id,
        )
        judge = _AuthorityJudge(claim=claim, request_digest=request_digest)
        if replay := judge.replay_or_refuse(now=timezone.now()):
            return replay
        data_key = key_session_resolve(session_id=key_session_id, workspace=workspace, user=owner)
        current = (
            memory_current_get(workspace=workspace, data_key=data_key) if expected_version else None
        )
        if current is not None and current.version != expected_version:
            if replay := judge.replay_or_refuse(now=timezone.now()):
                return replay
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
        # The text as this capture would store it, so a credential a person saved earlier is
        # refused too: an automatic revision never re-stores one (a `remove` of it passes).
        secret_refuse(new_text, path=MEMORY_PATH)
        if findings := instruction_findings_added(current_text, new_text):
            raise _flagged_with_proposal(admission, changes, expected_version, data_key, findings)
        _checkpoint("validated")
        now = timezone.now()
        try:
            # One cursor for the fence's two statements: opening one costs about as much
            # Python as the execute it serves.
            with transaction.atomic(), driver_cursor() as cursor:
                _fence_locks_take(cursor, admission)
                _checkpoint("locked")
                revision = memory_revision_write(
                    workspace=workspace,
                    author=owner,
                    base_version=expected_version,
                    content=new_text,
                    change_kind=FileVersion.ChangeKind.CAPTURE,
                    data_key=data_key,
                    # This transaction is the unit: any refusal rolls all of it back.
                    savepoint=False,
                    # Read above at `expected_version`: the compare-and-set decides whether
                    # it still is, so the transaction reads no file row of its own.
                    current=current,
                )
                _fence_commit(
                    cursor,
                    claim=claim,
                    revision=revision,
                    request_digest=request_digest,
                    now=now,
                )
        except IntegrityError as error:
            if violation_code(error) != CaptureRetired.code:
                raise
            if replay := judge.replay_or_refuse(now=now):
                return replay
            raise CaptureRetired(predicate="unknown", failed=[]) from None
        except VersionConflict as conflict:
            # An overlapping transport retry lands here: it waited on the admission's lock
            # while the original committed, and then found the version moved by it.
            if replay := judge.replay_or_refuse(now=timezone.now()):
                return replay
            current_version = int(conflict.detail.get("currentVersion", 0))
            raise _conflict_with_proposal(admission, changes, current_version, data_key) from None
        return CaptureReceipt(
            admission_id=admission.pk,
            version=revision.version,
            bytes=revision.size_bytes,
            committed_at=now,
            is_replay=False,
        )


@contextmanager
def _refusal_recorded(admission: Admission) -> Iterator[None]:
    """Record on the admission why its capture was refused, if it was, so that staff can
    answer "why was this not remembered?"."""
    try:
        yield
    except DomainError as refusal:
        reason = (
            refusal.detail.get("predicate")
            or refusal.detail.get("reason")
            or refusal.detail.get("rule")
            or ""
        )
        Admission.objects.filter(pk=admission.pk).update(
            capture_refusal_code=refusal.code,
            capture_refusal_reason=str(reason)[:64],
            capture_refused_at=timezone.now(),
        )
        raise


@dataclass(frozen=True)
class _AuthorityJudge:
    """The fence's predicate read clause by clause, outside the fence's transaction.

    It refuses early (a turn without authority gets no content-dependent answer and no
    proposal) and names the failed clauses; it never admits a write on its own, since
    only the fence's INSERT ... SELECT, under the fence's locks, decides that.
    """

    claim: FenceClaim
    request_digest: str

    def replay_or_refuse(self, *, now: datetime) -> CaptureReceipt | None:
        """The committed capture receipt if this request is a transport retry of the turn's
        committed capture (same body), whatever has changed since, except the turn's own end;
        else CaptureRetired naming every false clause; else None (the capture may go on).

        A transport retry comes while the turn waits for the capture's answer. Once the turn
        has ended (or run past its expiry) its credential authorizes nothing, as recall and
        the document routes refuse it, so a retry then is refused too, naming that clause."""
        failed = fence_failed_predicates(claim=self.claim, now=now)
        if "admission_unconsumed" in failed and (
            Admission.objects.filter(
                pk=self.claim.admission_id,
                status=Admission.Status.COMMITTED,
                capture_digest=self.request_digest,
            ).exists()
        ):
            ended = [clause for clause in failed if clause in _TURN_END_CLAUSES]
            if not ended:
                return _capture_receipt(admission_id=self.claim.admission_id, is_replay=True)
            raise CaptureRetired(predicate=ended[0], failed=failed)
        if failed:
            raise CaptureRetired(predicate=failed[0], failed=failed)
        return None


# The clauses that the end of the turn itself falsifies (`turn_finish` expires the credential
# slot; the admission's own expiry is the credential's life).
_TURN_END_CLAUSES = frozenset({"admission_unexpired", "credential_unexpired"})


# A Read only turn's proposal needs the fence's authority except its two Auto clauses: the
# turn was admitted in Read only, and an unchanged policy revision keeps the mode there.
_PROPOSAL_EXEMPT_CLAUSES = frozenset({"admitted_in_auto", "policy_still_auto"})


def capture_propose(
    *, admission: Admission, key_session_id: uuid.UUID, changes: list[MemoryChange]
) -> Proposal:
    """Store a Read only turn's changes as a proposal for a person to review.

    Only under the turn's authority, judged on the fence's clauses (but Auto's) first and
    again inside one transaction that holds the fence's locks: a mode change (to Off or
    any other), a Clear, a consent change, a newer turn or a revocation that commits
    before it refuses it (CAPTURE_RETIRED) and nothing is stored; one that commits after
    it finds the proposal stored. Call only for a turn admitted in Read only.
    """
    _proposal_authority_refuse(admission, key_session_id)
    workspace = admission.workspace
    data_key = key_session_resolve(
        session_id=key_session_id, workspace=workspace, user=admission.owner
    )
    current = memory_current_get(workspace=workspace, data_key=data_key)
    # A Read only workspace may have no policy row yet, and a missing row cannot be
    # locked: the first mode change would insert it unseen by the lock below.
    memory_policy_row_ensure(workspace=workspace)
    with transaction.atomic():
        with driver_cursor() as cursor:
            _fence_locks_take(cursor, admission)
        _proposal_authority_refuse(admission, key_session_id)
        return _proposal_kept(
            admission, changes, current.version, data_key, Proposal.Reason.READ_ONLY
        )


def _proposal_authority_refuse(admission: Admission, key_session_id: uuid.UUID) -> None:
    claim = FenceClaim(
        admission_id=admission.pk,
        owner=admission.owner,
        workspace=admission.workspace,
        key_session_id=key_session_id,
    )
    failed = [
        clause
        for clause in fence_failed_predicates(claim=claim, now=timezone.now())
        if clause not in _PROPOSAL_EXEMPT_CLAUSES
    ]
    if failed:
        raise CaptureRetired(predicate=failed[0], failed=failed)


def _proposal_kept(
    admission: Admission,
    changes: list[MemoryChange],
    base_version: int,
    data_key: bytes,
    reason: ProposalReason,
) -> Proposal:
    return memory_proposal_create(
        workspace=admission.workspace,
        admission_id=admission.pk,
        changes=changes,
        base_version=base_version,
        clear_generation=admission.clear_generation,
        reason=reason,
        data_key=data_key,
    )


def _conflict_with_proposal(
    admission: Admission, changes: list[MemoryChange], current_version: int, data_key: bytes
) -> CaptureConflict:
    proposal = _proposal_kept(
        admission, changes, current_version, data_key, Proposal.Reason.VERSION_CONFLICT
    )
    return CaptureConflict(currentVersion=current_version, proposalId=str(proposal.pk))


def _flagged_with_proposal(
    admission: Admission,
    changes: list[MemoryChange],
    base_version: int,
    data_key: bytes,
    findings: list[InstructionFinding],
) -> CaptureFlagged:
    """Keep a change the lint flagged as a proposal; `detail.findings` locates each line in
    memory as the capture would have left it (1-based), by rule id, never by its text."""
    proposal = _proposal_kept(
        admission, changes, base_version, data_key, Proposal.Reason.INSTRUCTION_FLAGGED
    )
    return CaptureFlagged(
        proposalId=str(proposal.pk),
        reason=Proposal.Reason.INSTRUCTION_FLAGGED.value,
        rules=proposal.flagged_rules,
        findings=[{"line": finding.line, "rule": finding.rule} for finding in findings],
    )


def _capture_receipt(*, admission_id: uuid.UUID, is_replay: bool) -> CaptureReceipt:
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


def _fence_locks_take(cursor: Cursor, admission: Admission) -> None:
    """Take the fence's locks in the order the module docstring gives (PostgreSQL; SQLite
    is already serialised by its IMMEDIATE transaction). Call inside the capture's
    transaction."""
    if connection.vendor != "postgresql":
        return
    # SQL because FOR SHARE has no ORM spelling (select_for_update() takes only FOR
    # UPDATE). One statement, not five round trips: PostgreSQL evaluates a select list's
    # subqueries left to right, so the locks are taken in the docstring's order. A turn
    # without a key session locks no key session row (its subquery matches nothing).
    sql = f"""
        SELECT
            (SELECT 1 FROM {table(MemoryPolicy)} WHERE workspace_id = %s FOR SHARE),
            (SELECT 1 FROM {table(Workspace)} WHERE id = %s FOR SHARE),
            (SELECT 1 FROM {table(DeliveryCredential)} WHERE conversation_id = %s FOR SHARE),
            (SELECT 1 FROM {table(KeySession)} WHERE id = %s FOR SHARE),
            (SELECT 1 FROM {table(Admission)} WHERE id = %s FOR UPDATE)
    """  # identifiers come from model metadata; every value is a parameter
    params = [
        admission.workspace_id,
        admission.workspace_id,
        pk_param(Conversation, admission.conversation_id),
        pk_param(KeySession, admission.key_session_id),
        pk_param(Admission, admission.pk),
    ]
    cursor.execute(sql, params)


def _fence_commit(
    cursor: Cursor,
    *,
    claim: FenceClaim,
    revision: FileVersion,
    request_digest: str,
    now: datetime,
) -> None:
    """Insert the fence row with `ok` computed from the admission and the live rows, and mark
    the admission committed by `revision`. Call inside the capture's transaction, after the
    revision.

    Two traps are closed here. A CHECK passes on NULL, so `ok` is NOT NULL and produced
    by CASE, which turns an unknown comparison (a missing policy row, a NULL key session)
    into 0 rather than letting it slip past `ok = 1`. And an INSERT ... SELECT that finds
    no admission inserts nothing and raises nothing, so the row count is asserted.
    """
    moment = datetime_param(now)
    presented = pk_param(KeySession, claim.key_session_id)
    # SQL because INSERT ... SELECT has no ORM spelling, and only it computes `ok` from the
    # live rows in the statement that writes the fence.
    fence = f"""
        INSERT INTO {table(CommitFence)}
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
                AND {key_session_unrevoked("%s")}
            THEN 1 ELSE 0 END,
            %s
        FROM {table(Admission)} a
        JOIN {table(Workspace)} w ON w.id = a.workspace_id
        LEFT JOIN {table(MemoryPolicy)} p ON p.workspace_id = a.workspace_id
        LEFT JOIN {table(DeliveryCredential)} c ON c.conversation_id = a.conversation_id
        WHERE a.id = %s
    """  # identifiers come from model metadata; every value is a parameter
    admission_id = pk_param(Admission, claim.admission_id)
    fence_params: list[Any] = [
        revision.pk,
        presented,
        claim.owner.pk,
        claim.workspace.pk,
        moment,
        True,
        moment,
        presented,
        presented,
        moment,
        admission_id,
    ]
    # SQL because it was measured: the ORM's update() was compiled anew on every capture,
    # for a statement whose shape never changes.
    commit = (
        f"UPDATE {table(Admission)} SET status = %s, committed_at = %s, "
        "committed_revision_id = %s, capture_digest = %s WHERE id"
    )
    commit_params = [Admission.Status.COMMITTED, moment, revision.pk, request_digest]
    if connection.vendor == "postgresql":
        # One statement, one round trip fewer: the UPDATE marks the admission the fence
        # was inserted for, so it marks nothing when no fence row was inserted. Both parts
        # read the statement's snapshot: the fence sees the admission still `admitted`, as
        # it would before the UPDATE.
        cursor.execute(
            f"WITH fence AS ({fence} RETURNING admission_id) "
            f"{commit} IN (SELECT admission_id FROM fence)",
            [*fence_params, *commit_params],
        )
        written = cursor.rowcount
    else:
        # SQLite has no INSERT inside WITH.
        cursor.execute(fence, fence_params)
        written = cursor.rowcount
        if written == 1:
            cursor.execute(f"{commit} = %s", [*commit_params, admission_id])
    if written != 1:
        raise CaptureRetired(predicate="admission_exists", failed=["admission_exists"])
