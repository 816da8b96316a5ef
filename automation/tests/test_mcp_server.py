"""The MCP server, over real streamable HTTP: bearer auth, per-object tenancy, notes as the
caller, no way into memory, and ask_zudo_agent as an ordinary turn with the caller's
authority over memory for that turn.

The server runs under uvicorn in a background thread (its ORM work in asgiref's thread), so
the tests commit their data: `transaction=True`.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from django.core.cache import cache
from django.utils import timezone
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from automation.mcp_server import BOT_TOOLS, build_mcp_server, mcp_asgi_app
from automation.models import Admission, CommitFence, Conversation, Turn
from automation.services import conversation_create
from memory.models import MEMORY_PATH
from memory.selectors import memory_current_get
from memory.services import memory_policy_set, memory_save
from workspaces.models import File, FileVersion, KeySession, KeySessionRevocation
from workspaces.services import (
    api_token_create,
    api_token_revoke,
    bot_token_issue,
    org_deletion_request,
    workspace_create,
)
from workspaces.tokens import jwt_encode

pytestmark = pytest.mark.django_db(transaction=True)

# One TLS context for every client: httpx2 builds a new one per client otherwise (~40 ms).
TLS = ssl.create_default_context()
# A new connection per request: on a reused loopback connection each request here waits
# ~40 ms (delayed ACK), which would make this file several times slower.
NO_KEEPALIVE = httpx2.Limits(max_keepalive_connections=0)
TOOLS = {
    "list_workspaces",
    "list_documents",
    "search_documents",
    "read_document",
    "create_note",
    "update_note",
    "ask_zudo_agent",
}
MEMORY_SPELLINGS = [
    MEMORY_PATH,
    ".ZUDOTEXT/Memory/memory.md",
    "./.zudotext//memory/notes.md",
    "notes/../.zudotext/memory/memory.md",
    "%2Ezudotext%2Fmemory%2Fmemory.md",
    "\uff0ezudotext/memory/memory.md",  # full-width dot
    ".zudotext\\memory\\memory.md",
    ".zudotext/memory\u034f/memory.md",  # an invisible character
    ".zud\u043etext/memory/memory.md",  # Cyrillic o
    ".zudotext\u2215memory\u2215memory.md",  # division slash
]


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    """The MCP app under uvicorn on a free port, for the whole module."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            mcp_asgi_app(host="127.0.0.1"), lifespan="on", log_level="warning", access_log=False
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "the MCP server stopped while starting"
        assert time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}/mcp"
    # Shutting down runs the app's lifespan exit, which closes its thread's DB connections.
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()
    assert not thread.is_alive()


def token_for(tenant: Any, user: Any) -> str:
    """An MCP-scoped personal access token: the only credential the server takes."""
    _, raw = api_token_create(user=user, team=tenant.team, name="mcp", scope="mcp")
    return raw


def run_client(
    url: str,
    token: str,
    script: Callable[[ClientSession], Awaitable[Any]],
    headers: dict[str, str] | None = None,
) -> Any:
    """Open an MCP session as `token`'s holder (with `headers` on every request) and run
    `script` in it."""

    async def main() -> Any:
        headers_sent = {"Authorization": f"Bearer {token}", **(headers or {})}
        async with (
            httpx2.AsyncClient(
                headers=headers_sent, timeout=20.0, verify=TLS, limits=NO_KEEPALIVE
            ) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await script(session)

    return anyio.run(main)


def call(url: str, token: str, name: str, **arguments: Any) -> CallToolResult:
    async def script(session: ClientSession) -> CallToolResult:
        result = await session.call_tool(name, arguments)
        assert isinstance(result, CallToolResult)
        return result

    result: CallToolResult = run_client(url, token, script)
    return result


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def refusal_code(result: CallToolResult) -> str:
    assert result.is_error
    assert result.structured_content is not None
    text = "".join(getattr(block, "text", "") for block in result.content)
    assert "Traceback" not in text
    code: str = result.structured_content["error"]["code"]
    assert code in text
    return code


def raw_post(url: str, body: dict[str, Any], authorization: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    return httpx2.post(url, json=body, headers=headers, timeout=10, verify=TLS)


def create_note_call(workspace_id: int) -> dict[str, Any]:
    """A complete tools/call request (a stateless server needs no handshake first)."""
    arguments = {"workspace_id": workspace_id, "path": "notes/a.md", "content": "x"}
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "create_note", "arguments": arguments},
    }


