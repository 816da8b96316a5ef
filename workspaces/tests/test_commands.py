from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command
from rest_framework.test import APIClient

from workspaces.models import (
    ApiToken,
    Org,
    Team,
    User,
    Workspace,
    WorkspaceKey,
    WorkspaceMembership,
)
from workspaces.services import workspace_key_ensure
from workspaces.tokens import bearer_secret_digest


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
    listed = client.get("/api/v1/workspaces").json()
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


def test_rewrap_command_rewraps_under_the_new_key(tenant, settings):
    key = workspace_key_ensure(workspace=tenant.workspace)
    settings.DEPLOYMENT_PREVIOUS_KEYS = [settings.DEPLOYMENT_KEY]
    settings.DEPLOYMENT_KEY = "a rotated deployment key used by this test " * 2
    out = StringIO()

    call_command("rewrap_data_keys", "--batch-size", "1", stdout=out)

    settings.DEPLOYMENT_PREVIOUS_KEYS = []
    assert out.getvalue().strip() == "Re-wrapped 1 data key(s)."
    assert bytes(WorkspaceKey.objects.get(workspace=tenant.workspace).wrapped_key) == key
