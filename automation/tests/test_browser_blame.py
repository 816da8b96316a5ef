""" "Where did this come from?" in a real browser: each saved line with its origin, a captured
line opening its turn in the Assistant panel, and stale lines kept (no new version) or
removed (a Save). Checks the page and the persisted state; screenshots in test-artifacts/."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from automation.models import Admission
from memory.models import MEMORY_PATH, LineReview
from memory.selectors import memory_current_get
from workspaces.models import FileVersion
from workspaces.tests.browser import open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def open_frame(context, live_server, tenant):
    page = open_page(context, f"/workspaces/{tenant.workspace.pk}/memory/")
    page.wait_for_selector("#assistant[data-ready='1']", state="attached")
    return page


def test_each_line_shows_its_origin_opens_its_turn_and_stale_lines_are_kept_or_removed(
    browser_context, live_server, make_assistant
):
    tenant = make_assistant(memory="- likes tea\n- the office is in Osaka\n").tenant
    sign_in(browser_context, live_server, tenant.member)
    page = open_frame(browser_context, live_server, tenant)
    page.get_by_label("Message to the assistant").fill("remember likes green tea")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#memory-version")).to_have_text("2")
    # The clock moves on: the first Save is now 100 days old.
    FileVersion.objects.filter(file__workspace=tenant.workspace, version=1).update(
        created_at=timezone.now() - timedelta(days=100)
    )

    page = open_frame(browser_context, live_server, tenant)
    notice = page.locator("#blame-stale-notice")
    expect(notice).to_contain_text("2 lines have not been changed or checked for 90 days")
    page.get_by_role("button", name="Where did each line come from?").click()
    lines = page.locator("#blame-lines .blame-line")
    expect(lines).to_have_count(3)
    expect(lines.nth(0)).to_contain_text("- likes tea")
    expect(lines.nth(0)).to_contain_text(f"Saved by a person ({tenant.member.username})")
    expect(lines.nth(0)).to_contain_text("Still true?")
    expect(lines.nth(2)).to_contain_text("- likes green tea")
    expect(lines.nth(2)).to_contain_text(
        f"Remembered by the assistant for {tenant.member.username}"
    )
    expect(lines.nth(2).get_by_role("link", name="version 2")).to_have_attribute(
        "href", f"/workspaces/{tenant.workspace.pk}/changes/2/"
    )
    expect(lines.nth(2).locator(".blame-review")).to_have_count(0)
    screenshot(page, "memory-blame-origins")

    lines.nth(2).get_by_role("button", name="open the assistant's turn").click()
    admission = Admission.objects.get(conversation__workspace=tenant.workspace)
    highlighted = page.locator("#transcript .turn-highlighted")
    expect(highlighted).to_have_attribute("data-turn-id", str(admission.turn.pk))
    expect(highlighted).to_be_focused()

    page.get_by_role("button", name="Keep line 1: still true").click()
    expect(page.locator("#blame-status")).to_contain_text("Kept line 1")
    expect(notice).to_contain_text("1 line has not been changed")
    review = LineReview.objects.get()
    assert (review.origin.version, review.origin_line, review.reviewer) == (1, 0, tenant.member)
    assert memory_current_get(workspace=tenant.workspace).version == 2

    page.get_by_role("button", name="Remove line 2").click()
    expect(page.locator("#blame-status")).to_contain_text("saved as version 3")
    expect(notice).to_be_hidden()
    expect(lines).to_have_count(2)
    expect(page.get_by_label("Memory document (Markdown)")).to_have_value(
        re.compile(r"^- likes tea\n- likes green tea\n$")
    )
    screenshot(page, "memory-blame-after-review")
    saved = memory_current_get(workspace=tenant.workspace)
    assert (saved.version, saved.content) == (3, "- likes tea\n- likes green tea\n")
    assert (
        FileVersion.objects.get(
            file__workspace=tenant.workspace, file__path=MEMORY_PATH, version=3
        ).change_kind
        == FileVersion.ChangeKind.SAVE
    )