def test_requests_without_a_credential_the_server_takes_are_refused(mcp_url, tenant):
    revoked, revoked_raw = api_token_create(
        user=tenant.member, team=tenant.team, name="old", scope="mcp"
    )
    api_token_revoke(token=revoked, actor=tenant.member)
    _, person_api_raw = api_token_create(user=tenant.member, team=tenant.team, name="api")
    jwt_raw, _ = jwt_encode(user_id=tenant.member.pk, team_id=tenant.team.pk, now=timezone.now())
    body = create_note_call(tenant.workspace.pk)

    for authorization, status, code in [
        (None, 401, "AUTHENTICATION_REQUIRED"),
        ("Bearer", 401, "TOKEN_INVALID"),
        ("Bearer iap_not-a-token", 401, "TOKEN_INVALID"),
        ("Bearer not.a.jwt", 401, "TOKEN_INVALID"),
        (f"Bearer {revoked_raw}", 401, "TOKEN_REVOKED"),
        ("Basic dXNlcjpwdw==", 403, "CREDENTIAL_KIND_REFUSED"),
        ("Delivery dlv_anything", 403, "CREDENTIAL_KIND_REFUSED"),
        # Only an MCP-scoped token: a token of the person API, or a JWT, is refused.
        (f"Bearer {person_api_raw}", 403, "TOKEN_SCOPE_REFUSED"),
        (f"Bearer {jwt_raw}", 403, "TOKEN_SCOPE_REFUSED"),
    ]:
        response = raw_post(mcp_url, body, authorization)
        assert response.status_code == status, authorization
        assert response.json()["error"]["code"] == code, authorization
        if status == 401:
            assert response.headers["WWW-Authenticate"].startswith("Bearer")

    # The SDK's client fails the handshake (the error arrives inside its task groups).
    with pytest.raises(ExceptionGroup) as refused:
        call(mcp_url, "iap_not-a-token", "list_documents", workspace_id=tenant.workspace.pk)
    assert refused.group_contains(MCPError, depth=None)
    assert not File.objects.exists()
    # The same request with a valid token is served: only the credential was missing.
    accepted = raw_post(mcp_url, body, f"Bearer {token_for(tenant, tenant.member)}")
    assert accepted.status_code == 200
    assert accepted.json()["result"]["structuredContent"] == {"path": "notes/a.md", "version": 1}


def test_a_token_of_an_org_pending_deletion_is_403_in_the_api_shape(mcp_url, tenant):
    token = token_for(tenant, tenant.member)
    org_deletion_request(org=tenant.org, actor=tenant.admin)

    response = raw_post(mcp_url, create_note_call(tenant.workspace.pk), f"Bearer {token}")

    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "ORG_PENDING_DELETION"
    assert error["detail"]["deletionDueAt"]
    assert not File.objects.exists()


