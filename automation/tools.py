"""The assistant's six tools: `remember_in_memory`, and for notes `list_documents`,
`search_documents`, `read_document`, `create_note` and `propose_edit`. The model supplies
only the arguments: the admission, the key session and the memory version it read come from
the server's side of the turn."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec

from automation.capture import capture_commit, capture_propose
from automation.errors import CaptureConflict, CaptureFlagged, CaptureRetired, MemoryOversized
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

Params = ParamSpec("Params")


@dataclass(frozen=True)
class TurnContext:
    """What the server hands a tool for one model call: never chosen by the model."""

    admission: Admission
    key_session_id: uuid.UUID | None
    recalled_version: int | None


def remember_in_memory(context: TurnContext, changes: Any) -> dict[str, Any]:
    """Commit (Auto), propose (Read only) or do nothing (Off), per the admitted mode.

    "remembered" is said only with a committed capture receipt. A version conflict never
    rebases: the change comes back as a proposal against the newer text; so does a change
    the instruction lint flags, with the rules it tripped.
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
    except CaptureFlagged as flagged:
        return {
            "status": "proposed",
            "reason": flagged.detail["reason"],
            "proposalId": flagged.detail["proposalId"],
            "rules": flagged.detail["rules"],
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


def _refusal_answered(
    tool: Callable[Params, dict[str, Any]],
) -> Callable[Params, dict[str, Any]]:
    """A document tool that answers its refusal (any DomainError) as a `refused` result
    for the model to read, instead of raising it."""

    @functools.wraps(tool)
    def answered(*args: Params.args, **kwargs: Params.kwargs) -> dict[str, Any]:
        try:
            return tool(*args, **kwargs)
        except DomainError as error:
            return _refused(error)

    return answered


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


@_refusal_answered
def list_documents(context: TurnContext, prefix: str | None = None) -> dict[str, Any]:
    """The workspace's notes (the memory namespace is not among them)."""
    files = document_list(actor=_actor(context), prefix=prefix)
    return {
        "status": "ok",
        "documents": [{"path": f.path, "version": f.current_version} for f in files],
    }


@_refusal_answered
def search_documents(context: TurnContext, query: str, cursor: str | None = None) -> dict[str, Any]:
    found = document_search(actor=_actor(context), query=query, cursor=cursor)
    return {
        "status": "ok",
        "results": [
            {"path": h.path, "version": h.version, "snippet": h.snippet} for h in found.hits
        ],
        "truncated": found.is_truncated,
        "nextCursor": found.next_cursor,
    }


@_refusal_answered
def read_document(context: TurnContext, path: str) -> dict[str, Any]:
    _memory_namespace_refuse(path)
    document = document_read(actor=_actor(context), raw_path=path)
    return {
        "status": "ok",
        "path": document.path,
        "version": document.version,
        "content": document.content,
    }


@_refusal_answered
def create_note(context: TurnContext, path: str, content: str) -> dict[str, Any]:
    """Create a new note (never overwrites: an existing path is a conflict)."""
    _memory_namespace_refuse(path)
    revision = document_write(actor=_actor(context), raw_path=path, content=content, base_version=0)
    return {"status": "created", "path": path, "version": revision.version}


@_refusal_answered
def propose_edit(context: TurnContext, path: str, content: str) -> dict[str, Any]:
    """Suggest new text for a note without writing it: the person decides."""
    _memory_namespace_refuse(path)
    return {"status": "proposed", "path": path, "content": content}


def _actor(context: TurnContext) -> DocumentActor:
    """The assistant as the document service's actor, with the key session it was handed."""
    return document_actor_for_turn(
        admission=context.admission, key_session_id=context.key_session_id
    )


def _memory_namespace_refuse(path: str) -> None:
    # Refused here, before any request is made, so that Off cannot be bypassed by an
    # ordinary document read and memory is never written outside the commit fence.
    if is_memory_namespace(path):
        raise MemoryNamespaceReserved()


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
