"""The MCP server: notes and the assistant for people, memory tools for bots.

An MCP client (streamable HTTP at `/mcp`) acts as the person whose MCP-scoped personal access
token it presents, in that token's team, or as the bot whose token it presents. A bot sees
only the memory tools its spec gives it and the `memory_context` prompt
(`automation.bot_memory`, `automation.bot_context`); a person sees only the notes tools
below. For a person:

- every HTTP request carries `Authorization: Bearer <token>`, verified by the API's own
  bearer authenticator in its MCP form (a PAT is looked up on every request, so a
  revocation takes effect at once); only a token created with scope `mcp` is taken, and such
  a token is refused on every `/api/` route, so an MCP client gets no memory API. Anything
  else is refused before the MCP layer sees the request (401, or 403 for another kind or
  scope of credential or a closed org);
- every tool names a workspace, which is looked up through the caller's membership in the
  credential's team, so another team's workspace and a missing one are the same NOT_FOUND;
- a tool's arguments pass the REST route's own serializers, so they are judged exactly as
  there (VALIDATION_FAILED, same `detail.fields`);
- documents go through the one document service (`memory.documents`) as a client acting as
  its member, exactly as the automation document routes do: revisions are authored `human`,
  and every spelling of `.zudotext/memory/` is refused (MEMORY_NAMESPACE_RESERVED) or left
  out of listings. External clients get no memory API;
- `ask_zudo_agent` sends an ordinary assistant turn through `message_admit`, the ingress the
  HTTP route uses, with no X-Memory-State (recall uses the server's current revision) and
  the token owner's authority for that one turn: a key session opened for the turn and
  revoked once the tool stops waiting for it, so recall and capture follow the workspace's
  policy exactly as for a turn sent from the app.

A domain refusal is an MCP tool error (`isError`) whose structured content has the API's
error shape `{"error": {"code", "message", "detail"}}`; anything unexpected reaches the
client only as the SDK's generic "Error executing tool", never with a traceback.

The credential is carried on the ASGI scope of the request that carries the tool call, and
tools read it from the request the SDK hands them (`ctx.request_context.request`). A
contextvar would not do: the SDK runs handlers in tasks started by its session manager,
which do not inherit the request's context.

The ORM is used only through `sync_to_async(thread_sensitive=True)`, with Django's
per-request connection housekeeping around each call, and the server closes that thread's
connections when it shuts down.
"""

from __future__ import annotations

import json
import math
import tomllib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.db import close_old_connections, connections, transaction
from django.http import HttpRequest
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field
from rest_framework import serializers
from rest_framework.exceptions import AuthenticationFailed, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.validators import ProhibitSurrogateCharactersValidator
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from automation import bot_memory
from automation.api import serializers as shapes
from automation.api.bot_memory import (
    BotMemoryContextApi,
    BotMemoryListApi,
    BotMemoryReadApi,
    BotMemoryWriteApi,
    RunInput,
)
from automation.bot_context import bot_context, bot_pre_compact_message
from automation.bot_memory import (
    BotMemoryAccess,
    BotMemoryTool,
    bot_memory_access,
    bot_memory_tools,
)
from automation.explain import recall_explanation
from automation.models import Admission, RecallStatus, Turn
from automation.selectors import TurnProgress, conversation_get_for_owner, turn_progress_get
from automation.services import conversation_create, message_admit_from_mcp, turn_key_session_end
from memory import documents
from memory.api.document_common import DocumentListQuerySerializer, validated
from memory_project.api.parsers import NOT_UTF8_JSON, is_utf8_json
from memory_project.api.serializers import StrictSerializer
from memory_project.middleware import (
    MAX_CONTENT_LENGTH_DIGITS,
    body_length_refusal,
    unknown_parameters_refusal,
)
from workspaces.authentication import Credential, McpBearerAuthentication
from workspaces.errors import CredentialKindRefused, DomainError, NotFound
from workspaces.models import Workspace, WorkspaceMembership
from workspaces.selectors import workspace_list_for_member, workspace_membership_get

MCP_PATH = "/mcp"


def project_version() -> str:
    """The project's version (pyproject.toml), which the server reports as serverInfo."""
    with (Path(settings.BASE_DIR) / "pyproject.toml").open("rb") as pyproject:
        return str(tomllib.load(pyproject)["project"]["version"])


CREDENTIAL_SCOPE_KEY = "workspace_memory.credential"
# How long ask_zudo_agent waits for a turn a Celery worker runs (none when eager).
ASK_WAIT_SECONDS = 60.0
ASK_POLL_SECONDS = 0.5
ASK_TEXT_MAX_CHARS = 20_000  # as POST .../messages
_UNFINISHED = frozenset({Turn.State.QUEUED.value, Turn.State.RUNNING.value})