def test_tools_validate_their_arguments_exactly_as_the_api_routes_do(mcp_url, tenant):
    token = token_for(tenant, tenant.member)
    workspace_id = tenant.workspace.pk
    rest = tenant.client_for(tenant.member)
    documents = f"/api/v1/automation/workspaces/{workspace_id}/documents"
    cases = [
        (
            "create_note",
            {"path": "notes/a.md", "content": "before\x00after"},
            lambda: rest.put(
                f"{documents}?path=notes/a.md",
                {"content": "before\x00after"},
                format="json",
                HTTP_X_BASE_VERSION="0",
            ),
        ),
        ("search_documents", {"query": ""}, lambda: rest.get(f"{documents}/search?q=")),
        (
            "search_documents",
            # Over the search's 200 characters, within the 4 KiB a URL may carry.
            {"query": "x" * 3000},
            lambda: rest.get(f"{documents}/search?q={'x' * 3000}"),
        ),
        (
            "list_documents",
            {"prefix": "p" * 2000},
            lambda: rest.get(f"{documents}?prefix={'p' * 2000}"),
        ),
    ]

    for name, arguments, over_rest in cases:
        result = call(mcp_url, token, name, workspace_id=workspace_id, **arguments)
        answer = over_rest()

        # A route's body fields and query parameters are refused alike, and so the tool's
        # arguments that stand for either.
        assert refusal_code(result) == "VALIDATION_FAILED", name
        assert answer.json()["error"]["code"] == "VALIDATION_FAILED", name
        fields = result.structured_content["error"]["detail"]["fields"]
        assert fields == answer.json()["error"]["detail"]["fields"], name
    assert not File.objects.exists()


def test_a_person_is_offered_exactly_the_notes_tools_and_no_memory_tool(mcp_url, tenant):
    async def script(session: ClientSession) -> list[str]:
        return [tool.name for tool in (await session.list_tools()).tools]

    names = run_client(mcp_url, token_for(tenant, tenant.member), script)

    assert sorted(names) == sorted(TOOLS)


def test_create_note_then_read_round_trips_as_the_callers_own_human_revision(mcp_url, tenant):
    token = token_for(tenant, tenant.member)
    workspace_id = tenant.workspace.pk

    created = ok(
        call(
            mcp_url,
            token,
            "create_note",
            workspace_id=workspace_id,
            path="projects/plan.md",
            content="# Plan\nShip the MCP server.\n",
        )
    )
    read = ok(
        call(mcp_url, token, "read_document", workspace_id=workspace_id, path=created["path"])
    )

    assert created == {"path": "projects/plan.md", "version": 1}
    assert read["content"] == "# Plan\nShip the MCP server.\n"
    assert (read["path"], read["version"]) == ("projects/plan.md", 1)
    revision = FileVersion.objects.get(file__workspace=tenant.workspace, file__path=read["path"])
    assert (revision.author_kind, revision.author_id) == ("human", tenant.member.pk)
    listed = ok(call(mcp_url, token, "list_documents", workspace_id=workspace_id))
    assert listed == {"documents": [{"path": "projects/plan.md", "version": 1}]}
    found = ok(call(mcp_url, token, "search_documents", workspace_id=workspace_id, query="ship"))
    assert [hit["path"] for hit in found["results"]] == ["projects/plan.md"]
    # Create-only: an existing path is a conflict, and nothing is overwritten.
    again = call(
        mcp_url,
        token,
        "create_note",
        workspace_id=workspace_id,
        path="projects/plan.md",
        content="",
    )
    assert refusal_code(again) == "VERSION_CONFLICT"
    assert FileVersion.objects.filter(file__path="projects/plan.md").count() == 1


def test_no_tool_reaches_the_memory_namespace(mcp_url, tenant):
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- secret tea\n"
    )
    token = token_for(tenant, tenant.member)
    workspace_id = tenant.workspace.pk

    async def script(session: ClientSession) -> list[CallToolResult]:
        results = []
        for path in MEMORY_SPELLINGS:
            for name, extra in [("read_document", {}), ("create_note", {"content": "- x\n"})]:
                arguments = {"workspace_id": workspace_id, "path": path, **extra}
                result = await session.call_tool(name, arguments)
                assert isinstance(result, CallToolResult)
                results.append(result)
        return results

    for result in run_client(mcp_url, token, script):
        assert refusal_code(result) == "MEMORY_NAMESPACE_RESERVED"
    for prefix in [None, ".zudotext/", ".zudotext/memory/"]:
        listed = ok(
            call(mcp_url, token, "list_documents", workspace_id=workspace_id, prefix=prefix)
        )
        assert listed == {"documents": []}
    found = ok(call(mcp_url, token, "search_documents", workspace_id=workspace_id, query="secret"))
    assert found == {"results": [], "truncated": False, "next_cursor": None}
    assert FileVersion.objects.filter(file__path=MEMORY_PATH).count() == 1
    assert File.objects.count() == 1


