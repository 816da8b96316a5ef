"""The assistant turn: recall, model call, tools, repeat until the model answers.

Memory is attached at the model binding: immediately before every model call the
turn's memory is read afresh and appended to the system message for that call only.
It never enters the stored transcript, and the turn's initial data holds only ids.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, connection

from automation import services, tools
from automation.models import Message, Turn
from automation.prompts import system_message
from automation.providers import (
    ChatMessage,
    ModelProvider,
    ProviderUnavailable,
    ToolCall,
    provider_from_settings,
)
from automation.selectors import transcript_for_conversation
from workspaces.errors import DomainError
from workspaces.services import workspace_key_ensure

MAX_MODEL_CALLS = 6


def turn_run(*, turn_id: uuid.UUID, provider: ModelProvider | None = None) -> None:
    """Run a queued turn to completion. A turn already claimed elsewhere is left alone."""
    if not services.turn_claim(turn_id=turn_id):
        return
    turn = Turn.objects.select_related(
        "admission__owner", "admission__workspace", "admission__conversation__workspace"
    ).get(pk=turn_id)
    try:
        _run(turn, provider or provider_from_settings())
    except ProviderUnavailable:
        _turn_fail(turn, "MODEL_UNAVAILABLE")
    except DomainError as refusal:
        # e.g. a transcript or memory revision that fails its integrity check: the turn
        # fails with the refusal's code and the conversation stays usable.
        _turn_fail(turn, refusal.code)
    except Exception:
        _turn_fail(turn, "INTERNAL_ERROR")
        raise


def _turn_fail(turn: Turn, failure_code: str) -> None:
    """Mark the turn failed, on a new database connection if the turn's own was lost.

    The failure may be that very connection (a killed backend, a database restart):
    writing the outcome through it would fail too and leave the turn running.
    """
    try:
        services.turn_finish(turn=turn, failure_code=failure_code)
    except (InterfaceError, OperationalError):
        connection.close()
        services.turn_finish(turn=turn, failure_code=failure_code)


def _run(turn: Turn, provider: ModelProvider) -> None:
    admission = turn.admission
    workspace = admission.workspace
    data_key = workspace_key_ensure(workspace=workspace)

    def record(role: str, body: dict[str, Any]) -> None:
        services.transcript_append(
            turn=turn, workspace=workspace, data_key=data_key, role=role, body=body
        )

    messages = [
        _chat(entry.role, entry.body)
        for entry in transcript_for_conversation(conversation=admission.conversation)
    ]
    for _ in range(MAX_MODEL_CALLS):
        recall = services.memory_recall(admission=admission)
        reply = provider.complete(
            system=system_message(status=recall.status, version=recall.version, text=recall.text),
            messages=messages,
            tools=tools.TOOL_SPECS,
        )
        if not reply.tool_calls:
            record(Message.Role.ASSISTANT, {"content": reply.text})
            services.turn_finish(turn=turn)
            return
        calls_body = {"content": reply.text, "toolCalls": [_call_dict(c) for c in reply.tool_calls]}
        record(Message.Role.ASSISTANT, calls_body)
        messages.append(_chat(Message.Role.ASSISTANT, calls_body))
        context = tools.TurnContext(
            admission=admission,
            key_session_id=admission.key_session_id,
            recalled_version=recall.version,
        )
        for call in reply.tool_calls:
            result = _execute(call, context)
            result_body = {"content": json.dumps(result), "toolCallId": call.id}
            record(Message.Role.TOOL, result_body)
            messages.append(_chat(Message.Role.TOOL, result_body))
    services.turn_finish(turn=turn, failure_code="TOO_MANY_MODEL_CALLS")


def _execute(call: ToolCall, context: tools.TurnContext) -> dict[str, Any]:
    handler: Callable[..., dict[str, Any]] | None = tools.TOOLS.get(call.name)
    if handler is None:
        return {"status": "refused", "code": "UNKNOWN_TOOL", "message": f"No tool {call.name}."}
    try:
        return handler(context, **call.arguments)
    except TypeError:
        return {"status": "refused", "code": "BAD_ARGUMENTS", "message": "Wrong arguments."}


def _call_dict(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _chat(role: str, body: dict[str, Any]) -> ChatMessage:
    return ChatMessage(
        role=role,
        content=body.get("content", ""),
        tool_calls=tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
            for c in body.get("toolCalls", [])
        ),
        tool_call_id=body.get("toolCallId", ""),
    )
