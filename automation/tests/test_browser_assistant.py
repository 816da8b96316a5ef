"""The Assistant panel in a real browser, with the default scripted model: "remember ..." in
Auto commits and says "Remembered" with the revision; in Read only it becomes a proposal
that Apply saves as the member's own change. Each checks the page and the persisted state."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Request, expect

from automation.models import Admission
from automation.tests.conftest import memory_in_auto
from memory.models import MEMORY_PATH, Proposal
from memory.selectors import memory_current_get
from memory.services import memory_save
from workspaces.models import FileVersion, KeySession
from workspaces.tests.browser import (
    open_page,
    requires_chromium,
    screenshot,
    sign_in,
)

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def open_frame(context, live_server, tenant):
    sign_in(context, live_server, tenant.member)
    page = open_page(context, f"/workspaces/{tenant.workspace.pk}/memory/")
    page.wait_for_selector("#assistant[data-ready='1']", state="attached")
    return page


def send(page, text: str) -> None:
    page.get_by_label("Message to the assistant").fill(text)
    page.get_by_role("button", name="Send").click()


def revision(tenant, version: int) -> FileVersion:
    return FileVersion.objects.get(
        file__workspace=tenant.workspace, file__path=MEMORY_PATH, version=version
    )


def test_remember_in_auto_shows_remembered_with_the_committed_revision(
    browser_context, live_server, tenant
):
    memory_in_auto(tenant)
    page = open_frame(browser_context, live_server, tenant)

    send(page, "remember likes green tea")

    turn = page.locator("#transcript .turn").last
    remembered = turn.locator(".receipt .remembered")
    expect(remembered).to_have_text("Remembered")
    receipt = turn.locator(".receipt")
    expect(receipt.get_by_role("link", name="revision 2")).to_have_count(2)
    expect(receipt.get_by_role("link", name="revision 2").last).to_have_attribute(
        "href", f"/workspaces/{tenant.workspace.pk}/changes/2/"
    )
    expect(page.locator("#assistant-status")).to_contain_text("Remembered as memory version 2.")
    expect(page.locator("#memory-version")).to_have_text("2")
    expect(page.get_by_label("Memory document (Markdown)")).to_have_value(
        re.compile("- likes green tea")
    )
    screenshot(page, "assistant-remembered")
    saved = memory_current_get(workspace=tenant.workspace)
    assert saved.version == 2
    assert saved.content.splitlines() == ["- likes tea", "- likes green tea"]
    assert (revision(tenant, 2).author_kind, revision(tenant, 2).change_kind) == (
        "automatic",
        "capture",
    )
    admission = Admission.objects.get(conversation__workspace=tenant.workspace)
    page_session = KeySession.objects.get(workspace=tenant.workspace, user=tenant.member)
    assert admission.status == Admission.Status.COMMITTED
    assert admission.committed_revision == revision(tenant, 2)
    assert admission.key_session == page_session
    # Only the page's own acknowledged Saves are reported: it had made none.
    assert (admission.acknowledged_version, admission.save_in_flight) == (0, False)

    receipt.get_by_role("link", name="revision 2").last.click()
    expect(page.locator("#revision-detail .diff-added")).to_have_text(
        re.compile("- likes green tea")
    )
    screenshot(page, "changes-captured-revision")


def test_remember_in_read_only_becomes_a_proposal_that_apply_saves(
    browser_context, live_server, tenant
):
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- likes tea\n"
    )
    page = open_frame(browser_context, live_server, tenant)

    send(page, "remember likes green tea")

    proposals = page.locator("#proposals")
    expect(proposals).to_be_visible()
    proposal = proposals.locator(".proposal")
    expect(proposal).to_have_count(1)
    expect(proposal).to_contain_text("Add “- likes green tea”")
    turn = page.locator("#transcript .turn").last
    expect(turn.locator(".receipt")).to_contain_text("Suggested a change")
    expect(turn.locator(".remembered")).to_have_count(0)
    screenshot(page, "assistant-proposal")
    assert memory_current_get(workspace=tenant.workspace).version == 1
    assert Proposal.objects.get(workspace=tenant.workspace).status == Proposal.Status.OPEN

    proposal.get_by_role("button", name=re.compile("^Apply")).click()

    status = page.locator("#assistant-status")
    expect(status).to_have_text("Applied. Memory is now version 2, saved as your change.")
    expect(status).to_be_focused()
    expect(proposals).to_be_hidden()
    expect(page.locator("#memory-version")).to_have_text("2")
    expect(page.get_by_label("Memory document (Markdown)")).to_have_value(
        "- likes tea\n- likes green tea\n"
    )
    screenshot(page, "assistant-applied")
    saved = memory_current_get(workspace=tenant.workspace)
    assert (saved.version, saved.content) == (2, "- likes tea\n- likes green tea\n")
    applied = revision(tenant, 2)
    assert (applied.author, applied.author_kind, applied.change_kind) == (
        tenant.member,
        "human",
        "save",
    )
    assert Proposal.objects.get(workspace=tenant.workspace).status == Proposal.Status.APPLIED


def apply_after_memory_moved(page, tenant):
    """Ask for a memory change that becomes a proposal (memory is in Read only), move memory
    on to version 2 behind the page's back, then press Apply: the proposal and the status."""
    send(page, "remember likes green tea")
    proposal = page.locator("#proposals .proposal")
    expect(proposal).to_have_count(1)
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=1, content="- likes cocoa\n"
    )
    proposal.get_by_role("button", name=re.compile("^Apply")).click()
    return proposal, page.locator("#assistant-status")