def test_a_workspace_of_another_team_or_without_membership_is_not_found(mcp_url, make_tenant):
    mine, theirs = make_tenant(), make_tenant()
    unjoined = workspace_create(team=mine.team, name="admins only", admin=mine.admin)
    theirs_note = {"workspace": theirs.workspace, "author": theirs.member, "base_version": 0}
    memory_save(**theirs_note, content="- theirs\n")
    token = token_for(mine, mine.member)
    arguments = {
        "list_documents": {},
        "search_documents": {"query": "theirs"},
        "read_document": {"path": "notes/a.md"},
        "create_note": {"path": "notes/a.md", "content": "mine"},
        "ask_zudo_agent": {"text": "hello"},
    }

    for workspace in [theirs.workspace, unjoined]:
        for name, extra in arguments.items():
            result = call(mcp_url, token, name, workspace_id=workspace.pk, **extra)
            assert refusal_code(result) == "NOT_FOUND", (workspace, name)

    assert not File.objects.filter(path="notes/a.md").exists()
    assert not Conversation.objects.exists()


def saved_memory_in_mode(tenant: Any, mode: str) -> str:
    """Save "- green tea" as the workspace's memory in `mode`; return a token of the member."""
    memory_policy_set(
        workspace=tenant.workspace, mode=mode, expected_revision=0, actor=tenant.member
    )
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- green tea\n"
    )
    return token_for(tenant, tenant.member)


def turn_session_ended(admission: Admission) -> bool:
    """The key session opened for an MCP turn was revoked and its key left the cache."""
    session = KeySession.objects.get(admissions=admission)
    return (
        session.revoked_at is not None
        and KeySessionRevocation.objects.filter(key_session=session).exists()
        and cache.get(session.cache_key) is None
    )


def test_ask_zudo_agent_recalls_and_captures_with_the_token_owners_authority(mcp_url, tenant):
    token = saved_memory_in_mode(tenant, "auto")

    first = ok(
        call(mcp_url, token, "ask_zudo_agent", workspace_id=tenant.workspace.pk, text="Hi there")
    )

    assert first["state"] == "completed"
    assert (first["memory_recall"], first["memory_explanation"]) == ("provided", None)
    admission = Admission.objects.select_related("conversation").get(pk=first["admission_id"])
    # Given the server's current revision, as the seed says of a turn without memory state.
    assert (admission.recall_status, admission.recall_version) == ("provided", 1)
    assert admission.acknowledged_version is None
    assert admission.save_in_flight is None
    assert admission.has_unresolved_conflict is None
    assert admission.mode == "auto"
    assert admission.owner_id == admission.conversation.owner_id == tenant.member.pk
    session = KeySession.objects.get(admissions=admission)
    assert (session.user_id, session.workspace_id) == (tenant.member.pk, tenant.workspace.pk)
    assert turn_session_ended(admission)
    assert admission.idempotency_key.startswith("mcp:")
    assert str(Turn.objects.get(admission=admission).pk) == first["turn_id"]

    # The same conversation continues, and an Auto capture commits through the fence.
    second = ok(
        call(
            mcp_url,
            token,
            "ask_zudo_agent",
            workspace_id=tenant.workspace.pk,
            text="remember likes coffee",
            conversation_id=first["conversation_id"],
        )
    )
    assert second["state"] == "completed"
    assert second["conversation_id"] == first["conversation_id"]
    assert Conversation.objects.count() == 1
    captured = Admission.objects.get(pk=second["admission_id"])
    assert captured.status == "committed"
    assert captured.key_session_id != admission.key_session_id
    assert turn_session_ended(captured)
    fence = CommitFence.objects.select_related("revision").get(admission=captured)
    assert (fence.ok, fence.revision.version, fence.revision.author_kind) == (1, 2, "automatic")
    assert memory_current_get(workspace=tenant.workspace).content == (
        "- green tea\n- likes coffee\n"
    )


