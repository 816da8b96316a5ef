from __future__ import annotations

import json
import stat
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from workspaces.management.commands.seed_demo import credentials_path
from workspaces.models import (
    ApiToken,
    Org,
    Team,
    User,
    Workspace,
    WorkspaceKey,
    WorkspaceMembership,
)
from workspaces.services import api_token_revoke, workspace_key_ensure
from workspaces.tokens import bearer_secret_digest


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path):
    """seed_demo keeps its credentials in DATA_DIR: each test gets its own."""
    settings.DATA_DIR = tmp_path


def seed(*args: str) -> dict:
    out = StringIO()
    call_command("seed_demo", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def counts() -> tuple[int, int, int, int]:
    return (
        Org.objects.count(),
        Team.objects.count(),
        Workspace.objects.count(),
        User.objects.count(),
    )


def test_seed_demo_twice_creates_nothing_new_and_both_credentials_work(db):
    first = seed()
    after_first = counts()

    second = seed()

    assert counts() == after_first == (1, 1, 1, 1)
    assert {k: second[k] for k in ("org_id", "team_id", "workspace_id", "username")} == {
        k: first[k] for k in ("org_id", "team_id", "workspace_id", "username")
    }
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {second['token']}")
    listed = client.get("/api/v1/workspaces").json()["results"]
    assert [row["id"] for row in listed] == [second["workspace_id"]]
    assert listed[0]["aiEnabled"] is True
    signed_in = client.post(
        "/accounts/login/", {"username": second["username"], "password": second["password"]}
    )
    assert signed_in.status_code == 302
    assert client.get("/admin/automation/admission/").status_code == 200
    assert WorkspaceMembership.objects.get(workspace_id=second["workspace_id"]).is_admin


def test_seed_demo_with_a_name_makes_an_independent_tenant(db):
    demo = seed()

    other = seed("--name", "acme")

    assert counts() == (2, 2, 2, 2)
    assert other["team_id"] != demo["team_id"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {other['token']}")
    assert client.get(f"/api/v1/workspaces/{demo['workspace_id']}/ai").status_code == 404


def test_seed_demo_prints_readable_credentials(db):
    out = StringIO()

    call_command("seed_demo", stdout=out)

    text = out.getvalue()
    user = User.objects.get(username="demo")
    password = text.split("password:")[1].split()[0]
    assert user.check_password(password)
    api_token = text.split("token (PAT):")[1].split()[0]
    mcp_token = text.split("MCP token:")[1].split()[0]
    scopes = {
        token: ApiToken.objects.get(token_hash=bearer_secret_digest(token)).scope
        for token in (api_token, mcp_token)
    }
    assert scopes == {api_token: "api", mcp_token: "mcp"}


def pings(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.get("/api/v1/ping").status_code


def test_two_starts_keep_the_password_the_tokens_and_the_signed_in_browsers(db):
    first = seed()
    browser = Client()
    signed_in = browser.post(
        "/accounts/login/", {"username": first["username"], "password": first["password"]}
    )
    assert signed_in.status_code == 302
    tokens_after_first = ApiToken.objects.count()

    second = seed()

    assert second == first
    assert ApiToken.objects.count() == tokens_after_first == 2
    assert User.objects.get(username="demo").check_password(first["password"])
    assert pings(first["token"]) == 200
    # The browser signed in after the first start is still signed in after the second.
    assert browser.get("/workspaces/").status_code == 200
    path = credentials_path("demo")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == first


def test_a_later_start_prints_the_kept_credentials_again(db):
    first = seed()
    out = StringIO()

    call_command("seed_demo", stdout=out)

    text = out.getvalue()
    assert "kept from an earlier start" in text
    assert f"password:     {first['password']}" in text
    assert f"token (PAT):  {first['token']}" in text
    assert f"MCP token:    {first['mcp_token']}" in text


def test_a_revoked_token_is_replaced_and_the_rest_kept(db):
    first = seed()
    revoked = ApiToken.objects.get(token_hash=bearer_secret_digest(first["token"]))
    api_token_revoke(token=revoked, actor=revoked.user)

    second = seed()

    assert second["token"] != first["token"]
    assert pings(second["token"]) == 200
    assert pings(first["token"]) == 401
    assert (second["password"], second["mcp_token"]) == (first["password"], first["mcp_token"])
    assert ApiToken.objects.count() == 3
    assert json.loads(credentials_path("demo").read_text()) == second


def test_a_password_changed_since_is_replaced_and_the_tokens_kept(db):
    first = seed()
    user = User.objects.get(username="demo")
    user.set_password("changed-by-someone-else")
    user.save(update_fields=["password"])

    second = seed()

    assert second["password"] != first["password"]
    assert User.objects.get(username="demo").check_password(second["password"])
    assert (second["token"], second["mcp_token"]) == (first["token"], first["mcp_token"])


def test_unreadable_stored_credentials_are_replaced(db):
    seed()
    credentials_path("demo").write_text("{not json")

    second = seed()

    assert User.objects.get(username="demo").check_password(second["password"])
    assert pings(second["token"]) == 200


def test_each_database_and_tenant_name_has_its_own_credentials_file(db, monkeypatch):
    here = credentials_path("demo")
    assert credentials_path("acme") != here

    monkeypatch.setitem(connection.settings_dict, "NAME", "another-database")

    assert credentials_path("demo") != here
    assert credentials_path("demo").parent == here.parent


def test_rewrap_command_rewraps_under_the_new_key(tenant, settings):
    key = workspace_key_ensure(workspace=tenant.workspace)
    settings.DEPLOYMENT_PREVIOUS_KEYS = [settings.DEPLOYMENT_KEY]
    settings.DEPLOYMENT_KEY = "a rotated deployment key used by this test " * 2
    out = StringIO()

    call_command("rewrap_data_keys", "--batch-size", "1", stdout=out)

    settings.DEPLOYMENT_PREVIOUS_KEYS = []
    assert out.getvalue().strip() == "Re-wrapped 1 data key(s)."
    assert bytes(WorkspaceKey.objects.get(workspace=tenant.workspace).wrapped_key) == key
