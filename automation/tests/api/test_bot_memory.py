"""The routes for bots: the memory tools for runtimes without MCP
(`POST /api/v1/bots/me/memory/read|list|write`) and the context blocks
(`GET /api/v1/bots/{id}/memory/context`), reached only with a bot token, each answering the
status and code docs/errors.md gives, with the persisted state checked."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from automation.tests.conftest import bot_space
from conftest import assert_error
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, space_document_write
from workspaces.models import Bot, TeamMembership
from workspaces.services import api_token_create, bot_token_issue

SPEC = {"visibility": "bot", "project": "app", "autoload": ["notes/**"]}
TOOLS = "/api/v1/bots/me/memory/"


def client_of(tenant: Any, bot: Bot) -> APIClient:
    """A runtime holding a fresh token of `bot`: one session of it."""
    _, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="runtime")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def bot(tenant) -> Bot:
    return tenant.bot_create("alpha", memory=SPEC)


def test_write_list_and_read_as_the_bot(tenant, bot):
    client = client_of(tenant, bot)

    empty = client.post(TOOLS + "list", {}, format="json")
    written = client.post(
        TOOLS + "write", {"path": "notes/a.md", "content": "# A\nhello\n"}, format="json"
    )
    listed = client.post(TOOLS + "list", {"path": "notes"}, format="json")
    read = client.post(TOOLS + "read", {"path": "notes/a.md"}, format="json")

    assert empty.json() == {"text": "(empty)"}
    assert written.json() == {"text": "written: notes/a.md (10 bytes, revision 1)"}
    assert listed.json() == {"text": "notes/a.md"}
    assert read.json() == {"text": "# A\nhello\n"}
    stored = store_get().read(bot_space(bot), "notes/a.md")
    assert stored is not None
    assert stored.meta.updated_by == "bot:alpha"


def test_bot_b_cannot_read_bot_a_space_nor_its_context(tenant, bot):
    client_of(tenant, bot).post(TOOLS + "write", {"path": "a.md", "content": "x\n"}, format="json")
    beta = client_of(tenant, tenant.bot_create("beta", memory=SPEC))

    read = beta.post(TOOLS + "read", {"path": "a.md"}, format="json")
    context = beta.get("/api/v1/bots/alpha/memory/context")

    assert_error(read, 404, "NOT_FOUND")
    assert_error(context, 404, "NOT_FOUND")
    assert beta.post(TOOLS + "list", {}, format="json").json() == {"text": "(empty)"}


def test_a_traversal_path_is_refused(tenant, bot):
    client = client_of(tenant, bot)

    response = client.post(TOOLS + "write", {"path": "../b.md", "content": "x\n"}, format="json")

    assert_error(response, 400, "INVALID_DOCUMENT_PATH")
    assert store_get().list(bot_space(bot)) == []


def test_a_stale_write_is_409_with_the_read_again_message(tenant, bot):
    client = client_of(tenant, bot)
    client.post(TOOLS + "write", {"path": "a.md", "content": "v1\n"}, format="json")
    space_document_write(
        handle=bot_space(bot),
        path="a.md",
        body=b"a person's v2\n",
        expected_revision=1,
        writer=SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk),
    )

    response = client.post(TOOLS + "write", {"path": "a.md", "content": "v3\n"}, format="json")

    error = assert_error(response, 409, "MEMORY_WRITE_STALE")
    assert "memory_read" in error["message"]
    assert error["detail"] == {"path": "a.md", "currentRevision": 2}
    stored = store_get().read(bot_space(bot), "a.md")
    assert stored is not None
    assert stored.body == b"a person's v2\n"


def test_a_run_that_did_not_read_another_runs_change_is_409(tenant, bot):
    client = client_of(tenant, bot)
    one, two = ({"path": "a.md", "run": run} for run in ("r1", "r2"))
    client.post(TOOLS + "write", {**one, "content": "v1\n"}, format="json")
    assert client.post(TOOLS + "read", two, format="json").json() == {"text": "v1\n"}
    client.post(TOOLS + "write", {**two, "content": "r2's v2\n"}, format="json")

    response = client.post(TOOLS + "write", {**one, "content": "r1's v2\n"}, format="json")

    assert_error(response, 409, "MEMORY_WRITE_STALE")
    stored = store_get().read(bot_space(bot), "a.md")
    assert stored is not None
    assert stored.body == b"r2's v2\n"


def test_a_read_only_bot_is_refused_a_write(tenant):
    reader = tenant.bot_create("reader", memory={**SPEC, "write": False})

    response = client_of(tenant, reader).post(
        TOOLS + "write", {"path": "a.md", "content": "x\n"}, format="json"
    )

    error = assert_error(response, 403, "BOT_MEMORY_TOOL_DENIED")
    assert error["detail"] == {"tool": "memory_write"}
    assert store_get().list(bot_space(reader)) == []


def test_a_bot_without_memory_is_403(tenant):
    response = client_of(tenant, tenant.bot_create("plain")).post(TOOLS + "list", {}, format="json")

    assert_error(response, 403, "BOT_MEMORY_DISABLED")


def test_only_a_bot_token_reaches_the_routes(tenant, bot):
    _, person = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {person}")

    response = client.post(TOOLS + "list", {}, format="json")

    assert_error(response, 403, "TOKEN_SCOPE_REFUSED")
    assert_error(client.get("/api/v1/bots/alpha/memory/context"), 403, "TOKEN_SCOPE_REFUSED")


def test_the_context_gives_both_blocks_and_a_second_session_sees_the_first_note(tenant, bot):
    first_session = client_of(tenant, bot)
    first_session.post(
        TOOLS + "write",
        {"path": "notes/learned.md", "content": "Staging is slow.\n"},
        format="json",
    )

    context = client_of(tenant, bot).get("/api/v1/bots/alpha/memory/context")

    assert context.status_code == 200
    body = context.json()
    assert body["scopeRoot"] == bot_space(bot).id
    assert body["index"].startswith("<workspace_memory_index ")
    assert 'path="notes/learned.md"' in body["index"]
    assert body["autoload"].startswith("<workspace_memory ")
    assert "Staging is slow." in body["autoload"]
    assert body["omitted"] == []


def test_pre_compact_is_one_user_message_or_none(tenant, bot):
    client = client_of(tenant, bot)
    url = "/api/v1/bots/alpha/memory/context?purpose=pre_compact"

    empty = client.get(url)
    client.post(TOOLS + "write", {"path": "notes/a.md", "content": "x\n"}, format="json")
    full = client.get(url)

    assert empty.json() == {"messages": []}
    (message,) = full.json()["messages"]
    assert message["role"] == "user"
    content = message["content"]
    assert content.index("<workspace_memory_index ") < content.index("<workspace_memory ")


@pytest.mark.parametrize("purpose", ["later", "", "START", "pre-compact"])
def test_a_purpose_the_context_does_not_take_is_validation_failed(tenant, bot, purpose):
    client = client_of(tenant, bot)

    response = client.get("/api/v1/bots/alpha/memory/context", {"purpose": purpose})

    assert list(assert_error(response, 400, "VALIDATION_FAILED")["detail"]["fields"]) == ["purpose"]


def test_purpose_start_is_the_default_context(tenant, bot):
    client = client_of(tenant, bot)
    client.post(TOOLS + "write", {"path": "notes/a.md", "content": "x\n"}, format="json")

    named = client.get("/api/v1/bots/alpha/memory/context", {"purpose": "start"})

    assert named.status_code == 200
    assert named.json() == client.get("/api/v1/bots/alpha/memory/context").json()


def test_the_context_lists_autoload_omissions(tenant, bot, settings):
    settings.MEMORY_AUTOLOAD_MAX_BYTES = 10
    client = client_of(tenant, bot)
    client.post(TOOLS + "write", {"path": "notes/big.md", "content": "x" * 11}, format="json")

    body = client.get("/api/v1/bots/alpha/memory/context").json()

    assert body["omitted"] == [{"path": "notes/big.md", "bytes": 11, "reason": "over_bound"}]
    assert "x" * 11 not in body["autoload"]


def test_a_private_spec_takes_the_run(tenant):
    runner = tenant.bot_create("runner", memory={"visibility": "private", "user": tenant.admin.pk})
    client = client_of(tenant, runner)

    missing = client.post(TOOLS + "list", {}, format="json")
    written = client.post(
        TOOLS + "write", {"path": "a.md", "content": "x\n", "run": "r1"}, format="json"
    )
    other_run = client.post(TOOLS + "list", {"run": "r2"}, format="json")
    context = client.get("/api/v1/bots/runner/memory/context?run=r1")

    error = assert_error(missing, 400, "SPACE_INVALID")
    assert error["detail"]["field"] == "run"
    assert written.status_code == 200
    assert other_run.json() == {"text": "(empty)"}
    assert 'path="a.md"' in context.json()["index"]


@pytest.mark.parametrize("visibility", ["user", "private"])
def test_a_bot_reaches_a_persons_own_space_only_with_that_persons_token(tenant, visibility):
    runner = tenant.bot_create("runner", memory={"visibility": visibility, "user": tenant.admin.pk})
    TeamMembership.objects.filter(team=tenant.team, user=tenant.member).update(
        role=TeamMembership.Role.OWNER
    )
    _, raw = bot_token_issue(bot=runner, actor=tenant.member, name="co-owner's")
    co_owners = APIClient()
    co_owners.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    body = {"path": "a.md", "content": "the owner's note\n", "run": "r1"}
    assert client_of(tenant, runner).post(TOOLS + "write", body, format="json").status_code == 200

    answers = [
        co_owners.post(TOOLS + "read", {"path": "a.md", "run": "r1"}, format="json"),
        co_owners.post(TOOLS + "list", {"run": "r1"}, format="json"),
        co_owners.get("/api/v1/bots/runner/memory/context?run=r1"),
    ]

    for answer in answers:
        assert_error(answer, 403, "BOT_MEMORY_USER_UNAVAILABLE")
        assert "owner's note" not in answer.content.decode()


def test_a_bot_token_ends_when_its_issuer_is_no_longer_a_team_owner(tenant, bot):
    client = client_of(tenant, bot)
    assert client.post(TOOLS + "list", {}, format="json").status_code == 200

    TeamMembership.objects.filter(team=tenant.team, user=tenant.admin).update(
        role=TeamMembership.Role.MEMBER
    )

    assert_error(client.post(TOOLS + "list", {}, format="json"), 401, "TOKEN_INVALID")