def test_an_mcp_turn_withheld_by_a_rule_reads_as_that_rule(mcp_url, tenant):
    token = saved_memory_in_mode(tenant, "off")

    answered = ok(
        call(mcp_url, token, "ask_zudo_agent", workspace_id=tenant.workspace.pk, text="Hi")
    )

    admission = Admission.objects.get(pk=answered["admission_id"])
    assert (admission.mode, admission.recall_status) == ("off", "off")
    assert answered["memory_recall"] == "off"
    assert answered["memory_explanation"].startswith(
        "Memory was off, so the model was given no memory."
    )
    assert "not provided because" not in answered["answer"]
    assert "green tea" not in answered["answer"]
    assert turn_session_ended(admission)


def test_ask_zudo_agent_refuses_others_conversations_and_leaves_nothing_when_refused(
    mcp_url, make_tenant
):
    tenant = make_tenant()
    admin_token, member_token = token_for(tenant, tenant.admin), token_for(tenant, tenant.member)
    mine = ok(
        call(mcp_url, member_token, "ask_zudo_agent", workspace_id=tenant.workspace.pk, text="a")
    )

    others = call(
        mcp_url,
        admin_token,
        "ask_zudo_agent",
        workspace_id=tenant.workspace.pk,
        text="b",
        conversation_id=mine["conversation_id"],
    )
    assert refusal_code(others) == "NOT_FOUND"

    ai_off = make_tenant(ai_enabled=False)
    refused = call(
        mcp_url,
        token_for(ai_off, ai_off.member),
        "ask_zudo_agent",
        workspace_id=ai_off.workspace.pk,
        text="c",
    )
    assert refusal_code(refused) == "WORKSPACE_AI_DISABLED"
    assert Conversation.objects.count() == 1
    assert Admission.objects.count() == 1
    assert not KeySession.objects.filter(workspace=ai_off.workspace).exists()


def test_the_server_reports_the_projects_version(mcp_url, tenant):
    async def script(session: ClientSession) -> str:
        return session.server_info.version if session.server_info else ""

    version = run_client(mcp_url, token_for(tenant, tenant.member), script)

    assert version == "0.1.0"


def test_list_workspaces_names_the_callers_own_in_the_tokens_team(mcp_url, make_tenant):
    mine, theirs = make_tenant(), make_tenant()
    workspace_create(team=mine.team, name="admins only", admin=mine.admin)

    listed = ok(call(mcp_url, token_for(mine, mine.member), "list_workspaces"))

    assert listed == {
        "workspaces": [{"id": mine.workspace.pk, "name": mine.workspace.name, "ai_enabled": True}]
    }
    assert theirs.workspace.pk not in {each["id"] for each in listed["workspaces"]}


def test_update_note_writes_on_its_base_version_and_a_stale_one_is_a_conflict(mcp_url, tenant):
    token = token_for(tenant, tenant.member)
    workspace_id = tenant.workspace.pk
    note = {"workspace_id": workspace_id, "path": "projects/plan.md"}
    ok(call(mcp_url, token, "create_note", **note, content="one\n"))

    updated = ok(call(mcp_url, token, "update_note", **note, content="two\n", base_version=1))
    stale = call(mcp_url, token, "update_note", **note, content="mine\n", base_version=1)

    assert updated == {"path": "projects/plan.md", "version": 2}
    assert refusal_code(stale) == "VERSION_CONFLICT"
    assert stale.structured_content["error"]["detail"]["currentVersion"] == 2
    read = ok(call(mcp_url, token, "read_document", **note))
    assert (read["version"], read["content"]) == (2, "two\n")
    revision = FileVersion.objects.get(file__path="projects/plan.md", version=2)
    assert (revision.author_kind, revision.author_id) == ("human", tenant.member.pk)


