"""Every /api/ route, taken from the URL configuration, refuses a credential it does not take
with 403 (CREDENTIAL_KIND_REFUSED, or TOKEN_SCOPE_REFUSED for an MCP-only token), never
with 401 as if none had been presented, and changes nothing. A bot's token is refused on
every route for people."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient
from rest_framework.views import APIView

from automation.authentication import DeliveryCredentialAuthentication
from automation.models import Admission, Conversation
from automation.tests.api.test_automation_documents import delivery_client
from memory.selectors import memory_current_get, memory_policy_get
from workspaces.authentication import BearerAuthentication, BotBearerAuthentication
from workspaces.models import ApiToken, AuditEvent, FileVersion, KeySession
from workspaces.services import api_token_create, bot_token_issue

METHODS = ("get", "put", "post", "delete")


def api_routes() -> Iterator[tuple[str, type[APIView]]]:
    """(route, view class) for every /api/v1/ route."""

    def walk(patterns: list, prefix: str) -> Iterator[tuple[str, object]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                yield route, pattern.callback

    for route, callback in walk(get_resolver().url_patterns, "/"):
        view = getattr(callback, "view_class", None)
        if route.startswith("/api/v1/") and view is not None:
            yield route, view


def fill(route: str, workspace_id: int) -> str:
    route = re.sub(r"<(?:int|id):[a-z_]+>", str(workspace_id), route)
    route = re.sub(r"<slug:[a-z_]+>", "helper", route)
    return re.sub(r"<uuid:[a-z_]+>", str(uuid.uuid4()), route)


def calls(workspace_id: int) -> list[tuple[str, str, type[APIView]]]:
    return [
        (method, fill(route, workspace_id), view)
        for route, view in api_routes()
        for method in METHODS
        if hasattr(view, method)
    ]


def takes(view: type[APIView], authenticator: type) -> bool:
    return any(isinstance(each, authenticator) for each in view().get_authenticators())


def snapshot(tenant) -> tuple:
    return (
        FileVersion.objects.count(),
        memory_policy_get(workspace=tenant.workspace).policy_revision,
        Conversation.objects.count(),
        Admission.objects.count(),
        KeySession.objects.count(),
        ApiToken.objects.filter(revoked_at__isnull=False).count(),
        AuditEvent.objects.exclude(action="token_created").count(),
    )


def request(client: APIClient, method: str, url: str):
    return getattr(client, method)(url, {}, format="json", HTTP_X_BASE_VERSION="1")


def test_the_route_table_is_what_these_tests_walk():
    routes = dict(api_routes())

    assert len(routes) > 20
    assert any(takes(v, DeliveryCredentialAuthentication) for v in routes.values())
    assert any(not takes(v, BearerAuthentication) for v in routes.values())


def test_an_mcp_token_or_a_bot_token_is_refused_on_every_person_route(assistant):
    tenant = assistant.tenant
    _, mcp_token = api_token_create(user=tenant.member, team=tenant.team, name="mcp", scope="mcp")
    _, bot_token = bot_token_issue(bot=tenant.bot_create("helper"), actor=tenant.admin, name="b")
    before = snapshot(tenant)

    for raw in (mcp_token, bot_token):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        for method, url, view in calls(tenant.workspace.pk):
            if takes(view, BotBearerAuthentication):
                continue  # a route for bots: none takes a person yet
            response = request(client, method, url)

            error = response.json()["error"]
            assert response.status_code == 403, (method, url, response.content)
            if raw == mcp_token and takes(view, BearerAuthentication):
                assert error["code"] == "TOKEN_SCOPE_REFUSED", (method, url)
                assert error["detail"] == {"scope": "mcp", "requiredScope": "api"}
            else:  # a bot is never a person; a route for turns takes no personal token
                assert error["code"] == "CREDENTIAL_KIND_REFUSED", (method, url)

    assert snapshot(tenant) == before
    assert memory_current_get(workspace=tenant.workspace).version == 1


def test_a_delivery_credential_on_a_route_for_people_is_403_not_401(
    assistant, django_capture_on_commit_callbacks, turns_held
):
    with django_capture_on_commit_callbacks(execute=True):
        admission = assistant.send()
    client = delivery_client(admission)
    tenant = assistant.tenant
    before = snapshot(tenant)
    refused = 0

    for method, url, view in calls(tenant.workspace.pk):
        if takes(view, DeliveryCredentialAuthentication):
            continue
        response = request(client, method, url)

        assert response.status_code == 403, (method, url, response.content)
        assert response.json()["error"]["code"] == "CREDENTIAL_KIND_REFUSED", (method, url)
        refused += 1

    assert refused > 20
    assert snapshot(tenant) == before


@pytest.mark.parametrize("kind", ["token", "session", "basic"])
def test_a_person_credential_on_the_route_for_turns_only_is_403_not_401(assistant, kind):
    tenant = assistant.tenant
    client = tenant.client_for(tenant.member) if kind == "token" else APIClient()
    if kind == "session":
        client.force_login(tenant.member)
    if kind == "basic":
        client.credentials(HTTP_AUTHORIZATION="Basic dXNlcjpwdw==")
    url = f"/api/v1/automation/workspaces/{tenant.workspace.pk}/memory"
    before = snapshot(tenant)

    read = client.get(f"{url}?purpose=recall")
    write = client.put(url, {"expectedVersion": 1, "changes": []}, format="json")

    for response in (read, write):
        assert response.status_code == 403, response.content
        assert response.json()["error"]["code"] == "CREDENTIAL_KIND_REFUSED"
    assert snapshot(tenant) == before


def test_no_credential_at_all_is_still_401_authentication_required(assistant):
    url = f"/api/v1/automation/workspaces/{assistant.tenant.workspace.pk}/memory?purpose=recall"

    response = APIClient().get(url)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "AUTHENTICATION_REQUIRED"
