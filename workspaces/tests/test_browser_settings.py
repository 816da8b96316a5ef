"""Tokens and workspaces in a real browser: a token shown once, used from outside the
browser, then revoked; one key session for two tabs; a workspace created from the list, with
its empty memory; members added, removed and leaving from Settings."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import Route, expect

from workspaces.models import ApiToken, KeySession, User, Workspace, WorkspaceMembership
from workspaces.services import team_membership_ensure, workspace_member_remove
from workspaces.tests.browser import (
    assert_within_width,
    open_page,
    requires_chromium,
    screenshot,
    sign_in,
)

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def get_with_token(live_server, path: str, token: str) -> tuple[int, dict]:
    """A request from outside the browser, as curl would send it."""
    request = urllib.request.Request(
        f"{live_server.url}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_a_token_is_shown_once_works_and_is_refused_once_revoked(new_context, live_server, tenant):
    context = new_context(viewport={"width": 390, "height": 844})
    sign_in(context, live_server, tenant.member)
    page = open_page(context, f"/workspaces/{tenant.workspace.pk}/settings/")
    page.on("dialog", lambda dialog: dialog.accept())

    page.get_by_label("Name").fill("laptop CLI")
    page.get_by_label("Scope").select_option("api")
    page.get_by_label("Expires after (days)").fill("30")
    page.get_by_role("button", name="Create token").click()

    secret = page.locator("#token-secret-value")
    expect(secret).to_have_text(re.compile(r"^iap_\S+$"))
    token = secret.inner_text()
    row = page.locator("#token-rows tr", has_text="laptop CLI")
    expect(row).to_contain_text("never")
    stored = ApiToken.objects.get(user=tenant.member, name="laptop CLI")
    assert (stored.expires_at - stored.created_at).days == 30
    assert token not in stored.token_hash
    screenshot(page, "settings-token-created-390")

    status, body = get_with_token(live_server, "/api/v1/workspaces", token)
    assert status == 200
    assert [workspace["id"] for workspace in body["results"]] == [tenant.workspace.pk]

    page.reload()
    page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    expect(page.locator("#token-secret")).to_be_hidden()
    expect(page.get_by_text(token)).to_have_count(0)
    row = page.locator("#token-rows tr", has_text="laptop CLI")
    expect(row).not_to_contain_text("never")

    revoke = row.get_by_role("button", name="Revoke token laptop CLI")
    box = revoke.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= 390, "the Revoke button runs past a 390 px screen"
    revoke.click()
    expect(page.locator("#tokens-status")).to_contain_text("Revoked “laptop CLI”")
    expect(row.get_by_role("button", name="Revoke token laptop CLI")).to_have_count(0)
    stored.refresh_from_db()
    assert stored.is_revoked

    status, body = get_with_token(live_server, "/api/v1/workspaces", token)
    assert (status, body["error"]["code"]) == (401, "TOKEN_REVOKED")
    screenshot(page, "settings-token-revoked-390")


def test_the_key_session_revoke_button_fits_a_390_px_screen(new_context, live_server, tenant):
    context = new_context(viewport={"width": 390, "height": 844})
    sign_in(context, live_server, tenant.member)

    page = open_page(context, f"/workspaces/{tenant.workspace.pk}/settings/")

    revoke = page.get_by_role("button", name=re.compile(r"^Revoke key session"))
    box = revoke.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= 390


def test_two_tabs_of_one_browser_share_one_key_session(browser_context, live_server, tenant):
    sign_in(browser_context, live_server, tenant.member)
    first_tab = open_page(browser_context)
    second_tab = open_page(browser_context)
    # Both first visits are sent before either is answered.
    first_tab.goto(f"/workspaces/{tenant.workspace.pk}/memory/", wait_until="commit")
    second_tab.goto(f"/workspaces/{tenant.workspace.pk}/memory/", wait_until="commit")

    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/settings/")

    rows = page.locator("#key-sessions-heading ~ div tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Open")
    expect(rows.first).to_contain_text("this browser")
    screenshot(page, "settings-one-key-session-for-two-tabs")
    assert KeySession.objects.filter(user=tenant.member, workspace=tenant.workspace).count() == 1


def test_a_workspace_created_from_the_list_opens_on_its_empty_memory(
    browser_context, live_server, tenant
):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/workspaces/")

    page.get_by_label("Name").fill("research")
    page.get_by_role("button", name="Create workspace").click()

    page.wait_for_url(re.compile(r"/workspaces/\d+/memory/$"))
    page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    workspace = Workspace.objects.get(team=tenant.team, name="research")
    assert page.url.endswith(f"/workspaces/{workspace.pk}/memory/")
    expect(page.locator(".workspace-name")).to_have_text("research")
    expect(page.locator("#memory-text")).to_have_value("")
    expect(page.locator("#memory-version")).to_have_text("0")
    assert WorkspaceMembership.objects.get(workspace=workspace, user=tenant.member).is_admin
    screenshot(page, "workspace-created")

    page.goto("/workspaces/")
    page.get_by_label("Name").fill("research")
    page.get_by_role("button", name="Create workspace").click()
    expect(page.locator("#workspace-create-status")).to_contain_text(
        "Your team already has a workspace named “research”"
    )
    assert Workspace.objects.filter(team=tenant.team, name="research").count() == 1


def test_an_admin_adds_and_removes_a_member_and_a_member_leaves(new_context, live_server, tenant):
    newcomer = User.objects.create_user(username="newcomer", password="pw-newcomer-123")
    team_membership_ensure(team=tenant.team, user=newcomer)
    admin = new_context()
    sign_in(admin, live_server, tenant.admin)
    page = open_page(admin, f"/workspaces/{tenant.workspace.pk}/settings/")
    page.on("dialog", lambda dialog: dialog.accept())
    members = page.locator("#members-rows")
    expect(members.locator("tr")).to_have_count(2)

    page.get_by_label("Team member").fill("newcomer")
    page.get_by_label("Role").select_option("member")
    page.get_by_role("button", name="Add member").click()

    expect(page.locator("#members-status")).to_have_text("Added newcomer as a member.")
    expect(members.locator("tr", has_text="newcomer")).to_contain_text("Member")
    assert WorkspaceMembership.objects.filter(workspace=tenant.workspace, user=newcomer).exists()

    page.get_by_role("button", name="Make admin: newcomer").click()
    expect(page.locator("#members-status")).to_have_text("newcomer is now an admin.")
    expect(members.locator("tr", has_text="newcomer")).to_contain_text("Admin")
    assert WorkspaceMembership.objects.get(workspace=tenant.workspace, user=newcomer).is_admin
    page.get_by_role("button", name="Make member: newcomer").click()
    expect(page.locator("#members-status")).to_have_text("newcomer is now a member.")

    page.get_by_role("button", name="Remove newcomer").click()
    expect(page.locator("#members-status")).to_have_text("Removed newcomer.")
    expect(members.locator("tr", has_text="newcomer")).to_have_count(0)
    assert not WorkspaceMembership.objects.filter(
        workspace=tenant.workspace, user=newcomer
    ).exists()
    screenshot(page, "settings-members")

    member = new_context()
    sign_in(member, live_server, tenant.member)
    leaving = open_page(member, f"/workspaces/{tenant.workspace.pk}/settings/")
    leaving.on("dialog", lambda dialog: dialog.accept())
    expect(leaving.get_by_role("button", name="Remove admin")).to_have_count(0)
    leaving.get_by_role("button", name="Leave this workspace").click()

    leaving.wait_for_url(re.compile(r"/workspaces/$"))
    expect(leaving.get_by_role("link", name=tenant.workspace.name)).to_have_count(0)
    assert not WorkspaceMembership.objects.filter(
        workspace=tenant.workspace, user=tenant.member
    ).exists()
    gone = leaving.goto(f"/workspaces/{tenant.workspace.pk}/memory/")
    assert gone is not None
    assert gone.status == 404


def test_a_double_click_on_create_token_creates_one_token(browser_context, live_server, tenant):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/settings/")
    held: list[Route] = []
    page.route("**/api/v1/tokens", lambda route: held.append(route), times=1)
    page.get_by_label("Name").fill("laptop CLI")

    page.get_by_role("button", name="Create token").dblclick()

    # While the first is on its way, Create is off: a second token, never shown, would live on.
    expect(page.get_by_role("button", name="Create token")).to_be_disabled()
    held[0].continue_()
    expect(page.locator("#token-secret-value")).to_have_text(re.compile(r"^iap_\S+$"))
    expect(page.locator("#token-rows tr", has_text="laptop CLI")).to_have_count(1)
    assert ApiToken.objects.filter(user=tenant.member, name="laptop CLI").count() == 1


def test_tokens_say_when_there_are_none_and_a_long_name_keeps_revoke_in_view(
    browser_context, live_server, tenant
):
    """Someone without tokens is told so, not shown a bare header row; a token named with one
    long word (the form takes 100 characters) wraps in its cell instead of pushing the other
    columns and Revoke past the right edge of a 1280 px page."""
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/settings/")
    none = page.get_by_text("You have no access tokens in this team.")
    expect(none).to_be_visible()

    name = "n" * 100
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Create token").click()

    expect(page.locator("#token-rows tr")).to_have_count(1)
    expect(none).to_be_hidden()
    assert_within_width(page.get_by_role("button", name=f"Revoke token {name}"), 1280)
    screenshot(page, "settings-token-long-name-1280")


def test_a_member_removed_elsewhere_leaves_the_list_when_their_row_is_refused(
    browser_context, live_server, tenant
):
    """The list was loaded before another admin removed the member: the refusal says they are
    gone, and the list then shows the members as they are, not the stale row to try again."""
    sign_in(browser_context, live_server, tenant.admin)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/settings/")
    name = tenant.member.username
    row = page.locator("#members-rows tr", has_text=name)
    expect(row).to_have_count(1)
    workspace_member_remove(
        workspace=tenant.workspace, actor=tenant.admin, user_id=tenant.member.pk
    )

    page.get_by_role("button", name=f"Make admin: {name}").click()

    expect(page.locator("#members-status")).to_contain_text("Role not changed")
    expect(page.locator("#members-status")).to_contain_text("(NOT_FOUND)")
    expect(row).to_have_count(0)
