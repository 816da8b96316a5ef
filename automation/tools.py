"""The assistant's memory tool. The model supplies only the edits: the admission, the key
session and the version it read come from the server's side of the turn."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from automation.errors import CaptureConflict, CaptureRetired, MemoryOversized
from automation.models import Admission
from automation.providers import ToolSpec
from automation.services import capture_commit
from memory.edits import MemoryChange, parse_changes
from memory.errors import MemoryEditInvalid
from memory.models import MemoryPolicy
from memory.selectors import memory_current_get
from memory.services import memory_proposal_create
from workspaces.errors import DomainError, KeySessionUnavailable
from workspaces.services import key_session_resolve


@dataclass(frozen=True)
class TurnContext:
    """What the server hands a tool for one model call: never chosen by the model."""

    admission: Admission
    key_session_id: uuid.UUID | None
    recalled_version: int | None


def remember_in_memory(context: TurnContext, changes: Any) -> dict[str, Any]:
    """Commit (Auto), propose (Read only) or do nothing (Off), per the admitted mode.

    "remembered" is said only with a committed receipt. A version conflict never
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
        receipt = capture_commit(
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
    except (CaptureRetired, MemoryOversized, MemoryEditInvalid, KeySessionUnavailable) as error:
        return _refused(error)
    if receipt.is_unchanged:
        return {"status": "unchanged", "version": receipt.version}
    return {"status": "remembered", "version": receipt.version, "replayed": receipt.is_replay}


def _propose(
    admission: Admission, key_session_id: uuid.UUID, parsed: list[MemoryChange]
) -> dict[str, Any]:
    data_key = key_session_resolve(
        session_id=key_session_id, workspace=admission.workspace, user=admission.owner
    )
    current = memory_current_get(workspace=admission.workspace, data_key=data_key)
    proposal = memory_proposal_create(
        workspace=admission.workspace,
        admission_id=admission.pk,
        changes=parsed,
        base_version=current.version,
        clear_generation=admission.clear_generation,
        reason="read_only",
        data_key=data_key,
    )
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

TOOL_SPECS: list[ToolSpec] = [REMEMBER_SPEC]
TOOLS: dict[str, Callable[..., dict[str, Any]]] = {"remember_in_memory": remember_in_memory}
