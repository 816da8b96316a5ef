"""History, merging and search in a real browser: Undo steps back through history, an old
revision restored from Changes, a reviewed three-way merge of two tabs that both added
lines, the notice a stale tab gets on focus, and search finding a note. Each checks the page
and the persisted state, and leaves screenshots (1280 and 375 px) in test-artifacts/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memory.documents import ActorKind, DocumentActor, document_write
from memory.models import MEMORY_PATH
from memory.selectors import memory_current_get
from memory.services import memory_save
from workspaces.models import FileVersion, WorkspaceMembership
from workspaces.tests.browser import NARROW, open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]

EDITOR = "Memory document (Markdown)"


def frame_url(tenant) -> str:
    return f"/workspaces/{tenant.workspace.pk}/memory/"


def save_versions(tenant, *texts: str) -> None:
    for base, text in enumerate(texts):
        memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=base, content=text
        )


def change_kind(tenant, version: int) -> str:
    return FileVersion.objects.get(
        file__workspace=tenant.workspace, file__path=MEMORY_PATH, version=version
    ).change_kind


def test_a_second_undo_steps_further_back_instead_of_redoing(browser_context, live_server, tenant):
    save_versions(tenant, "- tea\n", "- coffee\n", "- cocoa\n")
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, frame_url(tenant))
    undo = page.get_by_role("button", name="Undo")

    undo.click()
    expect(page.locator("#memory-status")).to_have_text(
        "Undone. Version 4 restores the text of version 2."
    )
    undo.click()

    expect(page.locator("#memory-status")).to_have_text(
        "Undone. Version 5 restores the text of version 1."
    )
    expect(page.get_by_label(EDITOR)).to_have_value("- tea\n")
    expect(undo).to_be_disabled()
    page.reload()
    page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    expect(page.get_by_role("button", name="Undo")).to_be_disabled()
    held = memory_current_get(workspace=tenant.workspace)
    assert (held.version, held.content) == (5, "- tea\n")
    assert [change_kind(tenant, v) for v in (4, 5)] == ["undo", "undo"]


def test_restore_this_version_from_changes_makes_it_the_newest(
    browser_context, live_server, tenant
):
    save_versions(tenant, "- tea\n", "- coffee\n", "- cocoa\n")
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/changes/")
    page.get_by_role("link", name="Version 1", exact=True).click()
    detail = page.locator("#revision-detail")
    expect(detail.get_by_role("heading", name="Version 1")).to_be_focused()

    detail.get_by_role("button", name="Restore this version").click()

    page.wait_for_url(re.compile(r"/changes/4/$"))
    expect(
        page.locator("#revision-detail").get_by_role("heading", name="Version 4")
    ).to_be_visible()
    expect(page.locator("#revision-detail")).to_contain_text("This is the current version.")
    expect(page.locator(".revision-row")).to_have_count(4)
    screenshot(page, "changes-restored")
    held = memory_current_get(workspace=tenant.workspace)
    assert (held.version, held.content) == (4, "- tea\n")
    assert change_kind(tenant, 4) == "undo"


def test_restore_over_a_newer_save_is_refused_then_retried(browser_context, live_server, tenant):
    save_versions(tenant, "- tea\n", "- coffee\n")
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/changes/1/")
    save_versions_from = memory_current_get(workspace=tenant.workspace).version
    memory_save(
        workspace=tenant.workspace,
        author=tenant.admin,
        base_version=save_versions_from,
        content="- cocoa\n",
    )
    restore = page.get_by_role("button", name="Restore this version")

    restore.click()

    expect(page.locator("#restore-status")).to_contain_text(
        "memory changed to version 3 since this page loaded"
    )
    assert memory_current_get(workspace=tenant.workspace).version == 3
    restore.click()
    page.wait_for_url(re.compile(r"/changes/4/$"))
    assert memory_current_get(workspace=tenant.workspace).content == "- tea\n"


def test_two_tabs_that_both_added_lines_merge_to_keep_both_after_review(
    browser_context, live_server, tenant
):
    save_versions(tenant, "# Preferences\n- likes tea\n")
    sign_in(browser_context, live_server, tenant.member)
    first = open_page(browser_context, frame_url(tenant))
    second = open_page(browser_context, frame_url(tenant))
    second.get_by_label(EDITOR).fill("# Preferences\n- likes tea\n- short answers\n")
    second.get_by_role("button", name="Save", exact=True).click()
    expect(second.locator("#memory-status")).to_have_text("Saved. The server holds version 2.")

    first.get_by_label(EDITOR).fill("# Preferences\n- walks at noon\n- likes tea\n")
    first.get_by_role("button", name="Save", exact=True).click()
    expect(first.locator("#memory-conflict")).to_be_visible()
    expect(first.locator("#memory-conflict-theirs mark.line-differs")).to_have_text(
        "- short answers\n"
    )
    expect(first.locator("#memory-conflict-mine mark.line-differs")).to_have_text(
        "- walks at noon\n"
    )
    screenshot(first, "memory-conflict-highlighted")
    first.get_by_role("button", name="Merge both (review before saving)").click()

    merged = first.get_by_label("Merged text (edit as needed)")
    expect(merged).to_have_value("# Preferences\n- walks at noon\n- likes tea\n- short answers\n")
    expect(first.locator("#memory-merge-summary")).to_contain_text("were combined")
    assert memory_current_get(workspace=tenant.workspace).version == 2
    screenshot(first, "memory-merge-review")
    first.get_by_role("button", name="Save merged text").click()

    expect(first.locator("#memory-status")).to_have_text("Saved. The server holds version 3.")
    expect(first.locator("#memory-conflict")).to_be_hidden()
    held = memory_current_get(workspace=tenant.workspace)
    assert (held.version, held.content) == (
        3,
        "# Preferences\n- walks at noon\n- likes tea\n- short answers\n",
    )


def test_lines_both_tabs_changed_are_marked_and_must_be_settled_before_saving(
    browser_context, live_server, tenant
):
    save_versions(tenant, "- likes tea\n")
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, frame_url(tenant))
    memory_save(
        workspace=tenant.workspace, author=tenant.admin, base_version=1, content="- likes cocoa\n"
    )
    page.get_by_label(EDITOR).fill("- likes coffee\n")
    page.keyboard.press("Control+s")
    page.get_by_role("button", name="Merge both (review before saving)").click()
    merged = page.get_by_label("Merged text (edit as needed)")
    expect(merged).to_have_value(
        "<<<<<<< your draft\n- likes coffee\n=======\n- likes cocoa\n>>>>>>> saved version 2\n"
    )

    page.get_by_role("button", name="Save merged text").click()

    expect(page.locator("#memory-status")).to_contain_text("still has <<<<<<<")
    assert memory_current_get(workspace=tenant.workspace).version == 2
    merged.fill("- likes coffee\n- likes cocoa\n")
    page.get_by_role("button", name="Save merged text").click()
    expect(page.locator("#memory-status")).to_have_text("Saved. The server holds version 3.")
    assert (
        memory_current_get(workspace=tenant.workspace).content == "- likes coffee\n- likes cocoa\n"
    )


def test_a_stale_tab_is_told_on_focus_that_a_newer_version_exists(new_context, live_server, tenant):
    save_versions(tenant, "- likes tea\n")
    context = new_context(viewport=NARROW)
    sign_in(context, live_server, tenant.member)
    page = open_page(context, frame_url(tenant))
    memory_save(
        workspace=tenant.workspace, author=tenant.admin, base_version=1, content="- likes cocoa\n"
    )
    notice = page.locator("#memory-stale")
    expect(notice).to_be_hidden()

    page.evaluate("window.dispatchEvent(new Event('focus'))")

    expect(notice).to_be_visible()
    expect(notice).to_contain_text("A newer version (2) was saved elsewhere")
    assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
    screenshot(page, "memory-stale-notice-375px")
    notice.get_by_role("button", name="Show version 2").click()
    expect(page.get_by_label(EDITOR)).to_have_value("- likes cocoa\n")
    expect(page.locator("#memory-version")).to_have_text("2")
    expect(notice).to_be_hidden()


def test_search_finds_a_note_and_memory(browser_context, live_server, tenant):
    membership = WorkspaceMembership.objects.get(workspace=tenant.workspace, user=tenant.member)
    document_write(
        actor=DocumentActor.of_member(membership, ActorKind.PERSON),
        raw_path="trips/kyoto.md",
        content="Book the ryokan in Kyoto\n",
        base_version=0,
    )
    save_versions(tenant, "- prefers Kyoto in autumn\n")
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, frame_url(tenant))

    search = page.get_by_role("search", name="Search notes and memory")
    search.get_by_label("Search notes and memory").fill("kyoto")
    search.get_by_role("button", name="Search").click()

    results = page.locator(".search-results li")
    expect(page.get_by_role("heading", name="2 found for “kyoto”")).to_be_visible()
    expect(results.nth(0).get_by_role("link", name="Memory")).to_be_visible()
    expect(results.nth(1)).to_contain_text("Book the ryokan in Kyoto")
    screenshot(page, "search-results")
    results.nth(1).get_by_role("link", name="trips/kyoto.md").click()
    expect(page.get_by_label("Note text (Markdown)")).to_have_value("Book the ryokan in Kyoto\n")
