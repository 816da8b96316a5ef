"""Every change to the memory document and its policy.

Human writes are direct compare-and-set writes of the encrypted document: each names
the version it is based on, and either lands as exactly the next version or changes
nothing. Nothing is queued, so no delayed write can refill memory after a Clear.
"""

from __future__ import annotations

import json
import uuid

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory.edits import MemoryChange, apply_memory_changes
from memory.errors import PolicyRevisionConflict, ProposalRetired, SecretDetected
from memory.instruction_lint import lines_flagged_rules
from memory.models import MEMORY_PATH, LineReview, MemoryPolicy, Proposal
from memory.provenance import memory_line_origins
from memory.secrets import secret_find
from memory.selectors import (
    MemoryText,
    PolicyState,
    memory_current_get,
    memory_policy_get,
    memory_proposal_changes,
    memory_proposal_get,
    memory_version_get,
)
from workspaces.crypto import RecordAddress, record_seal
from workspaces.errors import NotFound, VersionConflict
from workspaces.models import AuditEvent, FileVersion, User, Workspace
from workspaces.selectors import file_version_plaintext
from workspaces.services import (
    WriteTarget,
    file_write,
    workspace_audit_record,
    workspace_key_ensure,
)


def memory_policy_row_ensure(*, workspace: Workspace) -> None:
    """Make sure the workspace's policy row exists, so that it can be locked.

    The row it makes reads exactly like the missing row it replaces (read only, revision
    0, generation 0). get_or_create survives a concurrent first insert: the second insert
    waits for the first to commit, then reads its row.
    """
    MemoryPolicy.objects.get_or_create(workspace=workspace)


def memory_policy_set(
    *, workspace: Workspace, mode: str, expected_revision: int, actor: User
) -> PolicyState:
    """Change the memory mode by compare-and-set on the policy revision.

    Every accepted change bumps the revision, retiring admissions taken under the old
    one. It never touches workspace AI consent or key sessions, and never the text.
    """
    with transaction.atomic():
        memory_policy_row_ensure(workspace=workspace)
        updated = MemoryPolicy.objects.filter(
            pk=workspace.pk, policy_revision=expected_revision
        ).update(
            mode=mode,
            policy_revision=F("policy_revision") + 1,
            updated_at=timezone.now(),
            updated_by=actor,
        )
        if updated != 1:
            current = memory_policy_get(workspace=workspace)
            raise PolicyRevisionConflict(currentRevision=current.policy_revision)
        state = memory_policy_get(workspace=workspace)
        workspace_audit_record(
            actor=actor,
            action=AuditEvent.Action.POLICY_CHANGED,
            workspace=workspace,
            detail={"mode": state.mode, "policyRevision": state.policy_revision},
        )
    return state


def memory_save(
    *, workspace: Workspace, author: User, base_version: int, content: str
) -> FileVersion:
    """Save `content` as the next version after `base_version` (0 creates the document)."""
    return memory_revision_write(
        workspace=workspace,
        author=author,
        base_version=base_version,
        content=content,
        change_kind=FileVersion.ChangeKind.SAVE,
        # The key comes with the compare-and-set: a stale Save unwraps nothing.
        data_key=None,
    )


def memory_clear(*, workspace: Workspace, author: User, base_version: int) -> FileVersion:
    """Write an empty revision and advance the Clear generation, both or neither.

    The mode is kept. If another write won first the base no longer matches: nothing is
    written and the generation does not move.
    """
    data_key = workspace_key_ensure(workspace=workspace)
    with transaction.atomic():
        # Lock order: the policy row before the file row, as the commit fence takes them,
        # so a Clear and a capture can wait for each other but never deadlock.
        memory_policy_row_ensure(workspace=workspace)
        MemoryPolicy.objects.filter(pk=workspace.pk).update(
            clear_generation=F("clear_generation") + 1, updated_at=timezone.now()
        )
        revision = memory_revision_write(
            workspace=workspace,
            author=author,
            base_version=base_version,
            content="",
            change_kind=FileVersion.ChangeKind.CLEAR,
            data_key=data_key,
        )
        workspace_audit_record(
            actor=author,
            action=AuditEvent.Action.MEMORY_CLEARED,
            workspace=workspace,
            detail={
                "version": revision.version,
                "clearGeneration": memory_policy_get(workspace=workspace).clear_generation,
            },
        )
    return revision


