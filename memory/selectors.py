"""Reads of the memory document and its policy."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet

from memory.edits import MemoryChange, parse_changes
from memory.instruction_lint import InstructionFinding, instruction_findings
from memory.models import MEMORY_PATH, MemoryPolicy, Proposal
from workspaces.crypto import RecordAddress, record_open, revision_open
from workspaces.errors import DocumentUnreadable, NotFound
from workspaces.models import File, FileVersion, Workspace
from workspaces.selectors import (
    VersionPage,
    file_version_get,
    file_version_page,
    file_version_plaintext,
    workspace_data_key,
)
from workspaces.services import document_encode
from workspaces.sql import driver_cursor, table


@dataclass(frozen=True)
class MemoryText:
    content: str
    version: int
    bytes: int
    # The document's file, where the read gives it (None: never written).
    file_id: int | None = None

    @property
    def is_recallable(self) -> bool:
        """Within the recall bound. Text over it is kept whole, just not recalled."""
        return self.bytes <= settings.MEMORY_RECALL_MAX_BYTES


@dataclass(frozen=True)
class PolicyState:
    mode: str
    policy_revision: int
    clear_generation: int


def memory_policy_get(*, workspace: Workspace) -> PolicyState:
    # A workspace whose policy was never written has the model's defaults.
    row = MemoryPolicy.objects.filter(workspace=workspace).first() or MemoryPolicy()
    return PolicyState(
        mode=row.mode, policy_revision=row.policy_revision, clear_generation=row.clear_generation
    )


def memory_revision_text(
    *, workspace: Workspace, revision: FileVersion, data_key: bytes | None = None
) -> MemoryText:
    """A revision's text, opened with `data_key` (an automatic reader's key session) or,
    for a person's request, with the workspace key the deployment unwraps."""
    content = file_version_plaintext(
        version=revision,
        workspace=workspace,
        data_key=data_key or workspace_data_key(workspace=workspace),
    )
    return MemoryText(content=content, version=revision.version, bytes=revision.size_bytes)


def memory_current_get(*, workspace: Workspace, data_key: bytes | None = None) -> MemoryText:
    """The saved memory; a never-written document reads as empty at version 0."""
    # SQL because it was measured: every capture reads memory first, and the ORM's read
    # (joining the file, compiled anew each time) cost more than the statement itself.
    with driver_cursor() as cursor:
        cursor.execute(
            f"SELECT v.file_id, v.version, v.size_bytes, v.ciphertext FROM {table(FileVersion)} v "
            f"JOIN {table(File)} f ON f.id = v.file_id AND v.version = f.current_version "
            "WHERE f.workspace_id = %s AND f.path = %s AND f.deleted_at IS NULL",
            [workspace.pk, MEMORY_PATH],
        )
        row = cursor.fetchone()
    if row is None:
        return MemoryText(content="", version=0, bytes=0)
    file_id, version, size_bytes, ciphertext = row
    # Opened from the row's values: a FileVersion built only to carry them cost a capture
    # more Python than the statement's own execute.
    plaintext = revision_open(
        data_key=data_key or workspace_data_key(workspace=workspace),
        ciphertext=bytes(ciphertext),
        workspace_id=workspace.pk,
        file_id=file_id,
        version=version,
    )
    return MemoryText(
        content=plaintext.decode(), version=version, bytes=size_bytes, file_id=file_id
    )


def memory_version_get(*, workspace: Workspace, version: int) -> FileVersion:
    return file_version_get(workspace=workspace, path=MEMORY_PATH, version=version)


def memory_version_page(*, workspace: Workspace, before: int | None, limit: int) -> VersionPage:
    return file_version_page(workspace=workspace, path=MEMORY_PATH, before=before, limit=limit)


def memory_proposal_changes(
    *, proposal: Proposal, workspace: Workspace, data_key: bytes
) -> list[MemoryChange]:
    """Open a proposal's sealed changes."""
    raw = record_open(
        data_key=data_key,
        ciphertext=bytes(proposal.changes_ciphertext),
        record=RecordAddress("proposal", workspace.pk, proposal.pk),
    )
    return parse_changes(json.loads(raw))


def memory_version_list(*, workspace: Workspace) -> QuerySet[FileVersion]:
    """The memory document's revisions, newest first."""
    return (
        FileVersion.objects.select_related("author")
        .filter(file__workspace=workspace, file__path=MEMORY_PATH)
        .order_by("-version")
    )


def memory_proposal_list_open(*, workspace: Workspace) -> QuerySet[Proposal]:
    """Open proposals, newest first."""
    return Proposal.objects.filter(workspace=workspace, status=Proposal.Status.OPEN).order_by(
        "-created_at", "-id"
    )


def memory_proposal_changes_opened(
    *, workspace: Workspace, proposals: list[Proposal]
) -> list[tuple[Proposal, list[MemoryChange]]]:
    """Each proposal with its changes opened for the member to review."""
    if not proposals:
        return []
    data_key = workspace_data_key(workspace=workspace)
    if data_key is None:
        raise DocumentUnreadable()
    return [
        (p, memory_proposal_changes(proposal=p, workspace=workspace, data_key=data_key))
        for p in proposals
    ]


def memory_proposal_get(*, workspace: Workspace, proposal_id: uuid.UUID) -> Proposal:
    proposal = Proposal.objects.filter(workspace=workspace, pk=proposal_id).first()
    if proposal is None:
        raise NotFound("No such proposal.")
    return proposal


def memory_lint(*, content: str) -> list[InstructionFinding]:
    """The instruction lint's findings on a person's draft of memory, judged whole within
    the ceiling a Save keeps (INVALID_TEXT, DOCUMENT_TOO_LARGE as a Save answers them)."""
    document_encode(content)
    return instruction_findings(content)
