from __future__ import annotations

from datetime import timedelta
from typing import Any

import jwt
import pytest
from django.conf import settings
from django.core.cache import caches
from django.utils import timezone
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from conftest import assert_error
from workspaces.authentication import McpBearerAuthentication
from workspaces.models import ApiToken, WorkspaceMembership
from workspaces.services import api_token_create, api_token_revoke, workspace_membership_ensure
from workspaces.tokens import jwt_encode

WORKSPACES_URL = "/api/v1/workspaces"


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_personal_access_token_is_stored_only_as_a_hash(tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    token.refresh_from_db()
    assert raw.startswith("iap_")
    assert raw not in token.token_hash
    assert not ApiToken.objects.filter(token_hash=raw).exists()
    assert bearer(raw).get(WORKSPACES_URL).status_code == 200


def test_request_without_credential_is_401_authentication_required(tenant):
    response = APIClient().get(WORKSPACES_URL)

    assert_error(response, 401, "AUTHENTICATION_REQUIRED")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_unknown_personal_access_token_is_401(tenant):
    assert_error(bearer("iap_not-a-real-token").get(WORKSPACES_URL), 401, "TOKEN_INVALID")


def test_expired_personal_access_token_is_401(tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="old")
    ApiToken.objects.filter(pk=token.pk).update(
        created_at=timezone.now() - timedelta(days=2), expires_at=timezone.now() - timedelta(days=1)
    )

    assert_error(bearer(raw).get(WORKSPACES_URL), 401, "TOKEN_EXPIRED")


def test_revoked_token_fails_on_the_very_next_request(tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    client = bearer(raw)
    assert client.get(WORKSPACES_URL).status_code == 200

    response = client.delete(f"/api/v1/tokens/{token.pk}")

    assert response.status_code == 204
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert_error(client.get(WORKSPACES_URL), 401, "TOKEN_REVOKED")


def test_token_of_a_user_removed_from_the_team_is_refused(tenant):
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    tenant.member.team_memberships.all().delete()

    assert_error(bearer(raw).get(WORKSPACES_URL), 401, "TOKEN_INVALID")


def test_a_token_request_reads_its_credential_in_one_statement(tenant, django_assert_num_queries):
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    client = bearer(raw)
    client.get("/api/v1/ping")  # stamps the token's last use, which a minute then spares

    with django_assert_num_queries(1):
        response = client.get("/api/v1/ping")

    assert response.json() == {"ok": True, "teamId": tenant.team.pk}


def test_a_person_removed_from_a_workspace_is_refused_it_on_the_very_next_request(tenant):
    client = bearer(api_token_create(user=tenant.member, team=tenant.team, name="cli")[1])
    url = f"{WORKSPACES_URL}/{tenant.workspace.pk}/memory"
    assert client.get(url).status_code == 200

    WorkspaceMembership.objects.filter(workspace=tenant.workspace, user=tenant.member).delete()

    assert_error(client.get(url), 404, "NOT_FOUND")


def test_token_creation_needs_the_browser_session(tenant):
    client = APIClient()
    client.force_login(tenant.member)

    created = client.post("/api/v1/tokens", {"name": "laptop"}, format="json")
    by_token = bearer(created.json()["token"]).post(
        "/api/v1/tokens", {"name": "again"}, format="json"
    )

    assert created.status_code == 201
    assert ApiToken.objects.filter(user=tenant.member, name="laptop").count() == 1
    assert_error(by_token, 403, "CREDENTIAL_KIND_REFUSED")
    assert not ApiToken.objects.filter(name="again").exists()


def test_token_list_never_shows_the_token_or_its_hash(tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    response = bearer(raw).get("/api/v1/tokens")

    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [token.pk]
    assert raw not in response.content.decode()
    assert token.token_hash not in response.content.decode()


def test_cannot_revoke_another_users_token(tenant):
    theirs, _ = api_token_create(user=tenant.admin, team=tenant.team, name="admin")
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    response = bearer(raw).delete(f"/api/v1/tokens/{theirs.pk}")

    assert_error(response, 404, "NOT_FOUND")
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_jwt_from_a_personal_access_token_authenticates_until_it_expires(tenant, settings):
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    issued = bearer(raw).post("/api/v1/auth/jwt")

    assert issued.status_code == 201
    short_lived = bearer(issued.json()["token"])
    assert short_lived.get(WORKSPACES_URL).status_code == 200
    assert_error(short_lived.post("/api/v1/auth/jwt"), 403, "CREDENTIAL_KIND_REFUSED")


def test_expired_jwt_is_401(tenant):
    token, _ = jwt_encode(
        user_id=tenant.member.pk,
        team_id=tenant.team.pk,
        now=timezone.now() - timedelta(hours=2),
    )

    assert_error(bearer(token).get(WORKSPACES_URL), 401, "TOKEN_EXPIRED")


def test_jwt_with_alg_none_is_401(tenant):
    now = timezone.now()
    claims = {
        "sub": str(tenant.member.pk),
        "team": tenant.team.pk,
        "iat": int(now.timestamp()),
        "exp": int((now + timedelta(minutes=5)).timestamp()),
    }
    unsigned = jwt.encode(claims, key="", algorithm="none")

    assert_error(bearer(unsigned).get(WORKSPACES_URL), 401, "TOKEN_INVALID")


def test_jwt_signed_with_another_key_is_401(tenant):
    now = timezone.now()
    claims = {
        "sub": str(tenant.member.pk),
        "team": tenant.team.pk,
        "iat": int(now.timestamp()),
        "exp": int((now + timedelta(minutes=5)).timestamp()),
    }
    forged = jwt.encode(claims, key="another-key-entirely-" * 3, algorithm="HS256")

    assert_error(bearer(forged).get(WORKSPACES_URL), 401, "TOKEN_INVALID")


def test_jwt_naming_a_team_the_user_left_is_401(make_tenant):
    home, other = make_tenant(), make_tenant()
    token, _ = jwt_encode(user_id=home.member.pk, team_id=other.team.pk, now=timezone.now())

    assert_error(bearer(token).get(WORKSPACES_URL), 401, "TOKEN_INVALID")


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer  "])
def test_malformed_bearer_header_is_401(tenant, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    assert_error(client.get(WORKSPACES_URL), 401, "TOKEN_INVALID")


def test_personal_access_token_of_team_a_gets_404_on_team_b_workspace(make_tenant):
    team_a, team_b = make_tenant(), make_tenant()
    client = team_a.client_for(team_a.admin)

    read = client.get(f"/api/v1/workspaces/{team_b.workspace.pk}/ai")
    write = client.put(
        f"/api/v1/workspaces/{team_b.workspace.pk}/ai",
        {"enabled": False, "expectedRevision": 0},
        format="json",
    )

    assert_error(read, 404, "NOT_FOUND")
    assert_error(write, 404, "NOT_FOUND")
    team_b.workspace.refresh_from_db()
    assert team_b.workspace.ai_enabled is True
    assert team_b.workspace.ai_consent_revision == 0


def test_member_of_both_teams_sees_only_the_tokens_team(make_tenant):
    team_a, team_b = make_tenant(), make_tenant()
    workspace_membership_ensure(workspace=team_b.workspace, user=team_a.member)
    client = team_a.client_for(team_a.member)

    listed = client.get(WORKSPACES_URL).json()["results"]
    other = client.get(f"/api/v1/workspaces/{team_b.workspace.pk}/ai")

    assert [row["id"] for row in listed] == [team_a.workspace.pk]
    assert_error(other, 404, "NOT_FOUND")


def test_ping_answers_only_with_a_credential(tenant):
    assert_error(APIClient().get("/api/v1/ping"), 401, "AUTHENTICATION_REQUIRED")

    response = tenant.client_for(tenant.member).get("/api/v1/ping")

    assert response.json() == {"ok": True, "teamId": tenant.team.pk}


@pytest.mark.parametrize("method", ["get", "put"])
def test_revoking_a_token_ends_the_jwts_minted_from_it_at_once(tenant, method):
    token, raw = api_token_create(user=tenant.admin, team=tenant.team, name="cli")
    minted = bearer(bearer(raw).post("/api/v1/auth/jwt").json()["token"])
    url = f"/api/v1/workspaces/{tenant.workspace.pk}/ai"
    assert minted.get(url).status_code == 200

    bearer(raw).delete(f"/api/v1/tokens/{token.pk}")
    body = {"enabled": False, "expectedRevision": 0} if method == "put" else None
    response = getattr(minted, method)(url, body, format="json")

    assert_error(response, 401, "TOKEN_REVOKED")
    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (True, 0)


def test_a_jwt_ends_with_the_expiry_of_the_token_it_was_minted_from(tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    minted = bearer(bearer(raw).post("/api/v1/auth/jwt").json()["token"])

    ApiToken.objects.filter(pk=token.pk).update(
        created_at=timezone.now() - timedelta(days=2), expires_at=timezone.now() - timedelta(days=1)
    )

    assert_error(minted.get(WORKSPACES_URL), 401, "TOKEN_EXPIRED")


def test_a_jwt_minted_from_the_browser_session_is_not_tied_to_any_token(tenant):
    client = APIClient()
    client.force_login(tenant.member)
    minted = bearer(client.post("/api/v1/auth/jwt").json()["token"])
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    api_token_revoke(token=token, actor=tenant.member)

    assert minted.get(WORKSPACES_URL).status_code == 200


def test_a_token_is_created_with_the_scope_chosen_and_an_mcp_token_gets_no_person_api(tenant):
    client = APIClient()
    client.force_login(tenant.member)

    mcp = client.post("/api/v1/tokens", {"name": "claude", "scope": "mcp"}, format="json")
    default = client.post("/api/v1/tokens", {"name": "cli"}, format="json")
    unknown = client.post("/api/v1/tokens", {"name": "x", "scope": "root"}, format="json")

    assert (mcp.json()["scope"], default.json()["scope"]) == ("mcp", "api")
    assert ApiToken.objects.get(pk=mcp.json()["id"]).scope == "mcp"
    assert_error(unknown, 400, "VALIDATION_FAILED")
    assert not ApiToken.objects.filter(name="x").exists()
    memory = f"/api/v1/workspaces/{tenant.workspace.pk}/memory"
    refused = bearer(mcp.json()["token"]).get(memory)
    assert_error(refused, 403, "TOKEN_SCOPE_REFUSED")
    assert refused.json()["error"]["detail"] == {"scope": "mcp", "requiredScope": "api"}
    assert bearer(default.json()["token"]).get(memory).status_code == 200


def test_failed_bearer_tokens_are_limited_per_client_address(tenant, settings):
    settings.BEARER_FAILURE_LIMIT = 3
    _, valid = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    def from_address(address: str, raw: str):
        return bearer(raw).get(WORKSPACES_URL, REMOTE_ADDR=address)

    failures = [from_address("192.0.2.1", f"iap_guess-{n}") for n in range(3)]
    past_the_limit = from_address("192.0.2.1", "iap_guess-4")
    valid_from_there = from_address("192.0.2.1", valid)

    assert [r.json()["error"]["code"] for r in failures] == ["TOKEN_INVALID"] * 3
    assert_error(past_the_limit, 429, "RATE_LIMITED")
    # Past the limit the address learns nothing, not even that a token is valid.
    assert_error(valid_from_there, 429, "RATE_LIMITED")
    assert int(valid_from_there["Retry-After"]) >= 1
    # Another address is not affected.
    assert from_address("192.0.2.2", valid).status_code == 200
    assert_error(from_address("192.0.2.2", "iap_guess-5"), 401, "TOKEN_INVALID")


def test_past_the_failure_limit_a_valid_token_of_another_scope_gets_no_verdict(tenant, settings):
    settings.BEARER_FAILURE_LIMIT = 2
    _, mcp_token = api_token_create(user=tenant.member, team=tenant.team, name="mcp", scope="mcp")
    for n in range(2):
        bearer(f"iap_guess-{n}").get(WORKSPACES_URL)

    # Not TOKEN_SCOPE_REFUSED: that would say the token is valid.
    assert_error(bearer(mcp_token).get(WORKSPACES_URL), 429, "RATE_LIMITED")


def test_past_the_failure_limit_the_mcp_authenticator_refuses_a_valid_token(tenant, settings):
    # The MCP server authenticates without a view, so without the view's throttle.
    settings.BEARER_FAILURE_LIMIT = 2
    _, mcp_token = api_token_create(user=tenant.member, team=tenant.team, name="mcp", scope="mcp")
    for n in range(2):
        bearer(f"iap_guess-{n}").get(WORKSPACES_URL)

    def mcp_request(raw: str) -> Request:
        return Request(APIRequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {raw}"))

    with pytest.raises(Throttled):
        McpBearerAuthentication().authenticate(mcp_request(mcp_token))
    settings.BEARER_FAILURE_LIMIT = 3
    assert McpBearerAuthentication().authenticate(mcp_request(mcp_token)) is not None


def test_an_authenticated_request_judges_the_failures_and_its_rates_in_one_cache_call(
    tenant, monkeypatch
):
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    backend: Any = type(caches["default"])  # the project's Redis or in-process backend
    calls: list[tuple[Any, Any]] = []
    counted = backend.count_unless_gate_full

    def count_spy(self: Any, counters: Any, gate: Any) -> Any:
        calls.append((counters, gate))
        return counted(self, counters, gate)

    monkeypatch.setattr(backend, "count_unless_gate_full", count_spy)

    assert bearer(raw).get(WORKSPACES_URL).status_code == 200

    ((counters, gate),) = calls
    assert [key.partition(":")[0] for key, _ in counters] == [
        f"throttle_credential_user-{tenant.member.pk}"
    ]
    assert gate[0].startswith("bearer-failures:127.0.0.1:")


def test_a_forwarded_for_header_does_not_change_the_address_that_is_limited(tenant, settings):
    settings.BEARER_FAILURE_LIMIT = 2
    client = bearer("iap_guess")

    for n in range(2):
        client.get(WORKSPACES_URL, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    response = client.get(WORKSPACES_URL, HTTP_X_FORWARDED_FOR="198.51.100.9")

    assert_error(response, 429, "RATE_LIMITED")


def test_a_tokens_last_use_is_recorded_at_most_once_a_minute(tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    assert bearer(raw).get(WORKSPACES_URL).status_code == 200
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None

    bearer(raw).get(WORKSPACES_URL)
    token.refresh_from_db()
    assert token.last_used_at == first_use

    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first_use - timedelta(minutes=2))
    bearer(raw).get(WORKSPACES_URL)
    token.refresh_from_db()
    assert token.last_used_at > first_use


def test_a_refused_token_records_no_use(tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    api_token_revoke(token=token, actor=tenant.member)

    response = bearer(raw).get(WORKSPACES_URL)

    assert_error(response, 401, "TOKEN_REVOKED")
    token.refresh_from_db()
    assert token.last_used_at is None


def test_the_token_list_shows_when_each_token_was_created_and_last_used(tenant):
    client = APIClient()
    client.force_login(tenant.member)
    used, raw = api_token_create(user=tenant.member, team=tenant.team, name="used")
    api_token_create(user=tenant.member, team=tenant.team, name="unused")
    bearer(raw).get(WORKSPACES_URL)

    listed = {row["name"]: row for row in client.get("/api/v1/tokens").json()["results"]}

    used.refresh_from_db()
    assert used.last_used_at is not None
    assert listed["unused"]["lastUsedAt"] is None
    assert listed["used"]["lastUsedAt"] is not None
    assert listed["used"]["createdAt"] is not None
    assert listed["used"]["lastUsedAt"].startswith(used.last_used_at.strftime("%Y-%m-%dT%H:%M"))


def test_a_bot_scope_cannot_be_asked_of_the_person_token_route(tenant):
    client = APIClient()
    client.force_login(tenant.member)

    response = client.post("/api/v1/tokens", {"name": "x", "scope": "bot"}, format="json")

    assert_error(response, 400, "VALIDATION_FAILED")
    assert not ApiToken.objects.filter(name="x").exists()


def session_jwt(client: APIClient) -> APIClient:
    """A client bearing a JWT minted from `client`'s signed-in browser session."""
    return bearer(client.post("/api/v1/auth/jwt").json()["token"])


def test_signing_out_ends_the_jwts_minted_from_that_session_at_once(tenant):
    browser, other_browser = APIClient(), APIClient()
    browser.force_login(tenant.member)
    other_browser.force_login(tenant.member)
    minted, other_minted = session_jwt(browser), session_jwt(other_browser)
    assert minted.get(WORKSPACES_URL).status_code == 200

    browser.post("/accounts/logout/")

    assert_error(minted.get(WORKSPACES_URL), 401, "TOKEN_REVOKED")
    assert other_minted.get(WORKSPACES_URL).status_code == 200


def test_a_password_change_ends_the_jwts_minted_from_browser_sessions(tenant):
    browser = APIClient()
    browser.force_login(tenant.member)
    minted = session_jwt(browser)
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    tenant.member.set_password("a new password for this test")
    tenant.member.save(update_fields=["password"])

    assert_error(minted.get(WORKSPACES_URL), 401, "TOKEN_REVOKED")
    # A personal access token is not a sign-in: it and its JWTs outlive a password change.
    assert bearer(raw).get(WORKSPACES_URL).status_code == 200


def test_a_deactivated_persons_tokens_and_jwts_are_refused_at_once(tenant):
    browser = APIClient()
    browser.force_login(tenant.member)
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    credentials = {
        "token": bearer(raw),
        "jwt from the token": bearer(bearer(raw).post("/api/v1/auth/jwt").json()["token"]),
        "jwt from the session": session_jwt(browser),
    }

    tenant.member.is_active = False
    tenant.member.save(update_fields=["is_active"])

    for name, client in credentials.items():
        assert client.get(WORKSPACES_URL).status_code == 401, name
        assert_error(client.get(WORKSPACES_URL), 401, "TOKEN_INVALID")
    assert browser.get(WORKSPACES_URL).status_code in (401, 403)


def test_a_session_claim_moved_into_another_persons_jwt_is_401(tenant):
    browser = APIClient()
    browser.force_login(tenant.member)
    minted = browser.post("/api/v1/auth/jwt").json()["token"]
    claims = jwt.decode(minted, options={"verify_signature": False})
    forged, _ = jwt_encode(user_id=tenant.admin.pk, team_id=tenant.team.pk, now=timezone.now())
    forged_claims = {
        **jwt.decode(forged, options={"verify_signature": False}),
        "ses": claims["ses"],
    }

    response = bearer(jwt.encode(forged_claims, settings.JWT_SIGNING_KEY, algorithm="HS256")).get(
        WORKSPACES_URL
    )

    assert_error(response, 401, "TOKEN_INVALID")