def memory_undo(
    *, workspace: Workspace, author: User, base_version: int, restore_version: int
) -> FileVersion:
    """Restore an older revision's text as a new revision against the current version.

    It cannot overwrite newer text (the base must still be current) and never rewinds
    the Clear generation or the policy revision.
    """
    data_key = workspace_key_ensure(workspace=workspace)
    older = memory_version_get(workspace=workspace, version=restore_version)
    content = file_version_plaintext(version=older, workspace=workspace, data_key=data_key)
    return memory_revision_write(
        workspace=workspace,
        author=author,
        base_version=base_version,
        content=content,
        change_kind=FileVersion.ChangeKind.UNDO,
        data_key=data_key,
    )


def memory_revision_write(
    *,
    workspace: Workspace,
    author: User,
    base_version: int,
    content: str,
    change_kind: str,
    data_key: bytes | None,
    savepoint: bool = True,
    current: MemoryText | None = None,
) -> FileVersion:
    """Write `content` as the memory document's next revision after `base_version`, by
    compare-and-set (`file_write`, whose `data_key` and `savepoint` these are). `current`
    is the memory at `base_version` as the caller has just read it with `data_key`: the
    write then sends no read of its own (`file_write`'s `target`).

    The one write of the memory path under every memory change: a person's Save, Clear,
    Undo or applied proposal, and the capture. The author kind follows from the change:
    a capture is the assistant's (automation.capture is memory's one automatic writer),
    any other change a person's.
    """
    is_capture = change_kind == FileVersion.ChangeKind.CAPTURE
    author_kind = FileVersion.AuthorKind.AUTOMATIC if is_capture else FileVersion.AuthorKind.HUMAN
    return file_write(
        workspace=workspace,
        path=MEMORY_PATH,
        plaintext=content,
        base_version=base_version,
        data_key=data_key,
        author=author,
        author_kind=author_kind,
        change_kind=change_kind,
        savepoint=savepoint,
        target=(
            None
            if current is None or current.file_id is None
            # The key as stored is not read: the caller gives the key itself.
            else WriteTarget(
                file_id=current.file_id, previous_bytes=current.bytes, wrapped_key=None
            )
        ),
    )


def memory_proposal_create(
    *,
    workspace: Workspace,
    admission_id: uuid.UUID,
    changes: list[MemoryChange],
    base_version: int,
    clear_generation: int,
    reason: str,
    data_key: bytes,
) -> Proposal:
    """Store the assistant's suggested changes, sealed, for a person to apply or dismiss.

    Refuses (SECRET_DETECTED, nothing stored) changes that would add a credential: a
    proposal is text the model wrote into the workspace, as much as a capture is. Only the
    added text is judged (`line`, `heading`); a `target` quotes memory as it already is, so
    a proposal to remove a credential passes. `detail.change` names the change (from 0, as
    MEMORY_EDIT_INVALID does) and `detail.line` is 1: every change is one line. The same
    added text is put through the instruction lint, and the rules it trips are kept on the
    proposal for the person who reviews it.
    """
    for index, change in enumerate(changes):
        for added in (change.heading, change.line):
            if finding := secret_find(added):
                raise SecretDetected(
                    path=MEMORY_PATH, rule=finding.rule, line=finding.line, change=index
                )
    proposal_id = uuid.uuid4()
    payload = json.dumps([change.as_dict() for change in changes]).encode()
    added_lines = [text for change in changes for text in (change.heading, change.line) if text]
    return Proposal.objects.create(
        id=proposal_id,
        workspace=workspace,
        admission_id=admission_id,
        changes_ciphertext=record_seal(
            data_key=data_key,
            plaintext=payload,
            record=RecordAddress("proposal", workspace.pk, proposal_id),
        ),
        base_version=base_version,
        clear_generation=clear_generation,
        reason=reason,
        flagged_rules=lines_flagged_rules(added_lines),
    )


