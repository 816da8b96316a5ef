"""A message sent while the page's own memory Save is in flight, in a real browser: the page
waits for that Save (at most five seconds) before sending, and `X-Memory-State` then reports
what the page had acknowledged and whether a Save was still in flight.

The Save is held in the browser (`page.route`) and the page's clock is Playwright's fake
one, paused: the five seconds pass only when the test says so, never with the machine's load.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from playwright.sync_api import Page, Request, Route, expect

from automation.models import Admission
from memory.selectors import memory_current_get
from memory.services import memory_save
from workspaces.tests.browser import open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]

SEND_WAIT_MS = 5_000
WAITING = "Waiting for your save to finish before sending…"


class HeldSaves:
    """Holds every memory Save (PUT) the page makes until the test releases it."""

    def __init__(self, page: Page, memory_url: str) -> None:
        self.routes: list[Route] = []
        self.holding = True
        page.route(re.compile(re.escape(memory_url) + r"$"), self._handle)

    def _handle(self, route: Route) -> None:
        if self.holding and route.request.method == "PUT":
            self.routes.append(route)
        else:
            route.continue_()

    def release(self) -> None:
        self.holding = False
        for route in self.routes:
            route.continue_()


def is_send(request: Request) -> bool:
    return request.method == "POST" and request.url.endswith("/messages")


def open_frame_with_a_paused_clock(context, live_server, tenant) -> tuple[Page, HeldSaves]:
    start = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    context.clock.install(time=start)
    sign_in(context, live_server, tenant.member)
    page = open_page(context, f"/workspaces/{tenant.workspace.pk}/memory/")
    page.wait_for_selector("#assistant[data-ready='1']", state="attached")
    page.clock.pause_at(start + timedelta(hours=1))
    memory_url = reverse("memory-document", kwargs={"workspace_id": tenant.workspace.pk})
    return page, HeldSaves(page, memory_url)


def save(page: Page, text: str) -> None:
    page.get_by_label("Memory document (Markdown)").fill(text)
    page.locator("#memory-save").click()


def send_and_wait_all_but_the_last_millisecond(page: Page, text: str) -> None:
    """Send while a Save is held in flight; the page is still waiting 1 ms before the end."""
    sent: list[Request] = []
    page.on("request", lambda request: sent.append(request) if is_send(request) else None)
    expect(page.locator("#memory-save")).to_be_disabled()
    page.get_by_label("Message to the assistant").fill(text)
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#assistant-status")).to_have_text(WAITING)

    page.clock.run_for(SEND_WAIT_MS - 1)

    expect(page.locator("#assistant-status")).to_have_text(WAITING)
    assert sent == []


@pytest.fixture
def memory_v1(tenant):
    return memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- likes tea\n"
    )


def test_a_send_waits_for_the_in_flight_save_and_reports_it_acknowledged(
    browser_context, live_server, tenant, memory_v1
):
    page, held = open_frame_with_a_paused_clock(browser_context, live_server, tenant)
    save(page, "- likes tea\n- drinks tea black\n")

    send_and_wait_all_but_the_last_millisecond(page, "how do you take your tea?")
    assert not Admission.objects.filter(conversation__workspace=tenant.workspace).exists()
    screenshot(page, "assistant-waiting-for-save")

    with page.expect_request(is_send) as request_info:
        held.release()

    assert request_info.value.headers["x-memory-state"] == "version=2; saving=0; conflict=0"
    expect(page.locator("#memory-version")).to_have_text("2")
    turn = page.locator("#transcript .turn").last
    expect(turn).to_contain_text("- drinks tea black")
    expect(turn.locator(".receipt")).to_contain_text("Used memory revision 2")
    admission = Admission.objects.get(conversation__workspace=tenant.workspace)
    assert (admission.acknowledged_version, admission.save_in_flight) == (2, False)
    assert (admission.recall_status, admission.recall_version) == ("provided", 2)
    assert memory_current_get(workspace=tenant.workspace).version == 2


def test_after_five_seconds_the_send_goes_with_the_save_still_in_flight(
    browser_context, live_server, tenant, memory_v1
):
    page, held = open_frame_with_a_paused_clock(browser_context, live_server, tenant)
    held.holding = False
    save(page, "- likes tea\n- drinks tea black\n")
    expect(page.locator("#memory-version")).to_have_text("2")
    held.holding = True
    save(page, "- likes tea\n- drinks tea black\n- no sugar\n")

    send_and_wait_all_but_the_last_millisecond(page, "how do you take your tea?")
    with page.expect_request(is_send) as request_info:
        page.clock.run_for(1)

    # Only the acknowledged version 2 is reported, never the draft held in flight.
    assert request_info.value.headers["x-memory-state"] == "version=2; saving=1; conflict=0"
    turn = page.locator("#transcript .turn").last
    expect(turn.locator(".receipt")).to_contain_text(
        "Memory withheld: your save was still in flight when you sent this."
    )
    screenshot(page, "assistant-sent-while-saving")
    admission = Admission.objects.get(conversation__workspace=tenant.workspace)
    assert (admission.acknowledged_version, admission.save_in_flight) == (2, True)
    assert admission.recall_status == "pending"

    held.release()

    expect(page.locator("#memory-version")).to_have_text("3")
    assert memory_current_get(workspace=tenant.workspace).content.endswith("- no sugar\n")
