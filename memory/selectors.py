"""Reads of the memory document and its policy."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from memory.models import MEMORY_PATH, MemoryPolicy
from workspaces.errors import DocumentUnreadable
from workspaces.models import FileVersion, Workspace
from workspaces.selectors import (
    file_current_version,
    file_version_get,
    file_version_page,
    file_version_plaintext,
    workspace_data_key,
)


@dataclass(frozen=True)
class PolicyState:
    mode: str
    policy_revision: int
    clear_generation: int


@dataclass(frozen=True)
class MemoryText:
    content: str
    version: int
    bytes: int

    @property
    def is_recallable(self) -> bool:
        """Within the recall bound. Text over it is kept whole, just not recalled."""
        return self.bytes <= settings.MEMORY_RECALL_MAX_BYTES


def memory_policy_get(*, workspace: Workspace) -> PolicyState:
    row = MemoryPolicy.objects.filter(workspace=workspace).first()
    if row is None:
        return PolicyState(mode=MemoryPolicy.Mode.READ_ONLY, policy_revision=0, clear_generation=0)
    return PolicyState(
        mode=row.mode, policy_revision=row.policy_revision, clear_generation=row.clear_generation
    )


def memory_revision_text(*, workspace: Workspace, revision: FileVersion) -> MemoryText:
    data_key = workspace_data_key(workspace=workspace)
    if data_key is None:
        raise DocumentUnreadable(version=revision.version)
    content = file_version_plaintext(version=revision, workspace=workspace, data_key=data_key)
    return MemoryText(content=content, version=revision.version, bytes=revision.size_bytes)


def memory_current_get(*, workspace: Workspace) -> MemoryText:
    """The saved memory; a never-written document reads as empty at version 0."""
    revision = file_current_version(workspace=workspace, path=MEMORY_PATH)
    if revision is None:
        return MemoryText(content="", version=0, bytes=0)
    return memory_revision_text(workspace=workspace, revision=revision)


def memory_version_get(*, workspace: Workspace, version: int) -> FileVersion:
    return file_version_get(workspace=workspace, path=MEMORY_PATH, version=version)


def memory_version_page(
    *, workspace: Workspace, before: int | None, limit: int
) -> list[FileVersion]:
    return file_version_page(workspace=workspace, path=MEMORY_PATH, before=before, limit=limit)