def memory_proposal_apply(
    *, workspace: Workspace, author: User, proposal_id: uuid.UUID, base_version: int
) -> FileVersion:
    """Apply a proposal as a person's Save against `base_version`.

    Refused when the proposal is no longer open or was made before the latest Clear:
    a cleared memory is never refilled from an older suggestion.
    """
    data_key = workspace_key_ensure(workspace=workspace)
    with transaction.atomic():
        # Lock order: the policy row first, as Clear and the commit fence take it, so a
        # Clear cannot slip between the generation check and the write.
        memory_policy_row_ensure(workspace=workspace)
        policy = MemoryPolicy.objects.select_for_update().get(pk=workspace.pk)
        proposal = memory_proposal_get(workspace=workspace, proposal_id=proposal_id)
        if proposal.status != Proposal.Status.OPEN:
            raise ProposalRetired(status=proposal.status)
        if proposal.clear_generation != policy.clear_generation:
            raise ProposalRetired(
                "Memory was cleared after this proposal was made.", status="cleared"
            )
        current = memory_current_get(workspace=workspace)
        if current.version != base_version:
            raise VersionConflict(currentVersion=current.version)
        changes = memory_proposal_changes(proposal=proposal, workspace=workspace, data_key=data_key)
        revision = memory_revision_write(
            workspace=workspace,
            author=author,
            base_version=base_version,
            content=apply_memory_changes(current.content, changes),
            change_kind=FileVersion.ChangeKind.SAVE,
            data_key=data_key,
        )
        if not _proposal_resolve(proposal=proposal, status=Proposal.Status.APPLIED, actor=author):
            # A dismiss committed after the check above (it takes no policy lock): refusing
            # here rolls the revision back, so a dismissed proposal never changes memory.
            proposal.refresh_from_db(fields=["status"])
            raise ProposalRetired(status=proposal.status)
    return revision


def memory_proposal_dismiss(*, workspace: Workspace, author: User, proposal_id: uuid.UUID) -> None:
    """Dismiss an open proposal; dismissing a closed one is refused."""
    proposal = memory_proposal_get(workspace=workspace, proposal_id=proposal_id)
    if not _proposal_resolve(proposal=proposal, status=Proposal.Status.DISMISSED, actor=author):
        raise ProposalRetired(status=proposal.status)


def _proposal_resolve(*, proposal: Proposal, status: str, actor: User) -> bool:
    resolved = Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.OPEN).update(
        status=status, resolved_at=timezone.now(), resolved_by=actor
    )
    return resolved == 1


def memory_write(
    *,
    workspace: Workspace,
    author: User,
    base_version: int,
    content: str,
    is_clear: bool,
    restore_version: int | None = None,
) -> FileVersion:
    """A person's write of the memory document, from whichever route it arrives.

    `is_clear` (X-Memory-Clear: 1) is a Clear and ignores `content`, which the caller has
    checked is empty; `restore_version` is an Undo; otherwise `content` is saved. Every
    human route that writes the memory path goes through here, so memory changes one way
    only (the Clear generation, for one, cannot be skipped by writing the path elsewhere).
    """
    if is_clear:
        return memory_clear(workspace=workspace, author=author, base_version=base_version)
    if restore_version is not None:
        return memory_undo(
            workspace=workspace,
            author=author,
            base_version=base_version,
            restore_version=restore_version,
        )
    return memory_save(
        workspace=workspace, author=author, base_version=base_version, content=content
    )


def memory_line_keep(
    *, workspace: Workspace, reviewer: User, base_version: int, line: int
) -> LineReview:
    """Record that `reviewer` kept line `line` (from 1) of version `base_version` as still
    true. No revision is written and the text does not change.

    The review names the line by its origin (the revision that introduced it and its index
    there), so it holds for as long as the line stays unchanged. `base_version` must be the
    current version, since line numbers are those of one version; a Save that lands after
    the check changes nothing of that: the origin it named is still that line's.
    """
    current, origins = memory_line_origins(workspace=workspace)
    current_version = current.version if current else 0
    if current_version != base_version:
        raise VersionConflict(currentVersion=current_version)
    if current is None or not 1 <= line <= len(origins):
        raise NotFound("No such line in this version.")
    version, index = origins[line - 1]
    return LineReview.objects.create(
        workspace=workspace,
        origin=FileVersion.objects.get(file_id=current.file_id, version=version),
        origin_line=index,
        reviewed_version=current_version,
        reviewer=reviewer,
    )