P = ParamSpec("P")
R = TypeVar("R")


# --- Authentication ----------------------------------------------------------------------


class BearerRefused(Exception):
    """An HTTP request to the MCP app refused before any tool runs, in the API's shape."""

    def __init__(
        self, code: str, message: str, status: int, detail: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.detail = detail or {}
        self.headers: dict[str, str] = {}


def bearer_credential(authorization: str, client_address: str = "") -> Credential:
    """The Credential an `Authorization` header value stands for, verified by the API's own
    bearer authenticator in its MCP form (`McpBearerAuthentication`): a PAT or JWT is judged
    exactly as on `/api/`, failed tokens count against the client address as there, and
    only an MCP-scoped personal access token is taken.

    Raises BearerRefused with the API's code and status: 401 AUTHENTICATION_REQUIRED without
    a credential or the authenticator's own 401 (TOKEN_INVALID, TOKEN_EXPIRED,
    TOKEN_REVOKED); 403 CREDENTIAL_KIND_REFUSED for another kind of credential,
    TOKEN_SCOPE_REFUSED for a token of the person API (or a JWT), ORG_PENDING_DELETION for
    a closed org; 429 RATE_LIMITED past the failed-token limit.
    """
    http_request = HttpRequest()
    http_request.META["HTTP_AUTHORIZATION"] = authorization
    http_request.META["REMOTE_ADDR"] = client_address
    try:
        authenticated = McpBearerAuthentication().authenticate(Request(http_request))
    except AuthenticationFailed as refusal:
        codes = refusal.get_codes()
        code = codes if isinstance(codes, str) and codes.isupper() else "TOKEN_INVALID"
        raise BearerRefused(code, str(refusal.detail), 401) from None
    except Throttled as refusal:
        retry_after = max(1, math.ceil(getattr(refusal, "wait", None) or 1))
        limited = BearerRefused(
            "RATE_LIMITED",
            "Too many requests; retry later.",
            429,
            {"retryAfterSeconds": retry_after},
        )
        limited.headers["Retry-After"] = str(retry_after)
        raise limited from None
    except DomainError as refusal:
        raise BearerRefused(refusal.code, refusal.message, refusal.status, refusal.detail) from None
    if authenticated is not None:
        return authenticated[1]
    if authorization.strip():
        refused = CredentialKindRefused("The MCP server takes only `Bearer` MCP tokens.")
        raise BearerRefused(refused.code, refused.message, refused.status)
    raise BearerRefused(
        "AUTHENTICATION_REQUIRED",
        "Send Authorization: Bearer <MCP-scoped personal access token>.",
        401,
    )


def _is_allowed(value: str, allowed: list[str]) -> bool:
    """`value` (a Host or an Origin) matches `allowed` as the SDK matches it: exactly, or
    `base:*` for base with any port."""
    return value in allowed or any(
        pattern.endswith(":*") and value.startswith(pattern[:-1]) for pattern in allowed
    )


def _transport_refusal(
    headers: Headers, method: str, security: TransportSecuritySettings | None
) -> BearerRefused | None:
    """The SDK's own checks of the Host, the Origin and a POST's Content-Type, made first
    here to answer them as the API does: the SDK answers in plain text, and only after the
    credential was looked up."""
    if security is not None and security.enable_dns_rebinding_protection:
        if not _is_allowed(headers.get("host", ""), security.allowed_hosts):
            return BearerRefused(
                "HOST_NOT_ALLOWED", "This server does not answer for that host.", 400
            )
        origin = headers.get("origin")
        if origin and not _is_allowed(origin, security.allowed_origins):
            return BearerRefused("CROSS_ORIGIN_REJECTED", "Cross-origin request rejected.", 403)
    if method == "POST" and not is_utf8_json(headers.get("content-type", "")):
        return BearerRefused("UNSUPPORTED_MEDIA_TYPE", NOT_UTF8_JSON, 415)
    return None


async def _chunked_body(receive: Receive) -> tuple[list[Message], int]:
    """The messages of a body sent without a length, read until it ends or is past
    REQUEST_MAX_BODY_BYTES (as memory_project/wsgi.py reads one for the API), and its size."""
    messages: list[Message] = []
    size = 0
    while size <= settings.REQUEST_MAX_BODY_BYTES:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return messages, size


class BearerCredentialMiddleware:
    """Answers any HTTP request the MCP server does not take (its Host, Origin or
    Content-Type, a body over the limit, no credential the server takes) in the API's error
    shape; otherwise puts the Credential on the request's scope for the tools."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings | None = None) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_headers = Headers(scope=scope)
        client = scope.get("client") or ("", 0)
        try:
            refusal = _transport_refusal(request_headers, scope["method"], self.security)
            if refusal is not None:
                raise refusal
            # As the API refuses it, before the credential is looked up.
            length = request_headers.get("content-length", "")
            is_length = length.isascii() and length.isdigit()
            if is_length and len(length) <= MAX_CONTENT_LENGTH_DIGITS:
                too_large = body_length_refusal(int(length))
                if too_large is not None:
                    raise BearerRefused(*too_large)
            elif "transfer-encoding" in request_headers:
                received, size = await _chunked_body(receive)
                too_large = body_length_refusal(size)
                if too_large is not None:
                    raise BearerRefused(*too_large)
                receive = _replay(received, receive)
            authorization = request_headers.get("authorization", "")
            credential = await _in_db_thread(bearer_credential)(authorization, client[0])
        except BearerRefused as refusal:
            headers = dict(refusal.headers)
            if refusal.status == 401:
                headers["WWW-Authenticate"] = 'Bearer realm="mcp"'
            response = JSONResponse(
                _error_body(refusal.code, refusal.message, _json_safe(refusal.detail)),
                status_code=refusal.status,
                headers=headers,
            )
            await response(scope, receive, send)
            return
        scope[CREDENTIAL_SCOPE_KEY] = credential
        await self.app(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive` that first hands over `messages`, already read from it."""

    async def replayed() -> Message:
        return messages.pop(0) if messages else await receive()

    return replayed


class _AuthenticationRequired(DomainError):
    code = "AUTHENTICATION_REQUIRED"
    status = 401
    default_message = "This request carries no verified credential."


def _request_credential(request: object) -> Credential:
    scope = getattr(request, "scope", None)
    credential = scope.get(CREDENTIAL_SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(credential, Credential):
        raise _AuthenticationRequired()
    return credential


def _caller(ctx: Context, *, bot: bool = False) -> Credential:
    """The credential of the HTTP request that carries this tool call: a person's for the
    notes tools, a bot's for the memory tools (a bot token's `user` is the owner who issued
    it, never someone the bot may act as)."""
    credential = _request_credential(ctx.request_context.request)
    if (credential.bot is not None) != bot:
        raise CredentialKindRefused(
            "This tool is a bot's." if bot else "A bot's token cannot act as a person."
        )
    return credential


# --- The database thread and results -----------------------------------------------------


def _in_db_thread(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run `fn` in the ORM's thread, with Django's per-request connection housekeeping."""

    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=True)


def _error_body(code: str, message: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    """The API's error shape (memory_project.api.exceptions.error_body)."""
    return {"error": {"code": code, "message": message, "detail": detail or {}}}


def _result(payload: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=is_error,
    )


def _json_safe(detail: dict[str, Any]) -> dict[str, Any]:
    safe: dict[str, Any] = json.loads(json.dumps(detail, default=str))
    return safe


def _refusal(error: DomainError) -> CallToolResult:
    return _result(_error_body(error.code, error.message, _json_safe(error.detail)), is_error=True)


async def _answer(
    ctx: Context, work: Callable[..., BaseModel | str], *args: Any, **kwargs: Any
) -> CallToolResult:
    """Run one tool's work for the calling credential; a domain refusal becomes a tool error.
    A bot's memory tool answers plain text, a notes tool structured content."""
    is_bot_tool = work in _BOT_WORK
    try:
        credential = _caller(ctx, bot=is_bot_tool)
        result = await _in_db_thread(work)(credential, *args, **kwargs)
    except DomainError as error:
        return _refusal(error)
    except ValidationError as invalid:
        # As the API answers it: VALIDATION_FAILED with the problems per argument.
        detail = _json_safe({"fields": invalid.detail})
        body = _error_body("VALIDATION_FAILED", "The arguments are not valid.", detail)
        return _result(body, is_error=True)
    if isinstance(result, str):
        return CallToolResult(content=[TextContent(type="text", text=result)])
    return _result(result.model_dump(mode="json"))


def _workspace(credential: Credential, workspace_id: int) -> Workspace:
    """A workspace the caller is a member of, in the credential's team; else NOT_FOUND."""
    return _membership(credential, workspace_id).workspace


def _membership(credential: Credential, workspace_id: int) -> WorkspaceMembership:
    return workspace_membership_get(
        user=credential.user, team=credential.team, workspace_id=workspace_id
    )


def _client(credential: Credential, workspace_id: int) -> documents.DocumentActor:
    """The caller as the document service's actor: a client acting as its member."""
    membership = _membership(credential, workspace_id)
    return documents.DocumentActor.of_member(membership, documents.ActorKind.CLIENT)


# --- Output shapes ---------------------------------------------------------------------------


class DocumentEntry(BaseModel):
    path: str
    version: int


class DocumentList(BaseModel):
    documents: list[DocumentEntry]


class SearchHitOut(BaseModel):
    path: str
    version: int
    snippet: str


class SearchResults(BaseModel):
    results: list[SearchHitOut]
    truncated: bool
    next_cursor: str | None


class DocumentOut(BaseModel):
    path: str
    version: int
    size_bytes: int
    content: str


class CreatedNote(BaseModel):
    path: str
    version: int


class WorkspaceOut(BaseModel):
    id: int
    name: str
    ai_enabled: bool


class WorkspaceList(BaseModel):
    workspaces: list[WorkspaceOut]


class TurnAnswer(TurnProgress):
    """A turn's progress, and what memory it was given: `memory_explanation` says, when the
    model was given none, which rule withheld it."""

    memory_recall: str | None = Field(
        description="provided, off, empty, or why memory was withheld; null before any read."
    )
    memory_explanation: str | None


# --- The tools' work (in the ORM's thread) -----------------------------------------------------
# A tool's arguments pass the REST route's own serializers: one rule for both surfaces.


def _list(credential: Credential, workspace_id: int, prefix: str | None) -> DocumentList:
    actor = _client(credential, workspace_id)
    arguments = {} if prefix is None else {"prefix": prefix}
    query = validated(DocumentListQuerySerializer(data=arguments))
    files = documents.document_list(actor=actor, prefix=query.get("prefix"))
    return DocumentList(
        documents=[DocumentEntry(path=file.path, version=file.current_version) for file in files]
    )


def _search(
    credential: Credential, workspace_id: int, query: str, cursor: str | None
) -> SearchResults:
    actor = _client(credential, workspace_id)
    arguments = {"q": query} if cursor is None else {"q": query, "cursor": cursor}
    valid = validated(shapes.SearchQuery(data=arguments))
    found = documents.document_search(actor=actor, query=valid["q"], cursor=valid.get("cursor"))
    return SearchResults(
        results=[
            SearchHitOut(path=h.path, version=h.version, snippet=h.snippet) for h in found.hits
        ],
        truncated=found.is_truncated,
        next_cursor=found.next_cursor,
    )


def _read(credential: Credential, workspace_id: int, path: str) -> DocumentOut:
    document = documents.document_read(actor=_client(credential, workspace_id), raw_path=path)
    return DocumentOut(
        path=document.path,
        version=document.version,
        size_bytes=document.bytes,
        content=document.content,
    )


def _workspaces(credential: Credential) -> WorkspaceList:
    listed = workspace_list_for_member(user=credential.user, team=credential.team)
    return WorkspaceList(
        workspaces=[
            WorkspaceOut(id=each.pk, name=each.name, ai_enabled=each.ai_enabled) for each in listed
        ]
    )


def _create(credential: Credential, workspace_id: int, path: str, content: str) -> CreatedNote:
    return _write(credential, workspace_id, path, content, base_version=0)


def _update(
    credential: Credential, workspace_id: int, path: str, content: str, base_version: int
) -> CreatedNote:
    return _write(credential, workspace_id, path, content, base_version=base_version)


def _write(
    credential: Credential, workspace_id: int, path: str, content: str, *, base_version: int
) -> CreatedNote:
    actor = _client(credential, workspace_id)
    # In the REST route's order: the path first, then the body.
    (canonical,) = documents.document_paths(
        actor=actor, operation=documents.Operation.WRITE, raw_paths=[path]
    )
    body = validated(shapes.Save(data={"content": content}))
    revision = documents.document_write(
        actor=actor, raw_path=canonical, content=body["content"], base_version=base_version
    )
    return CreatedNote(path=revision.file.path, version=revision.version)


def _ask(
    credential: Credential, workspace_id: int, text: str, conversation_id: uuid.UUID | None
) -> TurnProgress:
    workspace = _workspace(credential, workspace_id)
    # One transaction, so a refused turn (workspace AI off, invalid text) leaves no empty
    # conversation behind. The turn runs on its commit (eagerly in the embedded default).
    with transaction.atomic():
        if conversation_id is None:
            conversation = conversation_create(workspace=workspace, owner=credential.user)
        else:
            conversation = conversation_get_for_owner(
                user=credential.user, team=credential.team, conversation_id=conversation_id
            )
            if conversation.workspace_id != workspace.pk:
                raise NotFound("No such conversation.")
        admitted = message_admit_from_mcp(
            conversation=conversation, sender=credential.user, text=text
        )
    return _turn_view(credential, admitted.turn.pk)


def _turn_authority_end(credential: Credential, turn_id: uuid.UUID) -> None:
    turn_key_session_end(admission=Admission.objects.get(turn__pk=turn_id, owner=credential.user))


def _turn_view(credential: Credential, turn_id: uuid.UUID) -> TurnProgress:
    return turn_progress_get(turn_id=turn_id, owner=credential.user)


def _turn_answer(credential: Credential, turn: TurnProgress) -> TurnAnswer:
    admission = Admission.objects.get(pk=turn.admission_id, owner=credential.user)
    status = admission.recall_status or None
    is_withheld = status is not None and status != RecallStatus.PROVIDED
    return TurnAnswer(
        **turn.model_dump(),
        memory_recall=status,
        memory_explanation=recall_explanation(admission) if is_withheld else None,
    )


# --- The tools ---------------------------------------------------------------------------------

WorkspaceId = Annotated[int, Field(description="A workspace you are a member of.")]
NotePath = Annotated[str, Field(description="The note's path, e.g. `projects/plan.md`.")]


async def list_documents(
    workspace_id: WorkspaceId,
    ctx: Context,
    prefix: Annotated[str | None, Field(description="Only paths starting with this.")] = None,
) -> Annotated[CallToolResult, DocumentList]:
    """List the workspace's notes (path and current version), optionally under a prefix."""
    return await _answer(ctx, _list, workspace_id, prefix)


async def search_documents(
    workspace_id: WorkspaceId,
    query: Annotated[str, Field(description="Text to find, case-insensitive.")],
    ctx: Context,
    cursor: Annotated[
        str | None,
        Field(description="The `next_cursor` of a truncated search, to search the rest."),
    ] = None,
) -> Annotated[CallToolResult, SearchResults]:
    """Search the workspace's notes for text; returns paths with a snippet each.

    One call searches a bounded amount of text: when `truncated` is true, call again with
    `cursor` set to `next_cursor` to continue."""
    return await _answer(ctx, _search, workspace_id, query, cursor)


async def read_document(
    workspace_id: WorkspaceId, path: NotePath, ctx: Context
) -> Annotated[CallToolResult, DocumentOut]:
    """Read one note's current text and version."""
    return await _answer(ctx, _read, workspace_id, path)


async def create_note(
    workspace_id: WorkspaceId,
    path: NotePath,
    content: Annotated[str, Field(description="The note's Markdown text.")],
    ctx: Context,
) -> Annotated[CallToolResult, CreatedNote]:
    """Create a new note. Never overwrites: an existing path is VERSION_CONFLICT (change an
    existing note with update_note)."""
    return await _answer(ctx, _create, workspace_id, path, content)


async def update_note(
    workspace_id: WorkspaceId,
    path: NotePath,
    content: Annotated[str, Field(description="The note's new Markdown text, whole.")],
    base_version: Annotated[
        int,
        Field(ge=0, description="The version you read (read_document); 0 creates the note."),
    ],
    ctx: Context,
) -> Annotated[CallToolResult, CreatedNote]:
    """Replace a note's text, based on the version you read. If it changed since, nothing
    is written and the answer is VERSION_CONFLICT with `detail.currentVersion`."""
    return await _answer(ctx, _update, workspace_id, path, content, base_version)


async def list_workspaces(ctx: Context) -> Annotated[CallToolResult, WorkspaceList]:
    """List the workspaces you are a member of: the ids every other tool takes."""
    return await _answer(ctx, _workspaces)


async def ask_zudo_agent(
    workspace_id: WorkspaceId,
    text: Annotated[
        str,
        Field(min_length=1, max_length=ASK_TEXT_MAX_CHARS, description="Your message."),
    ],
    ctx: Context,
    conversation_id: Annotated[
        uuid.UUID | None,
        Field(description="Continue one of your conversations in this workspace; omit for new."),
    ] = None,
) -> Annotated[CallToolResult, TurnAnswer]:
    """Send a message to the workspace assistant and return its turn: id, state and answer.

    An ordinary assistant turn under the workspace's memory policy, with your authority for
    this turn: it is given saved memory and may remember, as the policy allows. When the
    model was given no memory, `memory_explanation` says which rule withheld it.
    """
    try:
        credential = _caller(ctx)
        turn = await _in_db_thread(_ask)(credential, workspace_id, text, conversation_id)
        try:
            # With a Celery worker the turn runs elsewhere: wait a while for its answer.
            deadline = anyio.current_time() + ASK_WAIT_SECONDS
            while turn.state in _UNFINISHED:
                if anyio.current_time() >= deadline:
                    break
                await anyio.sleep(ASK_POLL_SECONDS)
                turn = await _in_db_thread(_turn_view)(credential, turn.turn_id)
        finally:
            # Shielded, so that a client hanging up cannot leave the turn's session open.
            with anyio.CancelScope(shield=True):
                await _in_db_thread(_turn_authority_end)(credential, turn.turn_id)
        answer = await _in_db_thread(_turn_answer)(credential, turn)
    except DomainError as error:
        return _refusal(error)
    return _result(answer.model_dump(mode="json"))


# --- A bot's memory tools and context prompt ----------------------------------------------
# A bot token selects the bot, and with it the one space its spec names; a `private` space
# takes its run from this header, set by the runtime, never by the model.
RUN_HEADER = "x-memory-run"


def _bot_access(credential: Credential, run: str) -> BotMemoryAccess:
    assert credential.bot is not None  # `_caller(..., bot=True)` let only a bot through
    return bot_memory_access(bot=credential.bot, issuer=credential.user, run=run)


def _bot_arguments(shape: type[RunInput], **arguments: str) -> dict[str, Any]:
    """`arguments` as the tool's REST route judges its body (NUL in `content` included),
    before the bot's access, in that route's order; the run is the header's, not the model's."""
    valid = dict(validated(shape(data=arguments)))
    del valid["run"]
    return valid


def _bot_read(credential: Credential, run: str, path: str) -> str:
    arguments = _bot_arguments(BotMemoryReadApi.InputSerializer, path=path)
    return bot_memory.memory_read(access=_bot_access(credential, run), **arguments)


def _bot_list(credential: Credential, run: str, path: str) -> str:
    arguments = _bot_arguments(BotMemoryListApi.InputSerializer, path=path)
    return bot_memory.memory_list(access=_bot_access(credential, run), **arguments)


def _bot_write(credential: Credential, run: str, path: str, content: str) -> str:
    arguments = _bot_arguments(BotMemoryWriteApi.InputSerializer, path=path, content=content)
    return bot_memory.memory_write(access=_bot_access(credential, run), **arguments)


_BOT_WORK: frozenset[Callable[..., str]] = frozenset({_bot_read, _bot_list, _bot_write})


def _run(ctx: Context) -> str:
    headers = getattr(ctx.request_context.request, "headers", None) or {}
    return str(headers.get(RUN_HEADER, ""))


SpacePath = Annotated[
    str, Field(description="A document's path in your memory space, e.g. `notes/plan.md`.")
]


async def memory_read(path: SpacePath, ctx: Context) -> CallToolResult:
    """Read one document of your memory space: its text. Read a document before you
    change it: memory_write writes over the revision you last read."""
    return await _answer(ctx, _bot_read, _run(ctx), path)


async def memory_list(
    ctx: Context,
    path: Annotated[
        str, Field(description="A directory of your memory space; omit for all of it.")
    ] = "",
) -> CallToolResult:
    """List the documents of your memory space (under a directory): one path a line, or
    `(empty)`."""
    return await _answer(ctx, _bot_list, _run(ctx), path)


async def memory_write(
    path: SpacePath,
    content: Annotated[str, Field(description="The document's whole new Markdown text.")],
    ctx: Context,
) -> CallToolResult:
    """Create or replace one document of your memory space with `content`. If it changed
    since you last read or listed it, nothing is written: read it again, then write."""
    return await _answer(ctx, _bot_write, _run(ctx), path, content)


def _bot_context(credential: Credential, run: str, purpose: str) -> list[str]:
    access = _bot_access(credential, run)
    if purpose == "pre_compact":
        message = bot_pre_compact_message(access=access)
        return [message] if message else []
    context = bot_context(access=access)
    return [block for block in (context.index, context.autoload) if block]


async def memory_context(
    ctx: Context,
    purpose: Annotated[
        str,
        Field(
            description="`start` (the default): the index and autoload blocks; "
            "`pre_compact`: the one message to prepend before a compaction."
        ),
    ] = "start",
) -> list[UserMessage]:
    """Your memory space as context: its index block, then its autoload block."""
    try:
        # As the REST route judges `?purpose=`: VALIDATION_FAILED with its `detail.fields`.
        validated(BotMemoryContextApi.ContextQuery(data={"purpose": purpose}))
        credential = _caller(ctx, bot=True)
        blocks = await _in_db_thread(_bot_context)(credential, _run(ctx), purpose)
    except DomainError as error:
        raise MCPError(
            INVALID_PARAMS if error.status == 400 else INVALID_REQUEST,
            error.message,
            _error_body(error.code, error.message, _json_safe(error.detail)),
        ) from None
    return [UserMessage(content=block) for block in blocks]


# --- Arguments, judged as a REST body is ------------------------------------------------------


class _ToolArguments(StrictSerializer):
    """A tool's arguments, judged from the input schema the tool advertises, as a REST body
    is judged (VALIDATION_FAILED, naming each argument): an argument the tool does not take,
    one of another JSON type, a missing one, or one out of the schema's bounds. The values
    themselves are then the tool's to judge, through its REST route's serializers."""

    sent_in = "tool"


class _ToolText(serializers.CharField):
    """A text argument judged only by type and length: which characters a path or a
    content may hold is the tool's REST serializer's or the document service's to say."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)
        self.validators = [
            each
            for each in self.validators
            if not isinstance(
                each, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator
            )
        ]


def _argument_field(schema: dict[str, Any], *, required: bool) -> serializers.Field:
    """The DRF field that judges one argument as its JSON schema advertises it."""
    branches = schema.get("anyOf", [schema])
    allows_null = {"type": "null"} in branches
    (kind,) = [branch for branch in branches if branch != {"type": "null"}]
    common: dict[str, Any] = {"required": required, "allow_null": allows_null}
    if kind["type"] == "integer":
        return serializers.IntegerField(
            min_value=kind.get("minimum"), max_value=kind.get("maximum"), **common
        )
    if kind.get("format") == "uuid":
        return serializers.UUIDField(**common)
    if kind["type"] == "string":
        return _ToolText(
            allow_blank=not kind.get("minLength"),
            min_length=kind.get("minLength"),
            max_length=kind.get("maxLength"),
            **common,
        )
    raise LookupError(f"no argument field for the JSON schema {kind}")


def _arguments_shape(tool: Tool) -> type[_ToolArguments]:
    schema = tool.parameters
    required = set(schema.get("required", []))
    fields = {
        name: _argument_field(property_schema, required=name in required)
        for name, property_schema in schema["properties"].items()
    }
    return type(f"{tool.name}Arguments", (_ToolArguments,), fields)


class _ArgumentsAsSent(FuncMetadata):
    """The SDK's argument handling, without its guess that a string sent for an argument
    that is not plain `str` is JSON: the text `["a"]` for an optional prefix became a list,
    refused in the SDK's words. The arguments were judged as sent (`_ToolArguments`)."""

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return data


class ArgumentsMiddleware:
    """Every tool's arguments judged before the SDK sees them, one way for all tools
    (`_ToolArguments`): the SDK would ignore an argument it does not know, take `"5"` for a
    number, and answer a wrong one in its own words rather than the API's error body. A
    prompt's arguments stand for its REST route's query parameters, and one it does not
    take is refused as that route refuses an unknown parameter."""

    def __init__(self, tools: list[Tool], prompts: list[Prompt]) -> None:
        self.shapes = {tool.name: _arguments_shape(tool) for tool in tools}
        self.prompt_parameters = {
            prompt.name: {argument.name for argument in prompt.arguments or []}
            for prompt in prompts
        }

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        params = ctx.params or {}
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if not isinstance(name, str):
            return await call_next(ctx)
        shape = self.shapes.get(name) if ctx.method == "tools/call" else None
        if shape is not None and not (checked := shape(data=arguments)).is_valid():
            detail = _json_safe({"fields": checked.errors})
            body = _error_body("VALIDATION_FAILED", "The arguments are not valid.", detail)
            return _result(body, is_error=True)
        taken = self.prompt_parameters.get(name) if ctx.method == "prompts/get" else None
        if taken is not None and not set(arguments) <= taken:
            error = unknown_parameters_refusal(set(arguments), taken)
            body = _error_body(error.code, error.message, error.detail)
            raise MCPError(INVALID_PARAMS, error.message, body)
        return await call_next(ctx)


BOT_TOOLS = frozenset(tool.value for tool in BotMemoryTool)
BOT_PROMPTS = frozenset({"memory_context"})


class CredentialToolsMiddleware:
    """What a credential sees: a person's MCP token the notes tools, a bot's token only the
    memory tools its spec gives it (a read-only spec lists no write tool) and the context
    prompt. A tool or prompt of the other kind is unknown to the caller."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        try:
            credential = _request_credential(ctx.request)
        except _AuthenticationRequired:
            return await call_next(ctx)
        bot = credential.bot
        name = (ctx.params or {}).get("name")
        is_call = ctx.method in ("tools/call", "prompts/get") and isinstance(name, str)
        if is_call and (bot is not None) != (name in BOT_TOOLS | BOT_PROMPTS):
            if ctx.method == "prompts/get":
                raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}")
            # As the SDK answers a tool it does not have.
            unknown = TextContent(type="text", text=f"Unknown tool: {name}")
            return CallToolResult(content=[unknown], is_error=True)
        # The chain answers the wire form: a mapping with the list under its key.
        result = await call_next(ctx)
        if ctx.method == "tools/list" and isinstance(result, dict):
            if bot is None:
                shown = {tool["name"] for tool in result["tools"]} - BOT_TOOLS
            else:
                shown = {tool.value for tool in bot_memory_tools(bot)}
            result["tools"] = [tool for tool in result["tools"] if tool["name"] in shown]
        if ctx.method == "prompts/list" and isinstance(result, dict):
            result["prompts"] = [
                prompt
                for prompt in result["prompts"]
                if (prompt["name"] in BOT_PROMPTS) == (bot is not None)
                and (bot is None or bot_memory_tools(bot))
            ]
        return result


INSTRUCTIONS = (
    "Workspace Memory. With a person's MCP token: read, search, create and update notes in "
    "your workspaces, and ask the workspace assistant, which uses the workspace's saved "
    "memory as its policy allows; list_workspaces gives the workspace ids every other tool "
    "takes, and paths under .zudotext/memory/ are refused. With a bot's token: the memory "
    "tools of the bot's memory space (memory_read, memory_list, and memory_write unless the "
    "bot's spec is read-only) and the memory_context prompt."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# A write that replaces what is there (the same call twice leaves the same state).
OVERWRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# A write that only adds (a second call is refused, never a change).
CREATES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


def build_mcp_server() -> MCPServer:
    """The MCP server: seven notes tools for people, three memory tools and a context
    prompt for bots; each credential is shown only its own (`CredentialToolsMiddleware`)."""
    server: MCPServer = MCPServer(
        name="workspace-memory",
        version=project_version(),
        instructions=INSTRUCTIONS,
        middleware=[CredentialToolsMiddleware()],
    )
    server.add_tool(memory_read, annotations=READ_ONLY)
    server.add_tool(memory_list, annotations=READ_ONLY)
    server.add_tool(memory_write, annotations=OVERWRITES)
    server.prompt(name="memory_context")(memory_context)
    server.add_tool(list_workspaces, annotations=READ_ONLY)
    server.add_tool(list_documents, annotations=READ_ONLY)
    server.add_tool(search_documents, annotations=READ_ONLY)
    server.add_tool(read_document, annotations=READ_ONLY)
    server.add_tool(create_note, annotations=CREATES)
    server.add_tool(update_note, annotations=OVERWRITES)
    server.add_tool(
        ask_zudo_agent,
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    tools = server._tool_manager.list_tools()
    for tool in tools:
        # Advertised as judged: an argument the schema does not name is refused.
        tool.parameters["additionalProperties"] = False
        tool.fn_metadata = _ArgumentsAsSent(**dict(tool.fn_metadata))
    # After CredentialToolsMiddleware: a tool the caller is not shown stays unknown to it.
    server.middleware.append(ArgumentsMiddleware(tools, server._prompt_manager.list_prompts()))
    return server


def mcp_asgi_app(*, host: str = "127.0.0.1") -> Starlette:
    """The ASGI app serving the MCP server at `/mcp`, behind bearer authentication.

    Stateless streamable HTTP with JSON responses: each POST stands alone, carries its own
    credential and answers in its body. `host` is where it is bound: on a loopback address
    the SDK also checks the Host and Origin headers (DNS rebinding protection), which
    `BearerCredentialMiddleware` checks first, by the SDK's settings, to answer as the API.
    """
    server = build_mcp_server()
    mcp_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        host=host,
        max_request_body_size=settings.REQUEST_MAX_BODY_BYTES,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with server.session_manager.run():
                yield
        finally:
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    return Starlette(
        routes=mcp_app.routes,
        middleware=[
            Middleware(
                BearerCredentialMiddleware, security=server.session_manager.security_settings
            )
        ],
        lifespan=lifespan,
    )
