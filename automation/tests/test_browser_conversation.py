"""The conversation in a real browser, with the default scripted model: the newest answer
stays in view after a send (on a narrow screen, where the transcript outgrows the page),
past conversations can be picked again, Ctrl+Enter sends, and a capture that was refused is
a warning, never a green "answered"."""

from __future__ import annotations

import pytest
from playwright.sync_api import Route, expect

from automation.models import Admission, Conversation
from memory.models import MemoryPolicy
from memory.selectors import memory_current_get
from memory.services import memory_policy_set, memory_save
from workspaces.tests.browser import NARROW, open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def open_frame(context, live_server, tenant):
    sign_in(context, live_server, tenant.member)
    page = open_page(context, f"/workspaces/{tenant.workspace.pk}/memory/#assistant")
    page.wait_for_selector("#assistant[data-ready='1']", state="attached")
    return page


def send_and_wait(page, text: str, turns: int) -> None:
    page.get_by_label("Message to the assistant").fill(text)
    page.get_by_label("Message to the assistant").press("Control+Enter")
    expect(page.locator("#transcript .turn .from-assistant")).to_have_count(turns)


def test_the_newest_answer_is_in_view_after_each_send(new_context, live_server, tenant):
    memory_save(
        workspace=tenant.workspace,
        author=tenant.member,
        base_version=0,
        content="- likes green tea\n- walks at noon\n",
    )
    page = open_frame(new_context(viewport=NARROW), live_server, tenant)

    for turn in range(1, 5):
        send_and_wait(page, f"what do I like to drink? (asking {turn} times)", turn)
        newest = page.locator("#transcript .turn").last
        expect(newest.locator(".from-assistant")).to_be_in_viewport()

    expect(page.locator("#assistant-status")).to_contain_text("The assistant answered.")
    expect(page.locator("#assistant-status")).to_have_attribute("data-kind", "success")
    screenshot(page, "assistant-newest-in-view-375px")
    assert Admission.objects.filter(conversation__workspace=tenant.workspace).count() == 4


def test_a_past_conversation_can_be_picked_again(browser_context, live_server, tenant):
    page = open_frame(browser_context, live_server, tenant)
    send_and_wait(page, "hello from the first conversation", 1)
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator("#assistant-status")).to_have_text("Started a new conversation.")
    send_and_wait(page, "hello from the second conversation", 1)
    picker = page.get_by_label("Show conversation")
    expect(picker.locator("option")).to_have_count(2)

    first = Conversation.objects.filter(workspace=tenant.workspace).order_by("created_at").first()
    assert first is not None
    picker.select_option(str(first.pk))

    expect(page.locator("#transcript .from-you .message-text")).to_have_text(
        ["hello from the first conversation"]
    )
    screenshot(page, "assistant-conversation-picked")
    page.reload()
    page.wait_for_selector("#assistant[data-ready='1']", state="attached")
    expect(page.locator("#transcript .from-you .message-text")).to_have_text(
        ["hello from the second conversation"]
    )


def test_a_refused_capture_is_a_warning_not_a_green_answered(browser_context, live_server, tenant):
    memory_policy_set(
        workspace=tenant.workspace,
        mode=MemoryPolicy.Mode.AUTO,
        expected_revision=0,
        actor=tenant.member,
    )
    # Over the recall bound: the assistant may not add to memory until a person shortens it.
    oversized = "- " + "x" * 9000 + "\n"
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content=oversized)
    page = open_frame(browser_context, live_server, tenant)

    send_and_wait(page, "remember likes green tea", 1)

    status = page.locator("#assistant-status")
    expect(status).to_contain_text("Memory was not changed:")
    expect(status).to_contain_text("(MEMORY_OVERSIZED)")
    expect(status).to_have_attribute("data-kind", "warning")
    receipt = page.locator("#transcript .turn").last.locator(".receipt")
    expect(receipt.locator(".not-remembered")).to_have_text("Not remembered:")
    expect(receipt.locator(".remembered")).to_have_count(0)
    screenshot(page, "assistant-capture-refused")
    assert memory_current_get(workspace=tenant.workspace).version == 1
    admission = Admission.objects.get(conversation__workspace=tenant.workspace)
    assert admission.capture_refusal_code == "MEMORY_OVERSIZED"


def test_a_double_click_on_new_conversation_starts_one(browser_context, live_server, tenant):
    page = open_frame(browser_context, live_server, tenant)
    held: list[Route] = []
    page.route(
        "**/api/v1/agents/assistant/conversations",
        lambda route: held.append(route) if route.request.method == "POST" else route.continue_(),
    )

    page.get_by_role("button", name="New conversation").dblclick()

    # While the first is on its way, the button is off: a second would start an empty one.
    expect(page.get_by_role("button", name="New conversation")).to_be_disabled()
    page.wait_for_timeout(200)
    assert len(held) == 1
    held[0].continue_()
    expect(page.locator("#assistant-status")).to_have_text("Started a new conversation.")
    expect(page.get_by_role("button", name="New conversation")).to_be_enabled()
    assert Conversation.objects.filter(workspace=tenant.workspace).count() == 1
