"""Notes in a real browser: create, edit, move, delete and restore, each one compare-and-set
request; the memory document never shows up as a note."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from memory.models import MEMORY_PATH
from memory.services import memory_save
from workspaces.models import File
from workspaces.selectors import file_read_text, workspace_data_key
from workspaces.tests.browser import (
    open_page,
    requires_chromium,
    screenshot,
    sign_in,
)

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def note_text(tenant, path: str) -> tuple[int, str]:
    data_key = workspace_data_key(workspace=tenant.workspace)
    assert data_key is not None
    revision, text = file_read_text(workspace=tenant.workspace, path=path, data_key=data_key)
    return revision.version, text


def test_a_note_is_created_edited_moved_deleted_and_restored(browser_context, live_server, tenant):
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="m\n")
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/notes/")
    expect(page.get_by_text(MEMORY_PATH)).to_have_count(0)

    page.get_by_label("Path").fill("ideas/plan.md")
    page.get_by_label("Text").fill("first idea\n")
    page.get_by_role("button", name="Create").click()

    expect(page.get_by_role("heading", name="ideas/plan.md")).to_be_visible()
    page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    editor = page.get_by_label("Note text (Markdown)")
    expect(editor).to_have_value("first idea\n")
    editor.fill("first idea\nsecond idea\n")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#note-status")).to_have_text("Saved. The server holds version 2.")
    assert note_text(tenant, "ideas/plan.md") == (2, "first idea\nsecond idea\n")

    page.get_by_label("Move to path").fill("archive/plan.md")
    page.get_by_role("button", name="Move").click()
    expect(page.get_by_role("heading", name="archive/plan.md")).to_be_visible()
    assert note_text(tenant, "archive/plan.md") == (2, "first idea\nsecond idea\n")
    assert not File.objects.filter(workspace=tenant.workspace, path="ideas/plan.md").exists()
    page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    screenshot(page, "note-editor")

    page.get_by_role("button", name="Delete").click()
    expect(page.locator("#note-status")).to_contain_text("Deleted.")
    assert File.objects.get(workspace=tenant.workspace, path="archive/plan.md").is_deleted

    page.get_by_role("button", name="Restore").click()
    expect(page.locator("#note-status")).to_have_text("Restored at version 2.")
    expect(editor).to_have_value("first idea\nsecond idea\n")
    assert not File.objects.get(workspace=tenant.workspace, path="archive/plan.md").is_deleted

    page.get_by_role("link", name="All notes").click()
    expect(page.get_by_role("link", name="archive/plan.md")).to_be_visible()
    expect(page.get_by_text(re.compile(r"\.zudotext"))).to_have_count(0)
    screenshot(page, "notes")


def test_a_save_over_a_note_deleted_in_another_tab_says_so_and_keeps_the_draft(
    browser_context, live_server, tenant
):
    """A save's conflict does not say the note was deleted (only a delete, restore or move
    does): the page must not offer to compare with a text it cannot load, and Restore must
    not overwrite the draft it kept."""
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, f"/workspaces/{tenant.workspace.pk}/notes/")
    page.get_by_label("Path").fill("idées/plan.md")
    page.get_by_label("Text").fill("first idea\n")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="idées/plan.md")).to_be_visible()
    page.wait_for_selector("html[data-frame-ready='1']", state="attached")
    other = open_page(browser_context, page.url)
    other.get_by_role("button", name="Delete").click()
    expect(other.locator("#note-status")).to_contain_text("Deleted.")

    page.bring_to_front()
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    editor = page.get_by_label("Note text (Markdown)")
    editor.fill("my draft ça\n")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator("#note-status")).to_have_text(
        "Not saved: It was deleted elsewhere first. Your draft is kept: Restore brings the "
        "note back, then Save. (VERSION_CONFLICT)"
    )
    expect(page.locator("#note-conflict")).to_be_hidden()
    expect(editor).to_have_value("my draft ça\n")
    page.get_by_role("button", name="Restore").click()
    expect(page.locator("#note-status")).to_have_text("Restored at version 1.")
    expect(editor).to_have_value("my draft ça\n")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#note-status")).to_have_text("Saved. The server holds version 2.")
    assert note_text(tenant, "idées/plan.md") == (2, "my draft ça\n")
    assert script_errors == []
