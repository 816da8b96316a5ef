"""The Memory frame in a real browser: Save, a conflict between two tabs, Clear over an
unsaved draft, Undo (and its diff in Changes), and a mode change. One test per flow; each
checks the page and the persisted state, and leaves screenshots in test-artifacts/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from memory.models import MEMORY_PATH, MemoryPolicy
from memory.selectors import memory_current_get, memory_policy_get
from memory.services import memory_save
from workspaces.models import FileVersion, KeySession
from workspaces.tests.browser import (
    NARROW,
    open_page,
    requires_chromium,
    screenshot,
    sign_in,
)

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def frame_url(tenant) -> str:
    return f"/workspaces/{tenant.workspace.pk}/memory/"


def revision(tenant, version: int) -> FileVersion:
    return FileVersion.objects.get(
        file__workspace=tenant.workspace, file__path=MEMORY_PATH, version=version
    )


def test_save_shows_the_exact_acknowledged_version(browser_context, live_server, tenant):
    memory_save(
        workspace=tenant.workspace, author=tenant.admin, base_version=0, content="- likes tea\n"
    )
    page = open_page(browser_context, "/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    screenshot(page, "sign-in")
    page.get_by_label("Username").fill(tenant.member.username)
    page.get_by_label("Password").fill("pw-member-123")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    screenshot(page, "workspace-list")
    page.get_by_role("link", name=tenant.workspace.name).click()
    page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    editor = page.get_by_label("Memory document (Markdown)")
    expect(editor).to_have_value("- likes tea\n")
    expect(page.locator("#memory-version")).to_have_text("1")

    # Over the recall bound: a warning, never a cut.
    editor.fill("é" * 4097)
    expect(page.locator("#memory-bytes")).to_have_text("8194")
    expect(page.locator("#memory-oversize")).to_be_visible()
    editor.fill("- likes tea\n- prefers short answers\n")
    expect(page.locator("#memory-oversize")).to_be_hidden()
    expect(page.locator("#memory-dirty")).to_be_visible()
    page.get_by_role("button", name="Save", exact=True).click()

    status = page.locator("#memory-status")
    expect(status).to_have_text("Saved. The server holds version 2.")
    expect(status).to_be_focused()
    expect(page.locator("#memory-version")).to_have_text("2")
    expect(page.locator("#memory-dirty")).to_be_hidden()
    screenshot(page, "memory-frame-saved")
    saved = memory_current_get(workspace=tenant.workspace)
    assert (saved.version, saved.content) == (2, "- likes tea\n- prefers short answers\n")
    assert (revision(tenant, 2).author, revision(tenant, 2).change_kind) == (tenant.member, "save")
    assert KeySession.objects.filter(workspace=tenant.workspace, user=tenant.member).count() == 1


def test_a_save_that_lost_to_another_tab_shows_the_conflict_and_keeps_the_draft(
    browser_context, live_server, tenant
):
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- likes tea\n"
    )
    sign_in(browser_context, live_server, tenant.member)
    first = open_page(browser_context, frame_url(tenant))
    second = open_page(browser_context, frame_url(tenant))
    second.bring_to_front()
    second.get_by_label("Memory document (Markdown)").fill("- likes coffee\n")
    second.get_by_role("button", name="Save", exact=True).click()
    expect(second.locator("#memory-status")).to_have_text("Saved. The server holds version 2.")

    first.bring_to_front()
    first_editor = first.get_by_label("Memory document (Markdown)")
    first_editor.fill("- likes green tea\n")
    first.get_by_role("button", name="Save", exact=True).click()

    expect(first.locator("#memory-status")).to_have_text(
        "Not saved: It was changed elsewhere first (version 2 is saved now). Compare, then "
        "save again. Your draft is kept. (VERSION_CONFLICT)"
    )
    conflict = first.locator("#memory-conflict")
    expect(conflict).to_be_visible()
    expect(first.locator("#memory-conflict-theirs")).to_have_text("- likes coffee\n")
    expect(first.locator("#memory-conflict-mine")).to_have_text("- likes green tea\n")
    expect(first_editor).to_have_value("- likes green tea\n")
    expect(first.locator("#memory-version")).to_have_text("1")
    screenshot(first, "memory-frame-conflict")
    held = memory_current_get(workspace=tenant.workspace)
    assert (held.version, held.content) == (2, "- likes coffee\n")

    first.get_by_role("button", name="Keep mine (save again on their version)").click()

    expect(first.locator("#memory-status")).to_have_text("Saved. The server holds version 3.")
    expect(conflict).to_be_hidden()
    held = memory_current_get(workspace=tenant.workspace)
    assert (held.version, held.content) == (3, "- likes green tea\n")


def test_a_draft_outlives_a_session_that_ended_and_a_sign_in_in_another_tab(
    browser_context, live_server, tenant
):
    """Signing in again rotates the CSRF cookie: the page that kept the draft must send the
    new token, or its every retry is refused and only a reload (losing the draft) helps."""
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, frame_url(tenant))
    editor = page.get_by_label("Memory document (Markdown)")
    editor.fill("- do not lose me\n")
    # The session ends (it expired, or was flushed elsewhere); the CSRF cookie stays.
    browser_context.clear_cookies(name="sessionid")

    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#memory-status")).to_contain_text("(AUTHENTICATION_REQUIRED)")
    expect(page.locator("#memory-status")).to_contain_text("in another tab")

    other = open_page(browser_context, "/accounts/login/")
    other.get_by_label("Username").fill(tenant.member.username)
    other.get_by_label("Password").fill("pw-member-123")
    other.get_by_role("button", name="Sign in").click()
    expect(other.get_by_role("heading", name="Your workspaces")).to_be_visible()
    other.close()

    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#memory-status")).to_have_text("Saved. The server holds version 1.")
    held = memory_current_get(workspace=tenant.workspace)
    assert (held.version, held.content) == (1, "- do not lose me\n")


def test_clear_with_an_unsaved_draft_asks_first_on_a_narrow_screen(
    new_context, live_server, tenant
):
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- likes tea\n"
    )
    context = new_context(viewport=NARROW)
    sign_in(context, live_server, tenant.member)
    page = open_page(context, frame_url(tenant))
    assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
    editor = page.get_by_label("Memory document (Markdown)")
    editor.fill("- likes tea\n- a draft\n")
    page.get_by_role("button", name="Clear", exact=True).click()

    dialog = page.get_by_role("dialog", name="Unsaved changes")
    expect(dialog).to_be_visible()
    screenshot(page, "memory-frame-clear-dialog-375px")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(editor).to_have_value("- likes tea\n- a draft\n")
    assert memory_current_get(workspace=tenant.workspace).version == 1

    page.get_by_role("button", name="Clear", exact=True).click()
    dialog.get_by_role("button", name="Discard").click()

    status = page.locator("#memory-status")
    expect(status).to_contain_text("Cleared. The server holds version 2, which is empty.")
    expect(status).to_be_focused()
    expect(editor).to_have_value("")
    screenshot(page, "memory-frame-cleared-375px")
    cleared = memory_current_get(workspace=tenant.workspace)
    assert (cleared.version, cleared.content) == (2, "")
    assert revision(tenant, 2).change_kind == "clear"
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 1


def test_undo_restores_the_previous_revision_as_a_new_one_shown_in_changes(
    browser_context, live_server, tenant
):
    workspace, member = tenant.workspace, tenant.member
    memory_save(workspace=workspace, author=member, base_version=0, content="- likes tea\n")
    memory_save(workspace=workspace, author=member, base_version=1, content="- likes coffee\n")
    sign_in(browser_context, live_server, member)
    page = open_page(browser_context, frame_url(tenant))

    page.get_by_role("button", name="Undo").click()

    expect(page.locator("#memory-status")).to_have_text(
        "Undone. Version 3 restores the text of version 1."
    )
    expect(page.get_by_label("Memory document (Markdown)")).to_have_value("- likes tea\n")
    expect(page.locator("#memory-version")).to_have_text("3")
    restored = memory_current_get(workspace=workspace)
    assert (restored.version, restored.content) == (3, "- likes tea\n")
    assert revision(tenant, 3).change_kind == "undo"

    page.get_by_role("navigation", name="Workspace").get_by_role("link", name="Changes").click()
    # Until the Changes page has loaded, htmx is not wired up and a click navigates instead.
    page.wait_for_url(re.compile(r"/changes/$"))
    page.get_by_role("link", name="Version 2", exact=True).click()
    detail = page.locator("#revision-detail")
    expect(detail.get_by_role("heading", name="Version 2")).to_be_focused()
    expect(detail.locator(".diff-removed")).to_have_text(re.compile("likes tea"))
    expect(detail.locator(".diff-added")).to_have_text(re.compile("likes coffee"))
    expect(page).to_have_url(re.compile(r"/changes/2/$"))
    expect(page.locator(".revision-row")).to_have_count(3)
    screenshot(page, "changes-revision-diff")


def test_a_clear_or_undo_after_memory_moved_changes_nothing_and_says_what_next(
    browser_context, live_server, tenant
):
    workspace, member = tenant.workspace, tenant.member
    memory_save(workspace=workspace, author=member, base_version=0, content="- likes tea\n")
    sign_in(browser_context, live_server, member)
    page = open_page(browser_context, frame_url(tenant))
    editor = page.get_by_label("Memory document (Markdown)")
    status = page.locator("#memory-status")
    retry = page.get_by_role("button", name="Retry Clear")
    expect(retry).to_be_hidden()

    memory_save(workspace=workspace, author=member, base_version=1, content="- likes coffee\n")
    page.get_by_role("button", name="Clear", exact=True).click()
    expect(status).to_have_text(
        "Not cleared: Memory changed to version 2 first, so nothing was cleared. The newer "
        "text is shown; press Retry Clear to clear it. (VERSION_CONFLICT)"
    )
    expect(editor).to_have_value("- likes coffee\n")
    expect(retry).to_be_visible()

    memory_save(workspace=workspace, author=member, base_version=2, content="- likes cocoa\n")
    page.get_by_role("button", name="Undo").click()
    expect(status).to_have_text(
        "Not undone: Memory changed to version 3 first, so nothing changed. The newer text "
        "is shown; press Undo again to step back from it. (VERSION_CONFLICT)"
    )
    expect(editor).to_have_value("- likes cocoa\n")
    assert memory_current_get(workspace=workspace).version == 3

    retry.click()
    expect(status).to_have_text(
        "Cleared. The server holds version 4, which is empty. Undo brings back the text of "
        "version 3."
    )
    expect(retry).to_be_hidden()
    assert memory_current_get(workspace=workspace).content == ""


def test_mode_change_is_a_compare_and_set_of_the_policy(browser_context, live_server, tenant):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, frame_url(tenant))
    expect(page.locator("#memory-mode-current")).to_have_text("Read only")

    page.get_by_label("Auto").check()
    page.get_by_role("button", name="Change mode").click()

    status = page.locator("#memory-mode-status")
    expect(status).to_contain_text("Memory mode is now Auto.")
    expect(status).to_be_focused()
    expect(page.locator("#memory-mode-current")).to_have_text("Auto")
    screenshot(page, "memory-frame-mode-auto")
    policy = memory_policy_get(workspace=tenant.workspace)
    assert (policy.mode, policy.policy_revision) == (MemoryPolicy.Mode.AUTO, 1)

    page.get_by_role("navigation", name="Workspace").get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Your key sessions")).to_be_visible()
    expect(page.get_by_text("this browser", exact=True)).to_be_visible()
    screenshot(page, "settings")
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_enabled is True


# Whether, in `line` of a block's text, the character `first` is drawn left of `second`, by
# the boxes the browser lays them out in.
LEFT_OF = """(block, [line, first, second]) => {
  const node = [...block.childNodes].find((each) => each.textContent.includes(line));
  const start = node.textContent.indexOf(line);
  const left = (character) => {
    const index = node.textContent.indexOf(character, start);
    const range = document.createRange();
    range.setStart(node, index);
    range.setEnd(node, index + 1);
    return range.getBoundingClientRect().left;
  };
  return left(first) < left(second);
}"""


def test_a_right_to_left_line_of_memory_reads_right_to_left(browser_context, live_server, tenant):
    hebrew = "- שלום עולם, מה שלומך?"
    memory_save(
        workspace=tenant.workspace,
        author=tenant.member,
        base_version=0,
        content=f"- likes tea\n{hebrew}\n",
    )
    sign_in(browser_context, live_server, tenant.member)

    page = open_page(browser_context, frame_url(tenant))

    block = page.locator("#memory-preview-block")
    expect(block).to_contain_text(hebrew)
    screenshot(page, "memory-frame-right-to-left")
    # Each line takes the direction of its first letter: the Hebrew line starts on the right
    # (its "-") and ends on the left (its "?"); the English line starts on the left.
    assert block.evaluate(LEFT_OF, [hebrew, "?", "ש"])
    assert block.evaluate(LEFT_OF, [hebrew, "ש", "-"])
    assert block.evaluate(LEFT_OF, ["- likes tea", "-", "l"])
    # The editor lays its lines out the same way (its glyphs cannot be measured).
    editor = page.get_by_label("Memory document (Markdown)")
    assert editor.evaluate("(editor) => getComputedStyle(editor).unicodeBidi") == "plaintext"

    page.goto(f"/workspaces/{tenant.workspace.pk}/changes/1/")
    added = page.locator("#revision-detail .diff-added", has_text=hebrew)
    # In Changes the line's text reads right to left too, its "+" kept in the sign column.
    assert added.locator(".diff-text").evaluate(LEFT_OF, [hebrew, "?", "ש"])
    sign = added.locator(".diff-sign").bounding_box()
    text = added.locator(".diff-text").bounding_box()
    assert sign is not None
    assert text is not None
    assert sign["x"] < text["x"]
    screenshot(page, "changes-right-to-left")


def test_the_memory_download_is_saved_under_its_name_or_its_refusal_said(
    browser_context, live_server, tenant
):
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="- tea\n")
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, frame_url(tenant))
    link = page.get_by_role("link", name="Download memory as Markdown")

    with page.expect_download() as download:
        link.click()
    assert Path(download.value.path()).read_text() == "- tea\n"
    assert download.value.suggested_filename.endswith(".md")

    browser_context.clear_cookies()  # the session ends
    link.click()

    expect(page.locator("#memory-status")).to_have_text(
        re.compile(r"^Not downloaded: You are signed out\..*\(AUTHENTICATION_REQUIRED\)$")
    )
