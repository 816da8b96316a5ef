"""Bots in a real browser: an owner creates a bot, writes a spec that the live diagnostics
refuse, fixes it and saves it, issues a token that is shown once and revokes it; a member
reads the bot but gets no controls."""

from __future__ import annotations

import pytest
from playwright.sync_api import Route, expect

from workspaces.models import ApiToken, Bot, TeamMembership
from workspaces.services import team_membership_ensure
from workspaces.tests.browser import (
    assert_within_width,
    open_page,
    requires_chromium,
    screenshot,
    sign_in,
)

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def test_an_owner_creates_a_bot_edits_its_spec_with_live_diagnostics_and_manages_a_token(
    browser_context, live_server, tenant
):
    team_membership_ensure(team=tenant.team, user=tenant.admin)
    TeamMembership.objects.filter(team=tenant.team, user=tenant.admin).update(
        role=TeamMembership.Role.OWNER
    )
    sign_in(browser_context, live_server, tenant.admin)
    page = open_page(browser_context, "/team/memory/")
    page.get_by_role("link", name="Bots").click()
    expect(page.get_by_text("This team has no bots yet.")).to_be_visible()

    page.get_by_label("Id (letters, digits, _ and -)").fill("helper")
    page.get_by_label("Name", exact=True).first.fill("Helper")
    page.get_by_label("Runtime", exact=True).first.select_option("claw")
    page.get_by_role("button", name="Create bot").click()
    expect(page.locator("#bot-editor-id")).to_have_text("helper")
    expect(page.locator("#bot-rows tr")).to_have_count(1)

    spec = page.get_by_label("Memory spec (YAML or JSON; empty for none)")
    spec.fill("visibility: team\n")
    diagnostics = page.locator("#bot-diagnostics")
    expect(diagnostics).to_contain_text("C170 error (visibility)")
    page.get_by_role("button", name="Save bot").click()
    expect(page.locator("#bot-status")).to_contain_text("BOT_SPEC_INVALID")
    assert Bot.objects.get(slug="helper").memory_spec is None
    spec.fill("visibility: [org")
    expect(diagnostics).to_contain_text("not YAML or JSON")
    spec.fill("visibility: bot\nproject: app\n")
    expect(diagnostics).to_have_text("None: the spec is clean.")
    page.get_by_label("Runtime", exact=True).nth(1).select_option("codex")
    expect(diagnostics).to_contain_text("C047 warning (memory)")
    screenshot(page, "bots-diagnostics")
    page.get_by_role("button", name="Save bot").click()
    expect(page.locator("#bot-status")).to_have_text("Saved helper.")
    bot = Bot.objects.get(slug="helper")
    assert (bot.runtime, bot.memory_spec) == ("codex", {"visibility": "bot", "project": "app"})

    page.get_by_label("New token name").fill("ci")
    page.get_by_role("button", name="Issue token").click()
    secret = page.locator("#bot-token-secret")
    expect(secret).to_contain_text("iap_")
    token = ApiToken.objects.get(bot=bot)
    token_row = page.locator("#bot-token-rows tr")
    expect(token_row).to_contain_text("never")
    screenshot(page, "bots-token")
    page.get_by_role("button", name="Revoke ci").click()
    expect(page.locator("#bot-token-status")).to_have_text("Revoked ci.")
    expect(page.get_by_role("button", name="Revoke ci")).to_have_count(0)
    token.refresh_from_db()
    assert token.revoked_at is not None

    page.reload()
    page.get_by_role("button", name="Edit helper").click()
    expect(page.locator("#bot-token-secret")).to_be_hidden()
    assert secret.text_content() in ("", None)


def test_a_member_reads_a_bot_without_controls(browser_context, live_server, tenant):
    tenant.bot_create("helper", memory={"visibility": "org"})
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/bots/")

    page.get_by_role("button", name="View helper").click()

    expect(page.get_by_label("Memory spec (YAML or JSON; empty for none)")).to_have_value(
        '{\n  "visibility": "org"\n}'
    )
    expect(page.get_by_role("button", name="Save bot")).to_have_count(0)
    expect(page.get_by_role("button", name="Issue token")).to_have_count(0)
    expect(page.get_by_role("button", name="Create bot")).to_have_count(0)


def test_opening_the_editor_leaves_the_caret_where_the_owner_started_typing(
    browser_context, live_server, tenant
):
    """The editor's loads (diagnostics, tokens) end after its fields show: what the owner
    types meanwhile stays where it is typed, and keeps the focus."""
    tenant.bot_create("helper")
    sign_in(browser_context, live_server, tenant.admin)
    page = open_page(browser_context, "/team/bots/")
    held = []
    page.route("**/api/v1/bots/helper/tokens*", lambda route: held.append(route))

    page.get_by_role("button", name="Edit helper").click()
    spec = page.get_by_label("Memory spec (YAML or JSON; empty for none)")
    expect(page.locator("#bot-editor-id")).to_have_text("helper")
    spec.fill("visibility: team\n")
    expect(page.locator("#bot-diagnostics")).to_contain_text("C170 error (visibility)")
    assert len(held) == 1
    held[0].continue_()
    expect(page.locator("#bot-token-empty")).to_be_visible()

    assert page.evaluate("document.activeElement.id") == "bot-spec"
    expect(spec).to_have_value("visibility: team\n")


def test_a_double_click_on_issue_token_issues_one_token(browser_context, live_server, tenant):
    bot = tenant.bot_create("helper")
    sign_in(browser_context, live_server, tenant.admin)
    page = open_page(browser_context, "/team/bots/")
    page.get_by_role("button", name="Edit helper").click()
    held: list[Route] = []
    page.route("**/api/v1/bots/helper/tokens", lambda route: held.append(route), times=1)
    page.get_by_label("New token name").fill("ci")

    page.get_by_role("button", name="Issue token").dblclick()

    # While the first is on its way, Issue is off: a second token, never shown, would live on.
    expect(page.get_by_role("button", name="Issue token")).to_be_disabled()
    held[0].continue_()
    expect(page.locator("#bot-token-secret")).to_contain_text("iap_")
    expect(page.locator("#bot-token-rows tr")).to_have_count(1)
    assert ApiToken.objects.filter(bot=bot).count() == 1


def test_a_long_bot_name_wraps_and_a_refused_save_reads_as_one_sentence(
    browser_context, live_server, tenant
):
    """A bot named with one long word (the form takes 200 characters) wraps in its cell: the
    columns after it and Edit stay on a 1280 px page. A refused save says so in sentences."""
    tenant.bot_create("helper", name="Bøt " + "z" * 196)
    sign_in(browser_context, live_server, tenant.admin)
    page = open_page(browser_context, "/team/bots/")
    edit = page.get_by_role("button", name="Edit helper")
    assert_within_width(edit, 1280)
    screenshot(page, "bots-long-name-1280")

    edit.click()
    page.get_by_label("Memory spec (YAML or JSON; empty for none)").fill("visibility: team\n")
    expect(page.locator("#bot-diagnostics")).to_contain_text("C170 error (visibility)")
    page.get_by_role("button", name="Save bot").click()

    expect(page.locator("#bot-status")).to_have_text(
        "Not saved: The bot's memory settings have errors; fix the ones listed and save "
        "again. Nothing was changed. (BOT_SPEC_INVALID)"
    )
