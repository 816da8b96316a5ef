"""The web frame's workspace pages: sign-in, sign-out, the list, Settings, key sessions."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from conftest import assert_error
from workspaces import selectors
from workspaces.models import (
    KeySession,
    KeySessionRevocation,
    Org,
    TeamMembership,
    User,
    Workspace,
)
from workspaces.services import (
    browser_session_digest,
    key_session_open,
    key_session_revoke,
    org_deletion_request,
    team_membership_ensure,
    workspace_membership_ensure,
)

PAGES = ["memory:frame", "memory:changes", "memory:notes", "workspaces:settings"]


def page_url(name: str, workspace: Workspace) -> str:
    return reverse(name, kwargs={"workspace_id": workspace.pk})


def signed_in(client: Client, user) -> Client:
    client.force_login(user)
    return client


@pytest.mark.parametrize("name", PAGES)
def test_workspace_pages_require_sign_in(client, tenant, name):
    url = page_url(name, tenant.workspace)

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('workspaces:sign-in')}?next={url}"
    assert not KeySession.objects.exists()


@pytest.mark.parametrize("name", ["ai", "key-session-open"])
def test_a_settings_form_sent_after_the_session_ended_returns_to_settings(client, tenant, name):
    """Signing in returns to `next`; the form's own POST-only target would be fetched with a
    GET there and refused with a blank 405, so `next` is Settings; nothing was changed."""
    settings_url = reverse("workspaces:settings", kwargs={"workspace_id": tenant.workspace.pk})
    ai_enabled = tenant.workspace.ai_enabled
    response = client.post(
        reverse(f"workspaces:{name}", kwargs={"workspace_id": tenant.workspace.pk}),
        {"enabled": "0", "expected_revision": "0"},
    )

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('workspaces:sign-in')}?next={settings_url}"
    sign_in_page = client.get(response["Location"])
    assert b"You were signed out, so nothing was changed. Sign in, then do it again." in (
        sign_in_page.content
    )
    signed = client.post(
        response["Location"], {"username": tenant.member.username, "password": "pw-member-123"}
    )
    assert signed["Location"] == settings_url
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_enabled == ai_enabled


def test_workspace_list_requires_sign_in(client, db):
    response = client.get(reverse("workspaces:list"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("workspaces:sign-in"))


@pytest.mark.parametrize("name", PAGES)
def test_another_teams_workspace_is_404_and_opens_no_key_session(client, make_tenant, name):
    mine, theirs = make_tenant(), make_tenant()
    signed_in(client, mine.member)

    response = client.get(page_url(name, theirs.workspace))

    assert response.status_code == 404
    assert not KeySession.objects.filter(workspace=theirs.workspace).exists()


def test_root_redirects_to_the_workspace_list(client, db):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == reverse("workspaces:list")


def test_sign_in_with_the_form_lands_on_the_workspace_list(client, tenant):
    page = client.get(reverse("workspaces:sign-in"))

    response = client.post(
        reverse("workspaces:sign-in"),
        {"username": tenant.member.username, "password": "pw-member-123"},
    )

    assert page.status_code == 200
    assert b'<label for="id_username">Username</label>' in page.content
    assert response.status_code == 302
    assert response["Location"] == reverse("workspaces:list")
    assert client.session["_auth_user_id"] == str(tenant.member.pk)


def test_sign_in_with_a_wrong_password_stays_signed_out(client, tenant):
    response = client.post(
        reverse("workspaces:sign-in"), {"username": tenant.member.username, "password": "nope"}
    )

    assert response.status_code == 200
    assert b'role="alert"' in response.content
    assert "_auth_user_id" not in client.session


def test_workspace_list_shows_only_the_members_workspaces(client, make_tenant):
    mine, theirs = make_tenant(), make_tenant()
    signed_in(client, mine.member)

    response = client.get(reverse("workspaces:list"))

    assert response.status_code == 200
    assert mine.workspace.name.encode() in response.content
    assert theirs.workspace.name.encode() not in response.content


def test_first_visit_opens_one_key_session_and_later_visits_reuse_it(client, tenant):
    signed_in(client, tenant.member)

    client.get(page_url("memory:frame", tenant.workspace))
    client.get(page_url("memory:changes", tenant.workspace))
    response = client.get(page_url("memory:frame", tenant.workspace))

    session = KeySession.objects.get(workspace=tenant.workspace, user=tenant.member)
    assert session.browser_session == browser_session_digest(client.session.session_key)
    assert cache.get(session.cache_key) is not None
    assert response.context["frame_config"]["keySessionId"] == str(session.pk)


def test_a_key_session_evicted_after_idling_is_replaced_at_the_next_visit(client, tenant):
    signed_in(client, tenant.member)
    client.get(page_url("memory:frame", tenant.workspace))
    first = KeySession.objects.get(user=tenant.member)
    cache.delete(first.cache_key)

    client.get(page_url("memory:frame", tenant.workspace))

    response = client.get(page_url("memory:frame", tenant.workspace))
    second = KeySession.objects.exclude(pk=first.pk).get(user=tenant.member)
    assert response.context["frame_config"]["keySessionId"] == str(second.pk)


def test_a_revoked_key_session_is_not_silently_reopened(client, tenant):
    signed_in(client, tenant.member)
    client.get(page_url("memory:frame", tenant.workspace))
    session = KeySession.objects.get(user=tenant.member)
    key_session_revoke(session=session, revoked_by=tenant.member)

    response = client.get(page_url("memory:frame", tenant.workspace))

    assert KeySession.objects.filter(user=tenant.member).count() == 1
    assert response.context["frame_config"]["keySessionId"] is None
    assert b"The assistant has no key session in this browser" in response.content


@pytest.mark.parametrize("sign_out", ["workspaces:sign-out", "admin:logout"])
def test_sign_out_revokes_the_key_sessions_it_opened_then_signs_out(
    client, make_tenant, django_capture_on_commit_callbacks, sign_out
):
    """The frame's sign-out and the admin's (staff use one browser session for both) are
    one view."""
    tenant = make_tenant()
    tenant.member.is_staff = True
    tenant.member.save(update_fields=["is_staff"])
    second = Workspace.objects.create(team=tenant.team, name="second workspace")
    workspace_membership_ensure(workspace=second, user=tenant.member)
    unrelated = key_session_open(workspace=tenant.workspace, user=tenant.member)
    signed_in(client, tenant.member)
    client.get(page_url("memory:frame", tenant.workspace))
    client.get(page_url("memory:frame", second))
    opened = list(KeySession.objects.exclude(pk=unrelated.pk).filter(user=tenant.member))

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse(sign_out))

    assert response.status_code == 302
    assert response["Location"] == reverse("workspaces:sign-in")
    assert "_auth_user_id" not in client.session
    assert len(opened) == 2
    for session in opened:
        session.refresh_from_db()
        assert session.revoked_at is not None
        assert KeySessionRevocation.objects.get(key_session=session).revoked_by == tenant.member
        assert cache.get(session.cache_key) is None
    unrelated.refresh_from_db()
    assert unrelated.revoked_at is None


def test_the_sign_in_page_says_you_have_been_signed_out_once(client, tenant):
    signed_in(client, tenant.member)

    response = client.post(reverse("workspaces:sign-out"), follow=True)

    assert response.redirect_chain == [(reverse("workspaces:sign-in"), 302)]
    assert b"You have been signed out." in response.content
    assert b"You have been signed out." not in client.get(reverse("workspaces:sign-in")).content


def form_token(page) -> str:
    match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert match is not None
    return match.group(1).decode()


def test_a_form_left_open_while_signing_in_elsewhere_says_what_happened(tenant):
    """Signing in rotates the CSRF token, so the form of a tab opened before is refused: the
    refusal is this site's page saying why and what next, not Django's CSRF jargon."""
    client = Client(enforce_csrf_checks=True)
    stale = form_token(client.get(reverse("workspaces:sign-in")))
    credentials = {"username": tenant.member.username, "password": "pw-member-123"}
    fresh = form_token(client.get(reverse("workspaces:sign-in")))
    client.post(reverse("workspaces:sign-in"), credentials | {"csrfmiddlewaretoken": fresh})

    response = client.post(reverse("workspaces:sign-out"), {"csrfmiddlewaretoken": stale})

    assert response.status_code == 403
    text = response.content.decode()
    assert "This page was out of date, so nothing was done." in text
    assert "CSRF" not in text
    assert "DEBUG" not in text
    assert f'href="{reverse("workspaces:list")}"' in text
    assert client.session["_auth_user_id"] == str(tenant.member.pk)


def test_sign_out_by_get_asks_to_confirm_and_signs_nobody_out(client, tenant):
    """A typed or bookmarked /accounts/logout/ is a GET: it gets a page with the sign-out
    button (a GET must not sign out: any page could embed that link), not a blank 405."""
    signed_in(client, tenant.member)
    client.get(page_url("memory:frame", tenant.workspace))

    response = client.get(reverse("workspaces:sign-out"))

    assert response.status_code == 200
    text = response.content.decode()
    assert f'<form method="post" action="{reverse("workspaces:sign-out")}"' in text
    assert 'name="csrfmiddlewaretoken"' in text
    assert client.session["_auth_user_id"] == str(tenant.member.pk)
    assert KeySession.objects.get(user=tenant.member).revoked_at is None


def test_sign_out_by_get_when_signed_out_goes_to_sign_in(client, tenant):
    response = client.get(reverse("workspaces:sign-out"))

    assert response.status_code == 302
    assert response["Location"] == reverse("workspaces:sign-in")


@pytest.mark.parametrize("method", ["put", "delete"])
def test_sign_out_takes_no_other_method(client, tenant, method):
    signed_in(client, tenant.member)

    response = getattr(client, method)(reverse("workspaces:sign-out"))

    assert response.status_code == 405
    assert client.session["_auth_user_id"] == str(tenant.member.pk)


def test_settings_lists_the_members_key_sessions_with_revoke(client, tenant):
    signed_in(client, tenant.member)

    response = client.get(page_url("workspaces:settings", tenant.workspace))

    session = KeySession.objects.get(user=tenant.member)
    assert response.status_code == 200
    assert b"this browser" in response.content
    assert (
        reverse("workspaces:key-session-revoke", args=[tenant.workspace.pk, session.pk]).encode()
        in response.content
    )


def test_revoke_from_settings_records_the_revocation(client, tenant):
    signed_in(client, tenant.member)
    client.get(page_url("workspaces:settings", tenant.workspace))
    session = KeySession.objects.get(user=tenant.member)

    response = client.post(
        reverse("workspaces:key-session-revoke", args=[tenant.workspace.pk, session.pk])
    )

    assert response.status_code == 302
    session.refresh_from_db()
    assert session.revoked_at is not None
    assert KeySessionRevocation.objects.filter(key_session=session).exists()


def test_revoking_another_members_key_session_is_404(client, tenant):
    others = key_session_open(workspace=tenant.workspace, user=tenant.admin)
    signed_in(client, tenant.member)

    response = client.post(
        reverse("workspaces:key-session-revoke", args=[tenant.workspace.pk, others.pk])
    )

    assert response.status_code == 404
    others.refresh_from_db()
    assert others.revoked_at is None


def test_open_a_new_key_session_from_settings_after_revoking(client, tenant):
    signed_in(client, tenant.member)
    client.get(page_url("workspaces:settings", tenant.workspace))
    first = KeySession.objects.get(user=tenant.member)
    key_session_revoke(session=first, revoked_by=tenant.member)

    client.post(reverse("workspaces:key-session-open", args=[tenant.workspace.pk]))

    response = client.get(page_url("memory:frame", tenant.workspace))
    fresh = KeySession.objects.exclude(pk=first.pk).get(user=tenant.member)
    assert response.context["frame_config"]["keySessionId"] == str(fresh.pk)


def test_admin_switches_workspace_ai_off_by_compare_and_set(client, tenant):
    signed_in(client, tenant.admin)

    response = client.post(
        reverse("workspaces:ai", args=[tenant.workspace.pk]),
        {"enabled": "0", "expected_revision": "0"},
        follow=True,
    )

    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (False, 1)
    assert b"Workspace AI is off." in response.content


def test_a_stale_consent_revision_changes_nothing(client, tenant):
    signed_in(client, tenant.admin)

    response = client.post(
        reverse("workspaces:ai", args=[tenant.workspace.pk]),
        {"enabled": "0", "expected_revision": "7"},
        follow=True,
    )

    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (True, 0)
    # In words first, with the code after them as every other notice of the frame has it.
    assert (
        "Not changed: workspace AI was switched elsewhere first, and it is on now. "
        "(CONSENT_REVISION_CONFLICT)"
    ) in response.content.decode()


def test_a_plain_member_cannot_switch_workspace_ai(client, tenant):
    signed_in(client, tenant.member)

    settings_page = client.get(page_url("workspaces:settings", tenant.workspace))
    response = client.post(
        reverse("workspaces:ai", args=[tenant.workspace.pk]),
        {"enabled": "0", "expected_revision": "0"},
    )

    assert b"Only an admin of this workspace can switch it." in settings_page.content
    assert response.status_code == 403
    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (True, 0)


def test_settings_offers_adding_members_only_to_admins_and_only_team_members_outside(
    client, tenant
):
    outsider = User.objects.create_user(username="outsider", password="pw-outsider-123")
    team_membership_ensure(team=tenant.team, user=outsider)
    url = page_url("workspaces:settings", tenant.workspace)

    as_admin = signed_in(client, tenant.admin).get(url)
    as_member = signed_in(Client(), tenant.member).get(url)

    assert as_admin.status_code == as_member.status_code == 200
    people = [person.username for person in as_admin.context["addable_people"]]
    assert people == ["outsider"]
    assert b'id="member-add"' in as_admin.content
    assert b'id="member-add"' not in as_member.content
    assert as_member.context["addable_people"] == []
    assert as_member.context["frame_config"]["isAdmin"] is False


def closed(tenant) -> None:
    """Soft-delete the tenant's org and make the admin its team's owner."""
    team_membership_ensure(team=tenant.team, user=tenant.admin)
    TeamMembership.objects.filter(team=tenant.team, user=tenant.admin).update(
        role=TeamMembership.Role.OWNER
    )
    org_deletion_request(org=tenant.org, actor=None)
    tenant.org.refresh_from_db()


def test_the_owner_of_a_closed_org_sees_when_the_purge_is_due(client, tenant):
    closed(tenant)
    due = tenant.org.deletion_due_at

    response = signed_in(client, tenant.admin).get(reverse("workspaces:list"))

    assert response.status_code == 200
    page = response.content.decode()
    assert f'<time id="purge-due-at" datetime="{due.isoformat()}">' in page
    assert f"{due:%-d %B %Y, %H:%M} UTC" in page
    assert page_url("memory:frame", tenant.workspace) not in page
    assert 'id="workspace-create"' not in page
    assert Org.objects.get(pk=tenant.org.pk).status == "pending_deletion"


def test_an_active_orgs_list_says_nothing_of_a_purge(client, tenant):
    response = signed_in(client, tenant.admin).get(reverse("workspaces:list"))

    assert 'id="org-closed"' not in response.content.decode()
    assert 'id="workspace-create"' in response.content.decode()


@pytest.mark.parametrize("name", PAGES)
def test_a_closed_orgs_workspace_pages_refuse_with_the_purge_time_and_open_no_key_session(
    client, tenant, name
):
    closed(tenant)
    due = tenant.org.deletion_due_at

    response = signed_in(client, tenant.member).get(page_url(name, tenant.workspace))

    assert response.status_code == 403
    assert f"first nightly purge after {due:%Y-%m-%d %H:%M} UTC" in response.content.decode()
    assert not KeySession.objects.filter(workspace=tenant.workspace).exists()


@pytest.mark.parametrize("name", ["memory:spaces", "memory:bots"])
def test_a_closed_orgs_team_pages_refuse_with_the_purge_time(client, tenant, name):
    closed(tenant)
    due = tenant.org.deletion_due_at

    response = signed_in(client, tenant.admin).get(reverse(name))

    assert response.status_code == 403
    assert f"first nightly purge after {due:%Y-%m-%d %H:%M} UTC" in response.content.decode()


@pytest.mark.parametrize("name", ["memory:spaces", "memory:bots"])
def test_an_active_orgs_team_pages_open(client, tenant, name):
    assert signed_in(client, tenant.admin).get(reverse(name)).status_code == 200


def test_a_closed_orgs_api_refusal_carries_when_the_purge_is_due(tenant):
    closed(tenant)

    response = tenant.client_for(tenant.admin).get("/api/v1/workspaces")

    error = assert_error(response, 403, "ORG_PENDING_DELETION")
    assert error["detail"]["deletionDueAt"] == tenant.org.deletion_due_at.isoformat().replace(
        "+00:00", "Z"
    )


def test_a_page_that_fails_is_this_sites_error_page_with_a_way_back(client, tenant, monkeypatch):
    """A page that fails (a bug, the database gone) answers this site's page: what happened,
    what to do, and the way back; Django's bare "Server Error (500)" had neither, nor the
    site's look."""
    signed_in(client, tenant.member)
    client.raise_request_exception = False

    def fail(**_: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(selectors, "workspace_list_for_member", fail)

    response = client.get(reverse("workspaces:list"))

    assert response.status_code == 500
    text = response.content.decode()
    assert "<title>Something went wrong · Workspace Memory</title>" in text
    assert "<h1>Something went wrong</h1>" in text
    assert f'href="{reverse("workspaces:list")}"' in text
    assert "the database went away" not in text