def test_apply_after_memory_moved_shows_the_newer_text_and_applies_on_the_next_press(
    browser_context, live_server, tenant
):
    workspace = tenant.workspace
    memory_save(workspace=workspace, author=tenant.member, base_version=0, content="- likes tea\n")
    page = open_frame(browser_context, live_server, tenant)
    proposal, status = apply_after_memory_moved(page, tenant)

    expect(status).to_have_text(
        "Not applied: Memory changed to version 2; the newer text is shown. Press Apply again "
        "to apply the suggestion to it. (VERSION_CONFLICT)"
    )
    expect(page.get_by_label("Memory document (Markdown)")).to_have_value("- likes cocoa\n")
    expect(proposal).to_have_count(1)
    assert Proposal.objects.get(workspace=workspace).status == Proposal.Status.OPEN

    proposal.get_by_role("button", name=re.compile("^Apply")).click()
    expect(status).to_have_text("Applied. Memory is now version 3, saved as your change.")
    expect(page.locator("#proposals")).to_be_hidden()
    assert memory_current_get(workspace=workspace).version == 3


def test_an_apply_pressed_while_a_message_is_answered_keeps_its_own_outcome(
    browser_context, live_server, tenant
):
    """The send's closing summary does not write over what a later Apply said: the
    receipts the send waits for are held until the Apply has answered."""
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- likes tea\n"
    )
    page = open_frame(browser_context, live_server, tenant)
    held = []
    page.route("**/memory-receipts*", lambda route: held.append(route))
    _, status = apply_after_memory_moved(page, tenant)
    expect(status).to_contain_text("Not applied: Memory changed to version 2")
    assert held
    for route in held:
        route.continue_()
    page.unroute("**/memory-receipts*")
    expect(page.locator("#transcript .turn .receipt")).to_have_count(1)

    assert page.evaluate("document.getElementById('assistant-status').textContent").startswith(
        "Not applied: Memory changed to version 2"
    )


def test_apply_pressed_twice_while_a_save_is_on_its_way_applies_once(
    browser_context, live_server, tenant
):
    """Apply waits for a Save in flight before it writes; its buttons were off only once it
    wrote, so a second press in that wait sent the suggestion a second time."""
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- likes tea\n"
    )
    page = open_frame(browser_context, live_server, tenant)
    send(page, "remember likes green tea")
    proposal = page.locator("#proposals .proposal")
    expect(proposal).to_have_count(1)
    applies: list[str] = []

    def count_apply(request: Request) -> None:
        if "/apply" in request.url:
            applies.append(request.url)

    page.on("request", count_apply)
    held = []
    page.route(re.compile(r".*/memory$"), lambda route: held.append(route), times=1)
    page.get_by_label("Memory document (Markdown)").fill("- likes tea\n- likes cake\n")
    page.get_by_role("button", name="Save", exact=True).click()
    page.wait_for_timeout(200)
    assert len(held) == 1

    apply = proposal.get_by_role("button", name=re.compile("^Apply"))
    apply.click()
    expect(apply).to_be_disabled()
    # The draft is not acknowledged yet, so Apply asks first; discarded, Apply then waits for
    # the Save on its way, and a second press would not ask (nothing is unsaved any more).
    page.locator("#draft-dialog").get_by_role("button", name="Discard").click()
    expect(apply).to_be_disabled()
    apply.click(force=True)
    held[0].continue_()

    expect(page.locator("#assistant-status")).to_contain_text("Applied.")
    assert len(applies) == 1
    assert Proposal.objects.get(workspace=tenant.workspace).status == Proposal.Status.APPLIED
