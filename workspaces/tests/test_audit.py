"""Who did it is never lost: every audited service names its actor, token creation and
revocation are audited, and so is every sign-in attempt, which is also limited."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from memory import services as memory_services
from memory.spaces import quotas as space_quotas
from workspaces import services
from workspaces.models import ApiToken, AuditEvent

SIGN_IN = "/accounts/login/"
ADMIN_SIGN_IN = "/admin/login/"


def audited_services() -> list[tuple[str, Callable[..., object]]]:
    """Every service function whose body records an audit event."""
    found: list[tuple[str, Callable[..., object]]] = []
    for module in (services, memory_services, space_quotas):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("_"):
                continue
            if name != "audit_record" and "audit_record(" in inspect.getsource(function):
                found.append((f"{module.__name__}.{name}", function))
    return found


def test_every_audited_service_requires_its_actor_as_a_keyword():
    found = dict(audited_services())

    assert "workspaces.services.workspace_ai_consent_set" in found
    assert "workspaces.services.api_token_revoke" in found
    assert "memory.spaces.quotas.space_tenant_quota_override_set" in found
    for name, function in found.items():
        parameters = inspect.signature(function).parameters
        actor = parameters.get("actor") or parameters.get("revoked_by") or parameters.get("author")
        if name == "workspaces.services.api_token_create":
            actor = parameters["user"]  # a token is minted only by its owner
        if name == "workspaces.services.workspace_create":
            actor = parameters["admin"]  # its creator is its first admin
        assert actor is not None, name
        assert actor.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert actor.default is inspect.Parameter.empty, name


def test_a_consent_change_in_the_web_frame_is_audited_with_its_actor(client, tenant):
    client.force_login(tenant.admin)

    client.post(
        reverse("workspaces:ai", args=[tenant.workspace.pk]),
        {"enabled": "0", "expected_revision": "0"},
    )

    event = AuditEvent.objects.get(action="ai_consent_changed")
    assert (event.actor_id, event.actor_username) == (tenant.admin.pk, tenant.admin.username)
    assert event.detail == {"enabled": False, "consentRevision": 1}
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 1


def test_token_creation_and_revocation_are_audited_without_the_token(tenant):
    client = APIClient()
    client.force_login(tenant.member)

    created = client.post("/api/v1/tokens", {"name": "cli", "scope": "mcp"}, format="json").json()
    client.delete(f"/api/v1/tokens/{created['id']}")
    client.delete(f"/api/v1/tokens/{created['id']}")

    events = AuditEvent.objects.filter(org_id=tenant.org.pk, target_type="api_token")
    assert list(events.order_by("pk").values_list("action", "actor_id", "target_id")) == [
        ("token_created", tenant.member.pk, str(created["id"])),
        ("token_revoked", tenant.member.pk, str(created["id"])),
    ]
    assert events.get(action="token_created").detail["scope"] == "mcp"
    token = ApiToken.objects.get(pk=created["id"])
    everything = str(list(events.values("detail", "target_id")))
    assert created["token"] not in everything
    assert token.token_hash not in everything


def test_the_admins_revoke_is_audited_as_the_staff_member(admin_client, admin_user, tenant):
    token, _ = services.api_token_create(user=tenant.member, team=tenant.team, name="cli")

    admin_client.post(
        reverse("admin:workspaces_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    event = AuditEvent.objects.get(action="token_revoked")
    assert (event.actor_id, event.target_id) == (admin_user.pk, str(token.pk))
    assert event.detail == {"ownerId": tenant.member.pk, "teamId": tenant.team.pk}
    assert event.org_id == tenant.org.pk
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def sign_in(client: Client, username: str, password: str, address: str, url: str = SIGN_IN):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.parametrize("url", [SIGN_IN, ADMIN_SIGN_IN])
def test_sign_ins_are_audited_with_account_and_address_never_the_password(tenant, url):
    tenant.admin.is_staff = True
    tenant.admin.save(update_fields=["is_staff"])

    failed = sign_in(Client(), tenant.admin.username, "wrong-password", "192.0.2.7", url)
    unknown = sign_in(Client(), "nobody-by-this-name", "wrong-password", "192.0.2.7", url)
    succeeded = sign_in(Client(), tenant.admin.username, "pw-admin-123", "192.0.2.7", url)

    assert (failed.status_code, unknown.status_code, succeeded.status_code) == (200, 200, 302)
    events = AuditEvent.objects.filter(action__startswith="sign_in").order_by("pk")
    assert list(events.values_list("action", "actor_id", "actor_username")) == [
        ("sign_in_failed", tenant.admin.pk, tenant.admin.username),
        ("sign_in_failed", None, ""),
        ("sign_in_succeeded", tenant.admin.pk, tenant.admin.username),
    ]
    assert {event.detail["clientAddress"] for event in events} == {"192.0.2.7"}
    assert {event.detail["path"] for event in events} == {url}
    trail = str(list(AuditEvent.objects.values_list("detail", "actor_username")))
    assert "wrong-password" not in trail
    assert "nobody-by-this-name" not in trail


@pytest.mark.parametrize("url", [SIGN_IN, ADMIN_SIGN_IN])
def test_an_account_is_locked_after_the_failure_limit_from_any_address(tenant, url, settings):
    settings.AXES_FAILURE_LIMIT = 3
    tenant.admin.is_staff = tenant.admin.is_superuser = True
    tenant.admin.save(update_fields=["is_staff", "is_superuser"])

    for n in range(3):
        sign_in(Client(), tenant.admin.username, f"guess-{n}", f"192.0.2.{n}", url)
    right_password = sign_in(Client(), tenant.admin.username, "pw-admin-123", "192.0.2.50", url)
    other_account = sign_in(Client(), tenant.member.username, "pw-member-123", "192.0.2.50")

    assert right_password.status_code == 429
    assert b"Too many sign-in attempts" in right_password.content
    assert "_auth_user_id" not in right_password.client.session
    assert other_account.status_code == 302
    locked = AuditEvent.objects.filter(action="sign_in_failed", actor=tenant.admin).last()
    assert locked is not None
    assert locked.detail["lockedOut"] is True
    assert AccessAttempt.objects.filter(username=tenant.admin.username).exists()
    assert "guess-" not in str(list(AccessAttempt.objects.values("get_data", "post_data")))


def test_an_address_is_locked_after_the_failure_limit_for_any_account(tenant, settings):
    settings.AXES_FAILURE_LIMIT = 3

    for n in range(3):
        sign_in(Client(), f"someone-{n}", "guess", "192.0.2.9")
    from_there = sign_in(Client(), tenant.member.username, "pw-member-123", "192.0.2.9")
    from_elsewhere = sign_in(Client(), tenant.member.username, "pw-member-123", "192.0.2.10")

    assert from_there.status_code == 429
    assert from_elsewhere.status_code == 302


@pytest.mark.parametrize("ajax", [False, True])
def test_the_lockout_says_when_to_retry_in_words_and_in_retry_after(tenant, settings, ajax):
    """The one lockout answer, also to a request marked as XMLHttpRequest, for which
    django-axes would answer its own JSON (the account name, `Access-Control-Allow-Origin: *`)."""
    settings.AXES_FAILURE_LIMIT = 2
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    for n in range(2):
        sign_in(Client(), tenant.member.username, f"guess-{n}", "192.0.2.20")
    headers = {"X-Requested-With": "XMLHttpRequest"} if ajax else {}

    response = Client().post(
        SIGN_IN,
        {"username": tenant.member.username, "password": "pw-member-123"},
        REMOTE_ADDR="192.0.2.20",
        headers=headers,
    )

    assert response.status_code == 429
    assert response["Retry-After"] == "900"
    assert response["Content-Type"].startswith("text/html")
    assert "Access-Control-Allow-Origin" not in response
    text = " ".join(response.content.decode().split())
    assert "after 2 failed attempts. Try again in 15 minutes." in text
    assert tenant.member.username not in text