def wrong_type_of(schema: dict[str, Any]) -> tuple[Any, str]:
    """A value of another JSON type than the argument's, and the API's word for it."""
    if schema.get("type") == "integer":
        return "5", "Must be a whole number, not a string."  # the SDK would parse it to 5
    return 5, "Must be a string, not a number."


def test_every_tool_refuses_unknown_and_mistyped_arguments_as_the_api_refuses_a_body(
    mcp_url, tenant
):
    """A walk over every registered tool, each called with the credential it is shown to."""
    bot = tenant.bot_create("walker", memory={"visibility": "bot", "project": "app"})
    _, bot_token = bot_token_issue(bot=bot, actor=tenant.admin, name="runtime")
    person_token = token_for(tenant, tenant.member)
    listed: dict[str, dict[str, Any]] = {}
    for token in (person_token, bot_token):
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        answer = raw_post(mcp_url, request, f"Bearer {token}")
        listed |= {tool["name"]: tool["inputSchema"] for tool in answer.json()["result"]["tools"]}
    server_tools = build_mcp_server()._tool_manager.list_tools()
    assert set(listed) == {tool.name for tool in server_tools}

    def refused_fields(token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        result = raw_post(mcp_url, body, f"Bearer {token}").json()["result"]
        assert result["isError"], (name, arguments)
        error = result["structuredContent"]["error"]
        assert error["code"] == "VALIDATION_FAILED", (name, arguments)
        assert error["code"] in result["content"][0]["text"]
        fields: dict[str, Any] = error["detail"]["fields"]
        return fields

    for name, schema in listed.items():
        token = bot_token if name in BOT_TOOLS else person_token
        # Advertised as judged: only the arguments the schema names.
        assert schema["additionalProperties"] is False, name
        properties = schema["properties"]
        valid = {
            argument: 0 if each.get("type") == "integer" else "notes/a.md"
            for argument, each in properties.items()
            if argument in schema.get("required", [])
        }
        takes = ", ".join(f"`{argument}`" for argument in sorted(properties)) or "no fields"
        assert refused_fields(token, name, {**valid, "workspaceId": 1}) == {
            "workspaceId": [f"Unknown field; this tool takes {takes}."]
        }, name
        for argument, each in properties.items():
            value, problem = wrong_type_of(each.get("anyOf", [each])[0])
            assert refused_fields(token, name, {**valid, argument: value}) == {
                argument: [problem]
            }, (name, argument)
        for argument in schema.get("required", []):
            missing = {key: value for key, value in valid.items() if key != argument}
            assert refused_fields(token, name, missing) == {
                argument: ["This field is required."]
            }, (name, argument)
    assert not File.objects.exists()
    assert not Conversation.objects.exists()


def test_ask_zudo_agent_judges_its_text_as_the_messages_route_does(mcp_url, tenant):
    token = token_for(tenant, tenant.member)
    rest = tenant.client_for(tenant.member)
    conversation = conversation_create(workspace=tenant.workspace, owner=tenant.member)

    for number, text in enumerate(["", 7, None, "x" * 20_001]):
        result = call(mcp_url, token, "ask_zudo_agent", workspace_id=tenant.workspace.pk, text=text)
        answer = rest.post(
            f"/api/v1/agents/assistant/{conversation.pk}/messages",
            {"text": text},
            format="json",
            HTTP_IDEMPOTENCY_KEY=f"turn-{number}",
        )

        assert refusal_code(result) == "VALIDATION_FAILED", number
        assert answer.json()["error"]["code"] == "VALIDATION_FAILED", number
        fields = result.structured_content["error"]["detail"]["fields"]
        assert fields == answer.json()["error"]["detail"]["fields"], number
    assert not Turn.objects.exists()


def test_a_text_argument_that_reads_as_json_is_taken_as_the_text_sent(mcp_url, tenant):
    """The SDK parses a string as JSON for an argument that is not plain `str` (an optional
    one): a prefix or a cursor `["a"]` became a list, refused in the SDK's words."""
    token = token_for(tenant, tenant.member)
    workspace_id = tenant.workspace.pk
    for path in ['["a"].md', "[1].md"]:
        call(mcp_url, token, "create_note", workspace_id=workspace_id, path=path, content="x")

    listed = call(mcp_url, token, "list_documents", workspace_id=workspace_id, prefix='["a"]')
    searched = call(
        mcp_url, token, "search_documents", workspace_id=workspace_id, query="x", cursor='["a"]'
    )

    assert ok(listed)["documents"] == [{"path": '["a"].md', "version": 1}]
    # Judged as the text sent: a cursor no search gave out, in the API's words.
    assert refusal_code(searched) == "VALIDATION_FAILED"
    assert searched.structured_content is not None
    assert searched.structured_content["error"]["detail"] == {
        "fields": {"cursor": ["Not a cursor this search gave out."]}
    }


def test_a_body_over_the_limit_is_refused_in_the_api_shape(mcp_url, tenant, settings):
    """The SDK's own bound answered a plain-text 413."""
    settings.REQUEST_MAX_BODY_BYTES = 1000
    call_body = create_note_call(tenant.workspace.pk)
    call_body["params"]["arguments"]["content"] = "x" * 2000

    response = raw_post(mcp_url, call_body, f"Bearer {token_for(tenant, tenant.member)}")

    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "REQUEST_TOO_LARGE"
    assert error["detail"]["limitBytes"] == 1000
    assert not File.objects.exists()


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Host": "evil.example"}, 400, "HOST_NOT_ALLOWED"),
        ({"Origin": "http://evil.example"}, 403, "CROSS_ORIGIN_REJECTED"),
        ({"Content-Type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
        # JSON is UTF-8 (RFC 8259, 8.1): a body declared in another charset is not read.
        ({"Content-Type": "application/json; charset=latin-1"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
        ({"Content-Type": "application/json; charset=utf-16"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
        ({"Content-Type": "application/jsonl"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
    ],
    ids=["host", "origin", "content-type", "latin-1", "utf-16", "another-type"],
)
def test_the_transport_refusals_answer_in_the_api_shape_before_the_credential(
    mcp_url, tenant, headers, status, code
):
    """The SDK answered these in plain text ("Invalid Host header", 421), after the credential
    was looked up."""
    body = json.dumps(create_note_call(tenant.workspace.pk))

    response = httpx2.post(
        mcp_url,
        content=body,
        headers={"Accept": "application/json", "Content-Type": "application/json", **headers},
        timeout=10,
    )

    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert not File.objects.exists()


def test_a_chunked_body_over_the_limit_is_refused_in_the_api_shape(mcp_url, tenant, settings):
    """Without a Content-Length the SDK's own bound met it, in plain text."""
    settings.REQUEST_MAX_BODY_BYTES = 1000
    call_body = create_note_call(tenant.workspace.pk)
    call_body["params"]["arguments"]["content"] = "x" * 2000
    encoded = json.dumps(call_body).encode()

    response = httpx2.post(
        mcp_url,
        content=iter([encoded[:600], encoded[600:]]),
        headers={
            "Accept": "application/json",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token_for(tenant, tenant.member)}",
        },
        timeout=10,
    )

    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "REQUEST_TOO_LARGE"
    assert error["detail"]["limitBytes"] == 1000
    assert not File.objects.exists()


def test_a_chunked_body_within_the_limit_is_served(mcp_url, tenant):
    encoded = json.dumps(create_note_call(tenant.workspace.pk)).encode()

    response = httpx2.post(
        mcp_url,
        content=iter([encoded[:20], encoded[20:]]),
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token_for(tenant, tenant.member)}",
        },
        timeout=10,
    )

    assert response.status_code == 200, response.text
    assert File.objects.get().path == "notes/a.md"
