"""A bot on the MCP server, over real streamable HTTP: its token selects the bot and the one
space its spec names, it is shown only the memory tools its spec gives it (a read-only spec
lists no write tool), the tools answer short plain text, and the `memory_context` prompt
gives the index and autoload blocks. A person's token is shown none of this, and a bot none
of a person's tools."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult
from rest_framework.test import APIClient

from automation.tests.test_mcp_server import (
    TOOLS,
    create_note_call,
    mcp_url,  # noqa: F401 (the module's server fixture)
    raw_post,
    refusal_code,
    run_client,
    token_for,
)
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, space_document_write
from workspaces.models import Bot, File
from workspaces.services import bot_token_issue

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = {"visibility": "bot", "project": "app", "autoload": ["notes/**"]}
MEMORY_TOOLS = ["memory_read", "memory_list", "memory_write"]


def bot_token(tenant: Any, slug: str, memory: dict[str, Any] | None = SPEC) -> tuple[Bot, str]:
    bot = tenant.bot_create(slug, memory=memory)
    _, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="runtime")
    return bot, raw


def space_of(tenant: Any, slug: str) -> SpaceHandle:
    return SpaceHandle(
        visibility=Visibility.BOT, name="default", tenant_id=tenant.team.pk, project="app", bot=slug
    )


def offered(url: str, token: str) -> tuple[list[str], list[str]]:
    async def script(session: ClientSession) -> tuple[list[str], list[str]]:
        tools = [tool.name for tool in (await session.list_tools()).tools]
        prompts = [prompt.name for prompt in (await session.list_prompts()).prompts]
        return tools, prompts

    listed: tuple[list[str], list[str]] = run_client(url, token, script)
    return listed


def call_tool(
    url: str, token: str, name: str, headers: dict[str, str] | None = None, **arguments: Any
) -> CallToolResult:
    async def script(session: ClientSession) -> CallToolResult:
        return await session.call_tool(name, arguments)

    result: CallToolResult = run_client(url, token, script, headers)
    return result


def text_of(result: CallToolResult) -> str:
    assert not result.is_error, result.content
    assert result.structured_content is None
    return "".join(getattr(block, "text", "") for block in result.content)


def context_messages(url: str, token: str, **arguments: str) -> list[str]:
    async def script(session: ClientSession) -> list[str]:
        prompt = await session.get_prompt("memory_context", arguments)
        return [message.content.text for message in prompt.messages]  # type: ignore[union-attr]

    messages: list[str] = run_client(url, token, script)
    return messages


def test_each_credential_is_offered_only_its_own_tools(mcp_url, tenant):  # noqa: F811
    _, writable = bot_token(tenant, "writer")
    _, read_only = bot_token(tenant, "reader", {**SPEC, "write": False})
    _, without_memory = bot_token(tenant, "plain", None)

    person = offered(mcp_url, token_for(tenant, tenant.member))

    assert sorted(person[0]) == sorted(TOOLS)
    assert person[1] == []
    assert offered(mcp_url, writable) == (MEMORY_TOOLS, ["memory_context"])
    # A read-only spec lists no write tool at all.
    assert offered(mcp_url, read_only) == (["memory_read", "memory_list"], ["memory_context"])
    assert offered(mcp_url, without_memory) == ([], [])


def test_a_bot_writes_lists_and_reads_its_own_space_in_plain_text(mcp_url, tenant):  # noqa: F811
    bot, token = bot_token(tenant, "alpha")

    empty = call_tool(mcp_url, token, "memory_list")
    written = call_tool(mcp_url, token, "memory_write", path="notes/a.md", content="# A\n")
    listed = call_tool(mcp_url, token, "memory_list", path="notes")
    read = call_tool(mcp_url, token, "memory_read", path="notes/a.md")

    assert text_of(empty) == "(empty)"
    assert text_of(written) == "written: notes/a.md (4 bytes, revision 1)"
    assert text_of(listed) == "notes/a.md"
    assert text_of(read) == "# A\n"
    stored = store_get().read(space_of(tenant, "alpha"), "notes/a.md")
    assert stored is not None
    assert stored.meta.updated_by == f"bot:{bot.slug}"


def test_refusals_are_tool_errors_with_the_api_codes(mcp_url, tenant):  # noqa: F811
    _, token = bot_token(tenant, "alpha")
    _, read_only = bot_token(tenant, "reader", {**SPEC, "write": False})
    call_tool(mcp_url, token, "memory_write", path="a.md", content="v1\n")
    space_document_write(
        handle=space_of(tenant, "alpha"),
        path="a.md",
        body=b"a person's v2\n",
        expected_revision=1,
        writer=SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk),
    )

    stale = call_tool(mcp_url, token, "memory_write", path="a.md", content="v3\n")
    traversal = call_tool(mcp_url, token, "memory_read", path="../a.md")
    denied = call_tool(mcp_url, read_only, "memory_write", path="a.md", content="x\n")

    assert refusal_code(stale) == "MEMORY_WRITE_STALE"
    assert "memory_read" in "".join(getattr(block, "text", "") for block in stale.content)
    assert refusal_code(traversal) == "INVALID_DOCUMENT_PATH"
    assert refusal_code(denied) == "BOT_MEMORY_TOOL_DENIED"


def test_tool_arguments_are_judged_as_the_rest_route_judges_them(mcp_url, tenant):  # noqa: F811
    bot, token = bot_token(tenant, "alpha")
    rest = APIClient()
    rest.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    arguments: dict[str, Any] = {"path": "a.md", "content": "before\x00after\n"}

    over_rest = rest.post("/api/v1/bots/me/memory/write", arguments, format="json")
    over_mcp = call_tool(mcp_url, token, "memory_write", **arguments)

    assert over_rest.status_code == 400
    assert refusal_code(over_mcp) == "VALIDATION_FAILED"
    assert over_mcp.structured_content is not None
    assert over_mcp.structured_content["error"]["detail"] == over_rest.json()["error"]["detail"]
    assert store_get().read(space_of(tenant, bot.slug), "a.md") is None


def test_a_bot_is_never_a_person_and_a_person_never_a_bot(mcp_url, tenant):  # noqa: F811
    _, token = bot_token(tenant, "alpha")

    as_person = raw_post(mcp_url, create_note_call(tenant.workspace.pk), f"Bearer {token}")
    as_bot = call_tool(mcp_url, token_for(tenant, tenant.member), "memory_list")

    assert as_person.status_code == 200
    result = as_person.json()["result"]
    assert result["isError"] is True
    assert "Unknown tool: create_note" in result["content"][0]["text"]
    assert not File.objects.exists()
    assert as_bot.is_error
    assert "Unknown tool: memory_list" in as_bot.content[0].text  # type: ignore[union-attr]
    # The SDK's client raises the server's error inside its task groups.
    with pytest.raises(ExceptionGroup) as unknown_prompt:
        context_messages(mcp_url, token_for(tenant, tenant.member))
    assert unknown_prompt.group_contains(MCPError, match="Unknown prompt", depth=None)


def test_the_context_prompt_judges_purpose_as_the_rest_route_does(mcp_url, tenant):  # noqa: F811
    bot, token = bot_token(tenant, "alpha")
    rest = APIClient()
    rest.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    # An unknown purpose, and an argument the prompt does not take (the SDK failed to
    # render the prompt, in its own words); the route also takes `?run=` (the prompt reads
    # a header) and `?format=`, so each names what it takes.
    rest_takes, mcp_takes = "`format`, `purpose`, `run`.", "`purpose`."
    for arguments in [{"purpose": "later"}, {"purpose": "start", "purpse": "start"}]:
        over_rest = rest.get(f"/api/v1/bots/{bot.slug}/memory/context", arguments)
        with pytest.raises(ExceptionGroup) as over_mcp:
            context_messages(mcp_url, token, **arguments)

        refused: BaseException | None = over_mcp.value.split(MCPError)[0]
        while isinstance(refused, ExceptionGroup):  # the SDK nests its task groups
            refused = refused.exceptions[0]
        assert isinstance(refused, MCPError), arguments
        assert over_rest.status_code == 400
        assert refused.data["error"]["code"] == "VALIDATION_FAILED", arguments
        over_mcp_text = json.dumps(refused.data["error"]["detail"])
        over_rest_text = json.dumps(over_rest.json()["error"]["detail"])
        assert over_mcp_text == over_rest_text.replace(rest_takes, mcp_takes), arguments


def test_the_context_prompt_gives_the_index_then_the_autoload_block(mcp_url, tenant):  # noqa: F811
    _, token = bot_token(tenant, "alpha")

    assert context_messages(mcp_url, token, purpose="pre_compact") == []
    call_tool(mcp_url, token, "memory_write", path="notes/a.md", content="Remember tea.\n")
    start = context_messages(mcp_url, token)
    (pre_compact,) = context_messages(mcp_url, token, purpose="pre_compact")

    assert [message.split(" ", 1)[0] for message in start] == [
        "<workspace_memory_index",
        "<workspace_memory",
    ]
    assert "Remember tea." in start[1]
    assert pre_compact.index("<workspace_memory_index") < pre_compact.index("<workspace_memory ")


def test_a_private_space_takes_its_run_from_the_header(mcp_url, tenant):  # noqa: F811
    _, token = bot_token(tenant, "runner", {"visibility": "private", "user": tenant.admin.pk})

    missing = call_tool(mcp_url, token, "memory_list")
    call_tool(mcp_url, token, "memory_write", {"X-Memory-Run": "r1"}, path="a.md", content="x\n")

    assert refusal_code(missing) == "SPACE_INVALID"
    assert text_of(call_tool(mcp_url, token, "memory_list", {"X-Memory-Run": "r1"})) == "a.md"
    assert text_of(call_tool(mcp_url, token, "memory_list", {"X-Memory-Run": "r2"})) == "(empty)"
