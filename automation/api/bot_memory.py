"""The routes for bots (`/api/v1/bots/me/memory/...`, `/api/v1/bots/{id}/memory/context`):
a bot's memory tools for runtimes without MCP, and its context blocks. Only a bot token
reaches them (`BotBearerAuthentication`); the bot, and so its space, is the token's.
Thin: parse, call `automation.bot_memory` / `automation.bot_context`, render.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from automation.bot_context import bot_context, bot_pre_compact_message
from automation.bot_memory import (
    BotMemoryAccess,
    bot_memory_access,
    memory_list,
    memory_read,
    memory_write,
)
from automation.errors import (
    BotMemoryDisabled,
    BotMemoryToolDenied,
    BotMemoryUserUnavailable,
    MemoryWriteStale,
)
from memory.api.document_common import validated
from memory.api.spaces import SPACE_WRITE_REFUSALS
from memory.errors import SpaceInvalid, StoreBusy, StoreUnavailable
from memory_project.api.schema import Refusal, operation, refuses
from memory_project.api.serializers import QuerySerializer, StrictSerializer
from memory_project.api.views import ApiView
from workspaces.authentication import BotBearerAuthentication, request_credential
from workspaces.errors import (
    CredentialKindRefused,
    InvalidDocumentPath,
    InvalidText,
    NotFound,
    ValidationFailed,
)

RUN_HELP = (
    "The run: it completes a `private` spec's space, and keeps what this run has read apart "
    "from the bot's other runs (a write is based on what its own run last read)."
)


def _access(request: Request, run: str) -> BotMemoryAccess:
    credential = request_credential(request)
    if credential.bot is None:  # only a bot token authenticates here
        raise CredentialKindRefused("Only a bot's token reaches this route.")
    return bot_memory_access(bot=credential.bot, issuer=credential.user, run=run)


class ToolResult(serializers.Serializer):
    text = serializers.CharField(help_text="The tool's plain-text result, as MCP returns it.")


# What every bot memory route refuses with: a credential that is not a bot's, a spec that
# gives no space or not this tool, a store that cannot answer.
ACCESS_REFUSALS = (
    CredentialKindRefused,
    BotMemoryDisabled,
    BotMemoryToolDenied,
    BotMemoryUserUnavailable,
    SpaceInvalid,
    StoreUnavailable,
    StoreBusy,
)


class BotMemoryView(ApiView):
    authentication_classes = [BotBearerAuthentication]


class RunInput(StrictSerializer):
    run = serializers.CharField(required=False, default="", help_text=RUN_HELP)


# A memory tool's route: parse its arguments, call it as the token's bot, answer its text.
class _BotMemoryToolApi(BotMemoryView):
    serializer_class: type[RunInput]
    tool: Callable[..., str]

    def post(self, request: Request) -> Response:
        arguments = dict(validated(self.serializer_class(data=request.data)))
        access = _access(request, arguments.pop("run"))
        return Response({"text": type(self).tool(access=access, **arguments)})


def _tool_schema(summary: str, example: tuple[str, object], *refusals: Refusal) -> Any:
    """A memory tool route's schema: what every tool refuses with, and its own `refusals`."""
    return operation(
        summary,
        *ACCESS_REFUSALS,
        InvalidDocumentPath,
        *refusals,
        example=example,
        responses=ToolResult,
    )


@_tool_schema("memory_read: a document of the bot's space", ("Read", {"path": "notes/plan.md"}))
class BotMemoryReadApi(_BotMemoryToolApi):
    class InputSerializer(RunInput):
        path = serializers.CharField(trim_whitespace=False)

    serializer_class = InputSerializer
    tool = staticmethod(memory_read)


@_tool_schema("memory_list: the paths of the bot's space, one a line", ("Everything", {"path": ""}))
class BotMemoryListApi(_BotMemoryToolApi):
    class InputSerializer(RunInput):
        path = serializers.CharField(
            required=False, default="", allow_blank=True, trim_whitespace=False
        )

    serializer_class = InputSerializer
    tool = staticmethod(memory_list)


@_tool_schema(
    "memory_write: a document of the bot's space, on what it last read",
    ("Write", {"path": "notes/plan.md", "content": "# Plan\n- ship it\n"}),
    *SPACE_WRITE_REFUSALS,
    InvalidText,
    MemoryWriteStale,
)
class BotMemoryWriteApi(_BotMemoryToolApi):
    class InputSerializer(RunInput):
        path = serializers.CharField(trim_whitespace=False)
        content = serializers.CharField(allow_blank=True, trim_whitespace=False)

    serializer_class = InputSerializer
    tool = staticmethod(memory_write)


class BotMemoryContextApi(BotMemoryView):
    class ContextQuery(QuerySerializer):
        run = serializers.CharField(
            required=False, allow_blank=True, default="", help_text=RUN_HELP
        )
        purpose = serializers.ChoiceField(choices=["start", "pre_compact"], default="start")

    @refuses(*ACCESS_REFUSALS, NotFound, ValidationFailed)
    @extend_schema(
        summary="The bot's context blocks, or its pre-compaction message",
        parameters=[
            OpenApiParameter(
                "purpose",
                str,
                enum=["start", "pre_compact"],
                default="start",
                description=(
                    "What the context is for: `start`, a run's first context (the index and "
                    "autoload blocks), or `pre_compact`, the message to prepend before the "
                    "runtime compacts its conversation. Another value is VALIDATION_FAILED."
                ),
            ),
            OpenApiParameter("run", str, description=RUN_HELP),
        ],
        responses=OpenApiTypes.OBJECT,
        description=(
            "The bot's index and autoload blocks (`purpose=start`, the default), or "
            "`{messages: [...]}` with the one user message to prepend before a compaction "
            "(`purpose=pre_compact`; none when both blocks are empty or the spec turns "
            "`pre_compact_inject` off)."
        ),
    )
    def get(self, request: Request, bot_id: str) -> Response:
        query = validated(self.ContextQuery(data=request.query_params))
        # Another bot's id is no bot of the caller's: asked before the caller's own spec.
        if getattr(request_credential(request).bot, "slug", None) != bot_id:
            raise NotFound("No such bot.")
        access = _access(request, query["run"])
        if query["purpose"] == "pre_compact":
            message = bot_pre_compact_message(access=access)
            return Response({"messages": [{"role": "user", "content": message}] if message else []})
        context = bot_context(access=access)
        return Response(
            {
                "scopeRoot": context.scope_root,
                "index": context.index,
                "autoload": context.autoload,
                "omitted": [asdict(each) for each in context.omitted],
            }
        )
