"""The assistant's six tools: `remember_in_memory`, and for notes `list_documents`,
`search_documents`, `read_document`, `create_note` and `propose_edit`. The model supplies
only the arguments: the admission, the key session and the memory version it read come from
the server's side of the turn."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from automation.capture import capture_commit, capture_propose
from automation.errors import CaptureConflict, CaptureRetired, MemoryOversized
from automation.models import Admission
from automation.providers import ToolSpec
from automation.selectors import document_actor_for_turn
from memory.documents import (
    DocumentActor,
    document_list,
    document_read,
    document_search,
    document_write,
)
from memory.edits import MemoryChange, parse_changes
from memory.errors import MemoryEditInvalid, MemoryNamespaceReserved, SecretDetected
from memory.models import MemoryPolicy
from memory.namespace import is_memory_namespace
from workspaces.errors import DomainError, KeySessionUnavailable


@dataclass(frozen=True)
class TurnContext:
    """What the server hands a tool for one model call: never chosen by the model."""

    admission: Admission
    key_session_id: uuid.UUID | None
    recalled_version: int | None


def remember_in_memory(context: TurnContext, changes: Any) -> dict[str, Any]:
    """Commit (Auto), propose (Read only) or do nothing (Off), per the admitted mode.

    "remembered" is said only with a committed capture receipt. A version conflict never
    rebases: the change comes back as a proposal against the newer text.
    """
    admission = context.admission
    if admission.mode == MemoryPolicy.Mode.OFF:
        return {"status": "off", "message": "Memory is off for this workspace; nothing kept."}
    try:
        parsed = parse_changes(changes)
        key_session_id = context.key_session_id
        if key_session_id is None:
            raise KeySessionUnavailable(reason="missing")
        if admission.mode == MemoryPolicy.Mode.READ_ONLY:
            return _propose(admission, key_session_id, parsed)
        capture_receipt = capture_commit(
            admission=admission,
            owner=admission.owner,
            workspace=admission.workspace,
            key_session_id=key_session_id,
            expected_version=context.recalled_version or 0,
            changes=parsed,
        )
    except CaptureConflict as conflict:
        return {
            "status": "proposed",
            "reason": "version_conflict",
            "proposalId": conflict.detail["proposalId"],
            "currentVersion": conflict.detail["currentVersion"],
        }
    except (
        CaptureRetired,
        MemoryOversized,
        MemoryEditInvalid,
        SecretDetected,
        KeySessionUnavailable,
    ) as error:
        return _refused(error)
    if capture_receipt.is_unchanged:
        return {"status": "unchanged", "version": capture_receipt.version}
    return {
        "status": "remembered",
        "version": capture_receipt.version,
        "replayed": capture_receipt.is_replay,
    }


def _propose(
    admission: Admission, key_session_id: uuid.UUID, parsed: list[MemoryChange]
) -> dict[str, Any]:
    proposal = capture_propose(admission=admission, key_session_id=key_session_id, changes=parsed)
    return {"status": "proposed", "reason": "read_only", "proposalId": str(proposal.pk)}


def _refused(error: DomainError) -> dict[str, Any]:
    return {"status": "refused", "code": error.code, "message": error.message, **error.detail}


REMEMBER_SPEC = ToolSpec(
    name="remember_in_memory",
    description=(
        "Change the workspace's saved memory with at most five exact one-line edits: "
        "add (optionally under a heading), replace or remove. replace and remove must match "
        "exactly one whole line."
    ),
    parameters={
        "type": "object",
        "properties": {
            "changes": {
                "type": "array",
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"enum": ["add", "replace", "remove"]},
                        "line": {"type": "string"},
                        "target": {"type": "string"},
                        "heading": {"type": "string"},
                    },
                    "required": ["op"],
                },
            }
        },
        "required": ["changes"],
    },
)


def list_documents(context: TurnContext, prefix: str | None = None) -> dict[str, Any]:
    """The workspace's notes (the memory namespace is not among them)."""
    try:
        files = document_list(actor=_actor(context), prefix=prefix)
    except DomainError as error:
        return _refused(error)
    return {
        "status": "ok",
        "documents": [{"path": f.path, "version": f.current_version} for f in files],
    }


def search_documents(context: TurnContext, query: str, cursor: str | None = None) -> dict[str, Any]:
    try:
        found = document_search(actor=_actor(context), query=query, cursor=cursor)
    except DomainError as error:
        return _refused(error)
    return {
        "status": "ok",
        "results": [
            {"path": h.path, "version": h.version, "snippet": h.snippet} for h in found.hits
        ],
        "truncated": found.is_truncated,
        "nextCursor": found.next_cursor,
    }


def read_document(context: TurnContext, path: str) -> dict[str, Any]:
    if refusal := _memory_namespace_refusal(path):
        return refusal
    try:
        document = document_read(actor=_actor(context), raw_path=path)
    except DomainError as error:
        return _refused(error)
    return {
        "status": "ok",
        "path": document.path,
        "version": document.version,
        "content": document.content,
    }


def create_note(context: TurnContext, path: str, content: str) -> dict[str, Any]:
    """Create a new note (never overwrites: an existing path is a conflict)."""
    if refusal := _memory_namespace_refusal(path):
        return refusal
    try:
        revision = document_write(
            actor=_actor(context), raw_path=path, content=content, base_version=0
        )
    except DomainError as error:
        return _refused(error)
    return {"status": "created", "path": path, "version": revision.version}


def propose_edit(context: TurnContext, path: str, content: str) -> dict[str, Any]:
    """Suggest new text for a note without writing it: the person decides."""
    if refusal := _memory_namespace_refusal(path):
        return refusal
    return {"status": "proposed", "path": path, "content": content}


def _actor(context: TurnContext) -> DocumentActor:
    """The assistant as the document service's actor, with the key session it was handed."""
    return document_actor_for_turn(
        admission=context.admission, key_session_id=context.key_session_id
    )


def _memory_namespace_refusal(path: str) -> dict[str, Any] | None:
    # Refused here, before any request is made, so that Off cannot be bypassed by an
    # ordinary document read and memory is never written outside the commit fence.
    if is_memory_namespace(path):
        return _refused(MemoryNamespaceReserved())
    return None


def _path_spec(name: str, description: str, **extra: Any) -> ToolSpec:
    properties = {"path": {"type": "string"}, **extra}
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": list(properties)},
    )


TOOL_SPECS: list[ToolSpec] = [
    REMEMBER_SPEC,
    ToolSpec(
        name="list_documents",
        description="List the workspace's notes, optionally under a path prefix.",
        parameters={"type": "object", "properties": {"prefix": {"type": "string"}}},
    ),
    ToolSpec(
        name="search_documents",
        description=(
            "Search the workspace's notes for text. When `truncated` is true, call again "
            "with `cursor` set to `nextCursor` to search the rest."
        ),
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}, "cursor": {"type": "string"}},
            "required": ["query"],
        },
    ),
    _path_spec("read_document", "Read one note."),
    _path_spec("create_note", "Create a new note.", content={"type": "string"}),
    _path_spec(
        "propose_edit",
        "Suggest new text for a note for the person to review; nothing is written.",
        content={"type": "string"},
    ),
]
TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "remember_in_memory": remember_in_memory,
    "list_documents": list_documents,
    "search_documents": search_documents,
    "read_document": read_document,
    "create_note": create_note,
    "propose_edit": propose_edit,
}
