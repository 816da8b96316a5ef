"""Every form that creates something sends one request however often it is pressed: its
submit button is off until the answer (`submitOnce`, static/js/shared.js). Pressed twice, the
second request was refused (the name or path taken) and its error showed after the success.
A form that then opens what it created keeps the button off while that page loads."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, Route, expect

from workspaces.models import (
    Bot,
    File,
    TeamMembership,
    User,
    Workspace,
    WorkspaceMembership,
)
from workspaces.services import team_membership_ensure
from workspaces.tests.browser import open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def double_click_held(page: Page, url: str, button: str) -> None:
    """Double-click `button` while the first request to `url` is held; it must be off then."""
    held: list[Route] = []
    page.route(url, lambda route: held.append(route), times=1)

    page.get_by_role("button", name=button, exact=True).dblclick()

    expect(page.get_by_role("button", name=button, exact=True)).to_be_disabled()
    assert len(held) == 1
    held[0].continue_()


def test_create_workspace_creates_one(browser_context, live_server, tenant):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/workspaces/")
    page.get_by_label("Name").fill("research")

    double_click_held(page, "**/api/v1/workspaces", "Create workspace")

    page.wait_for_url(re.compile(r"/workspaces/\d+/memory/$"))
    assert Workspace.objects.filter(team=tenant.team, name="research").count() == 1


def click_again_while_leaving(page: Page, *, api: str, leaving_to: str, button: str) -> None:
    """Click `button`, hold the page it then leaves for (`leaving_to`), click it again while
    that page loads, then let the page load: exactly one write request to `api` went out."""
    writes: list[str] = []
    page.on(
        "request",
        lambda request: (
            writes.append(request.url)
            if request.method != "GET" and re.search(api, request.url)
            else None
        ),
    )
    held: list[Route] = []
    page.route(re.compile(leaving_to), lambda route: held.append(route), times=1)
    box = page.get_by_role("button", name=button, exact=True).bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2

    with page.expect_request(re.compile(leaving_to)):
        page.mouse.click(x, y)
    # The mouse, not a locator: a locator would wait for the navigation to finish first.
    page.mouse.click(x, y)
    held[0].continue_()
    page.wait_for_url(re.compile(leaving_to))
    screenshot(page, f"arrived-after-{button.lower().replace(' ', '-')}")

    assert len(writes) == 1, writes


def test_create_workspace_keeps_its_button_off_while_the_new_workspace_opens(
    browser_context, live_server, tenant
):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/workspaces/")
    page.get_by_label("Name").fill("research")

    click_again_while_leaving(
        page,
        api=r"/api/v1/workspaces$",
        leaving_to=r"/workspaces/\d+/memory/$",
        button="Create workspace",
    )

    assert Workspace.objects.filter(team=tenant.team, name="research").count() == 1


def test_create_note_creates_one(browser_context, live_server, tenant):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/notes/")
    page.get_by_label("Path").fill("ideas/plan.md")
    page.get_by_label("Text").fill("first idea\n")

    double_click_held(page, "**/documents?path=*", "Create")

    expect(page.get_by_role("heading", name="ideas/plan.md")).to_be_visible()
    assert File.objects.filter(workspace=tenant.workspace, path="ideas/plan.md").count() == 1


def test_create_note_keeps_its_button_off_while_the_note_opens(
    browser_context, live_server, tenant
):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/notes/")
    page.get_by_label("Path").fill("ideas/plan.md")
    page.get_by_label("Text").fill("first idea\n")

    click_again_while_leaving(
        page, api=r"/documents\?path=", leaving_to=r"/notes/edit/\?path=", button="Create"
    )

    expect(page.get_by_role("heading", name="ideas/plan.md")).to_be_visible()
    assert File.objects.filter(workspace=tenant.workspace, path="ideas/plan.md").count() == 1


def test_add_member_adds_once_and_shows_no_error(browser_context, live_server, tenant):
    newcomer = User.objects.create_user(username="newcomer", password="pw-newcomer-123")
    team_membership_ensure(team=tenant.team, user=newcomer)
    sign_in(browser_context, live_server, tenant.admin)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/settings/")
    expect(page.locator("#members-rows tr")).to_have_count(2)
    page.get_by_label("Team member").fill("newcomer")

    double_click_held(page, "**/members", "Add member")

    expect(page.locator("#members-status")).to_have_text("Added newcomer as a member.")
    expect(page.locator("#members-rows tr", has_text="newcomer")).to_have_count(1)
    assert WorkspaceMembership.objects.filter(workspace=tenant.workspace, user=newcomer).exists()


def test_create_bot_creates_one_and_shows_no_error(browser_context, live_server, tenant):
    team_membership_ensure(team=tenant.team, user=tenant.admin)
    TeamMembership.objects.filter(team=tenant.team, user=tenant.admin).update(
        role=TeamMembership.Role.OWNER
    )
    sign_in(browser_context, live_server, tenant.admin)
    page = open_page(browser_context, "/team/bots/")
    page.get_by_label("Id (letters, digits, _ and -)").fill("helper")
    page.get_by_label("Name", exact=True).first.fill("Helper")

    double_click_held(page, "**/api/v1/bots", "Create bot")

    expect(page.locator("#bot-list-status")).to_have_text("Created helper.")
    expect(page.locator("#bot-editor-id")).to_have_text("helper")
    assert Bot.objects.filter(team=tenant.team, slug="helper").count() == 1
