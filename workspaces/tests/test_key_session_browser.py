"""A key session the frame opens ends with the browser session that opened it, however that
session ends (signed out, expired, or a password changed since), checked on every use of the
key session; and a browser session holds one key session per workspace, however many tabs
open one at once."""

from __future__ import annotations

import io
import threading
from datetime import timedelta
from http.cookies import SimpleCookie

import pytest
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from conftest import postgres_only, run_concurrently, wait_until_a_backend_waits_on_a_lock
from workspaces.errors import KeySessionUnavailable
from workspaces.models import KeySession, KeySessionRevocation, User, WorkspaceMembership
from workspaces.services import key_session_cached_data_key, key_session_resolve

NEW_PASSWORD = "a new password for this test"


def frame_url(tenant) -> str:
    return reverse("memory:frame", kwargs={"workspace_id": tenant.workspace.pk})


def frame_key_session(browser: Client, tenant) -> KeySession:
    """The key session the frame opens for `browser`'s session at its first visit."""
    response = browser.get(frame_url(tenant))
    return KeySession.objects.get(pk=response.context["frame_config"]["keySessionId"])


def signed_in(user: User) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def assert_ended(session: KeySession, tenant) -> None:
    """Recall's use (the cached key) and every other use (resolution) refuse it, and it is
    revoked durably, for the fence and the member's Settings to see."""
    workspace, owner = tenant.workspace, session.user

    cached = key_session_cached_data_key(session_id=session.pk, workspace_id=workspace.pk)

    assert cached is None
    with pytest.raises(KeySessionUnavailable) as refused:
        key_session_resolve(session_id=session.pk, workspace=workspace, user=owner)
    assert refused.value.detail["reason"] == "revoked"
    session.refresh_from_db()
    assert session.is_revoked
    assert KeySessionRevocation.objects.filter(key_session=session).exists()


def test_a_key_session_is_usable_while_its_browser_session_lasts(tenant):
    browser = signed_in(tenant.member)
    session = frame_key_session(browser, tenant)

    key = key_session_resolve(session_id=session.pk, workspace=tenant.workspace, user=session.user)

    assert key == key_session_cached_data_key(
        session_id=session.pk, workspace_id=tenant.workspace.pk
    )
    session.refresh_from_db()
    assert not session.is_revoked


def test_a_browser_session_that_expires_ends_its_key_sessions(tenant):
    browser = signed_in(tenant.member)
    session = frame_key_session(browser, tenant)

    Session.objects.filter(session_key=browser.session.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )

    assert_ended(session, tenant)


def test_a_password_changed_in_the_admin_ends_the_persons_key_sessions(tenant):
    browser = signed_in(tenant.member)
    session = frame_key_session(browser, tenant)
    tenant.admin.is_staff = tenant.admin.is_superuser = True
    tenant.admin.save(update_fields=["is_staff", "is_superuser"])

    response = signed_in(tenant.admin).post(
        reverse("admin:auth_user_password_change", args=[tenant.member.pk]),
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )

    assert response.status_code == 302
    assert User.objects.get(pk=tenant.member.pk).check_password(NEW_PASSWORD)
    assert_ended(session, tenant)


def test_changing_ones_own_password_ends_the_key_sessions_of_ones_other_browsers(tenant):
    tenant.member.is_staff = True
    tenant.member.save(update_fields=["is_staff"])
    here, elsewhere = signed_in(tenant.member), signed_in(tenant.member)
    session_here, session_elsewhere = (
        frame_key_session(here, tenant),
        frame_key_session(elsewhere, tenant),
    )

    response = here.post(
        reverse("admin:password_change"),
        {
            "old_password": "pw-member-123",
            "new_password1": NEW_PASSWORD,
            "new_password2": NEW_PASSWORD,
        },
    )

    assert response.status_code == 302
    assert_ended(session_elsewhere, tenant)
    # This browser stays signed in (under a new session key): its next visit has a live one.
    reopened = frame_key_session(here, tenant)
    assert reopened.pk != session_here.pk
    key_session_resolve(session_id=reopened.pk, workspace=tenant.workspace, user=tenant.member)


def test_a_password_changed_by_manage_py_changepassword_ends_the_key_sessions(tenant, monkeypatch):
    browser = signed_in(tenant.member)
    session = frame_key_session(browser, tenant)
    monkeypatch.setattr("getpass.getpass", lambda prompt="": NEW_PASSWORD)

    call_command("changepassword", tenant.member.username, stdout=io.StringIO())

    assert User.objects.get(pk=tenant.member.pk).check_password(NEW_PASSWORD)
    assert_ended(session, tenant)


@pytest.mark.parametrize("opened_with", ["the browser session", "a JWT minted from it"])
def test_a_key_session_opened_through_the_api_from_a_browser_session_ends_with_it(
    tenant, opened_with
):
    browser = APIClient()
    browser.force_login(tenant.member)
    opener = browser
    if opened_with == "a JWT minted from it":
        opener = APIClient()
        token = browser.post("/api/v1/auth/jwt").json()["token"]
        opener.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    opened = opener.post(f"/api/v1/workspaces/{tenant.workspace.pk}/key-sessions")
    assert opened.status_code == 201
    session = KeySession.objects.get(pk=opened.json()["id"])

    Session.objects.filter(session_key=browser.session.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )

    assert_ended(session, tenant)


def test_a_key_session_opened_with_a_token_outlives_sign_ins(tenant):
    session = tenant.client_for(tenant.member).post(
        f"/api/v1/workspaces/{tenant.workspace.pk}/key-sessions"
    )
    session_id = session.json()["id"]

    tenant.member.set_password(NEW_PASSWORD)
    tenant.member.save(update_fields=["password"])

    key_session_resolve(session_id=session_id, workspace=tenant.workspace, user=tenant.member)


# ---- one per browser session and workspace ------------------------------------------------------


def test_a_second_tab_reuses_the_browser_sessions_key_session(tenant):
    browser = signed_in(tenant.member)
    first = frame_key_session(browser, tenant)
    other_tab = Client()
    other_tab.cookies = SimpleCookie(browser.cookies.output(header="", sep=";"))

    second = frame_key_session(other_tab, tenant)

    assert second.pk == first.pk
    assert KeySession.objects.filter(user=tenant.member).count() == 1


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_tabs_first_visits_at_once_open_one_key_session(tenant):
    browser = signed_in(tenant.member)
    tabs = []
    for _ in range(2):
        tab = Client()
        tab.cookies = SimpleCookie(browser.cookies.output(header="", sep=";"))
        tabs.append(tab)
    # The member's membership row is held, so that both first visits are inside their
    # decision together and either both open a key session or one waits for the other.
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            WorkspaceMembership.objects.select_for_update().get(
                workspace=tenant.workspace, user=tenant.member
            )
            held.set()
            release.wait(timeout=60)
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(timeout=30)
    visits: list[object] = []
    visiting = threading.Thread(
        target=lambda: visits.extend(
            run_concurrently(*(lambda tab=tab: frame_key_session(tab, tenant) for tab in tabs))
        )
    )
    visiting.start()

    try:
        wait_until_a_backend_waits_on_a_lock()
    finally:
        release.set()
        holder.join(timeout=60)
        visiting.join(timeout=90)

    first, second = visits
    assert isinstance(first, KeySession), first
    assert isinstance(second, KeySession), second
    assert first.pk == second.pk
    assert KeySession.objects.filter(user=tenant.member, workspace=tenant.workspace).count() == 1
