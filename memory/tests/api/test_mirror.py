"""The auto-memory mirror's routes (`/api/v1/mirror/...`), for a bot token only, and the
reserved `auto-memory` space name on the people's space routes; then the mirror's command
line over those routes against a live server."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import DEFAULT_DB_ALIAS, connections
from rest_framework.test import APIClient

from conftest import Tenant, assert_error
from memory.mirror import LocalMirrorSpace
from memory.spaces.quotas import store_get
from memory.tests.secret_corpus import CREDENTIALS
from memory.tests.spaces.conftest import store_write
from workspaces.models import ApiToken, Bot
from workspaces.services import api_token_create, bot_token_issue

SPACE = "/api/v1/mirror/space?project=repo"
DOCS = "/api/v1/mirror/docs?project=repo"


def doc_url(path: str) -> str:
    return f"/api/v1/mirror/doc?project=repo&path={path}"


def bot_client(bot: Bot, actor) -> APIClient:
    _, raw = bot_token_issue(bot=bot, actor=actor, name="mirror")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def put(client: APIClient, path: str, body: bytes, base: int | None) -> Any:
    headers: dict[str, Any] = {} if base is None else {"HTTP_X_BASE_VERSION": str(base)}
    return client.put(doc_url(path), body, content_type="text/markdown", **headers)


@pytest.fixture
def scribe(tenant: Tenant, every_store: str) -> Bot:
    return tenant.bot_create("scribe", auto_memory="on")


def test_a_bot_reads_its_space_and_the_levels_of_its_switch(tenant, scribe):
    tenant.team.auto_memory_default = "off"
    tenant.team.save(update_fields=["auto_memory_default"])
    client = bot_client(scribe, tenant.admin)

    answer = client.get(SPACE)

    assert answer.status_code == 200
    data = answer.json()
    assert data["bot"] == "scribe"
    assert data["autoMemory"] == {"bot": "on", "team": "off"}
    assert data["space"]["id"] == LocalMirrorSpace(bot=scribe, project="repo").space_id
    assert (data["space"]["visibility"], data["space"]["name"]) == ("bot", "auto-memory")


def test_a_bot_writes_lists_and_deletes_in_its_auto_memory_space(tenant, scribe):
    client = bot_client(scribe, tenant.admin)

    created = put(client, "notes.md", b"# Notes\n", 0)
    listed = client.get(DOCS)
    stale = put(client, "notes.md", b"# Other\n", 0)
    deleted = client.delete(doc_url("notes.md"), HTTP_X_BASE_VERSION="1")

    assert created.status_code == 200
    assert created.json()["updatedBy"] == "mirror:scribe"
    assert listed.json() == {
        "documents": [{"path": "notes.md", "revision": 1, "content": "# Notes\n"}],
        "unreadable": [],
    }
    assert_error(stale, 409, "VERSION_CONFLICT")
    assert deleted.status_code == 204
    assert LocalMirrorSpace(bot=scribe, project="repo").documents() == []


def test_the_mirror_routes_refuse_what_the_space_routes_refuse(tenant, scribe):
    client = bot_client(scribe, tenant.admin)

    no_base = put(client, "a.md", b"a\n", None)
    secret = put(client, "keys.md", f"{CREDENTIALS[0].line}\n".encode(), 0)
    no_project = client.get("/api/v1/mirror/docs")
    bad_path = put(client, "a.txt", b"a\n", 0)

    assert_error(no_base, 428, "BASE_VERSION_REQUIRED")
    assert_error(secret, 422, "SECRET_DETECTED")
    assert_error(no_project, 400, "SPACE_INVALID")
    assert_error(bad_path, 400, "INVALID_DOCUMENT_PATH")
    assert LocalMirrorSpace(bot=scribe, project="repo").documents() == []


def test_a_persons_token_cannot_use_the_mirror_routes(tenant, scribe):
    _, raw = api_token_create(user=tenant.admin, team=tenant.team, name="person")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    refused = put(client, "a.md", b"a\n", 0)

    assert_error(refused, 403, "TOKEN_SCOPE_REFUSED")
    assert LocalMirrorSpace(bot=scribe, project="repo").documents() == []


def test_people_may_read_but_never_write_an_auto_memory_space(tenant, scribe):
    LocalMirrorSpace(bot=scribe, project="repo").write("a.md", b"a\n", expected_revision=0)
    client = tenant.client_for(tenant.admin)
    query = "visibility=bot&name=auto-memory&project=repo&bot=scribe"

    read = client.get(f"/api/v1/memory/doc?{query}&path=a.md")
    written = client.put(
        f"/api/v1/memory/doc?{query}&path=b.md",
        b"b\n",
        content_type="text/markdown",
        HTTP_X_BASE_VERSION="0",
    )
    deleted = client.delete(f"/api/v1/memory/doc?{query}&path=a.md", HTTP_X_BASE_VERSION="1")
    org_space = client.put(
        "/api/v1/memory/doc?visibility=org&name=auto-memory&path=c.md",
        b"c\n",
        content_type="text/markdown",
        HTTP_X_BASE_VERSION="0",
    )

    assert read.status_code == 200
    assert read.content == b"a\n"
    for refused in (written, deleted, org_space):
        assert_error(refused, 403, "AUTO_MEMORY_SPACE_RESERVED")
    assert [each.path for each in LocalMirrorSpace(bot=scribe, project="repo").documents()] == [
        "a.md"
    ]


# The command line over the routes


@pytest.fixture
def remote(live_server, settings, make_tenant, monkeypatch, tmp_path) -> tuple[Bot, list[str]]:
    # As in test_cli: no persistent connection held by a live-server thread.
    monkeypatch.setitem(connections.settings[DEFAULT_DB_ALIAS], "CONN_MAX_AGE", 0)
    settings.ALLOWED_HOSTS = ["*"]
    settings.MEMORY_STORE = "database"
    tenant = make_tenant()
    bot = tenant.bot_create("scribe", auto_memory="on")
    _, raw = bot_token_issue(bot=bot, actor=tenant.admin, name="mirror")
    flags = ["--remote", live_server.url, "--token", raw, "--project", "repo"]
    return bot, [*flags, "--state-dir", str(tmp_path / "state"), "--json"]


def mirror_json(*args: str) -> dict:
    out = io.StringIO()
    call_command("memory", "mirror", *args, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


@pytest.mark.django_db(transaction=True)
def test_the_round_trip_remotely(remote):
    bot, flags = remote
    space = LocalMirrorSpace(bot=bot, project="repo")
    space.write("old.md", b"old\n", expected_revision=0)
    space.write("edit.md", b"before\n", expected_revision=0)

    hydrated = mirror_json("hydrate", *flags, "--node", "node-abcd")
    directory = Path(hydrated["directory"])
    (directory / "edit.md").write_text("after\n")
    (directory / "new.md").write_text("new\n")
    (directory / "old.md").unlink()
    synced = mirror_json("sync-back", *flags, "--node", "node-abcd")
    released = mirror_json("release", *flags, "--node", "node-abcd")

    assert hydrated["switch"] == {"enabled": True, "level": "bot"}
    assert hydrated["written"] == ["edit.md", "old.md"]
    assert (synced["written"], synced["deleted"]) == (["edit.md", "new.md"], ["old.md"])
    assert released == {"node": "node-abcd", "released": True}
    assert not directory.exists()
    assert {each.path: each.body for each in space.documents()} == {
        "edit.md": b"after\n",
        "new.md": b"new\n",
    }


@pytest.mark.django_db(transaction=True)
def test_a_stored_body_that_is_not_utf8_is_a_hydrate_error_remotely(remote):
    bot, flags = remote
    space = LocalMirrorSpace(bot=bot, project="repo")
    store_write(store_get(), space.handle, "bad.md", b"caf\xe9\n", by="mirror:scribe")
    space.write("fine.md", b"fine\n", expected_revision=0)

    hydrated = mirror_json("hydrate", *flags, "--node", "node-abcd")

    assert hydrated["written"] == ["fine.md"]
    assert [(each["path"], each["code"]) for each in hydrated["errors"]] == [
        ("bad.md", "DOCUMENT_UNREADABLE")
    ]
    assert not (Path(hydrated["directory"]) / "bad.md").exists()


@pytest.mark.django_db(transaction=True)
def test_a_bad_token_remotely_is_refused_with_exit_1(remote):
    _, flags = remote
    flags = [flags[0], flags[1], "--token", "iap_wrong", *flags[4:]]

    with pytest.raises(CommandError) as refused:
        mirror_json("hydrate", *flags)

    assert refused.value.returncode == 1
    assert "TOKEN_INVALID" in str(refused.value)


@pytest.mark.django_db(transaction=True)
def test_a_persons_token_remotely_is_told_to_send_the_bots(remote):
    bot, flags = remote
    owner = ApiToken.objects.get(bot=bot).user  # who issued the bot's token
    _, person_token = api_token_create(user=owner, team=bot.team, name="cli")
    flags = [flags[0], flags[1], "--token", person_token, *flags[4:]]

    with pytest.raises(CommandError) as refused:
        mirror_json("hydrate", *flags)

    assert refused.value.returncode == 1
    message = str(refused.value)
    assert message.startswith("TOKEN_SCOPE_REFUSED: ")
    assert "bot's token" in message
    assert "person acting" not in message


def test_a_stored_body_that_is_not_utf8_is_listed_as_unreadable(tenant, scribe):
    space = LocalMirrorSpace(bot=scribe, project="repo")
    store_write(store_get(), space.handle, "bad.md", b"caf\xe9\n", by="mirror:scribe")
    client = bot_client(scribe, tenant.admin)
    assert put(client, "good.md", b"# Good\n", 0).status_code == 200

    listed = client.get(DOCS)

    assert listed.status_code == 200
    assert listed.json() == {
        "documents": [{"path": "good.md", "revision": 1, "content": "# Good\n"}],
        "unreadable": ["bad.md"],
    }
