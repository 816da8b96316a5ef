"""Team memory in a real browser: create a document in a space, list it, edit it, meet a
second writer's change in the conflict view with the draft kept, resolve, delete."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, WriterKind, space_document_write
from workspaces.tests.browser import open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def test_a_space_document_is_created_edited_through_a_conflict_and_deleted(
    browser_context, live_server, tenant
):
    handle = SpaceHandle(
        visibility=Visibility.PROJECT, name="notes", tenant_id=tenant.team.pk, project="my.app"
    )
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    expect(page.get_by_text("No documents in this space yet.")).to_be_visible()
    expect(page.get_by_label("Project", exact=True)).to_be_hidden()

    page.get_by_label("Visibility", exact=True).select_option("project")
    expect(page.get_by_label("Project", exact=True)).to_be_visible()
    expect(page.get_by_label("Bot", exact=True)).to_be_hidden()
    page.get_by_label("Project", exact=True).fill("my.app")
    page.get_by_role("button", name="Open space").click()
    expect(page.locator("#space-label")).to_have_text("project space “notes” (project my.app)")

    page.get_by_label("New document at path").fill("ops/deploys.md")
    page.get_by_role("button", name="Create").click()
    editor = page.get_by_label("Document text (Markdown)")
    first = "---\ntitle: Deploys\ntags: [ops, ci]\n---\nShip on Tuesdays.\n"
    editor.fill(first)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#space-status")).to_have_text("Saved. The server holds version 1.")
    row = page.locator("#space-documents tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Deploys")
    expect(row).to_contain_text("ops, ci")
    expect(row).to_contain_text(f"user:{tenant.member.pk}")
    expect(page.locator("#space-usage-space-text")).to_contain_text(f"{len(first.encode())} of")
    screenshot(page, "spaces-list")

    editor.fill("---\ntitle: Deploys\ntags: [ops, ci]\n---\nShip on Wednesdays.\n")
    other = "---\ntitle: Deploys\ntags: [ops]\n---\nShip on Thursdays.\n"
    bot = SpaceWriter(kind=WriterKind.BOT, ident="9", tenant_id=tenant.team.pk, user=None)
    space_document_write(
        handle=handle, path="ops/deploys.md", body=other.encode(), expected_revision=1, writer=bot
    )
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator("#space-conflict")).to_be_visible()
    expect(page.locator("#space-status")).to_contain_text("VERSION_CONFLICT")
    expect(page.locator("#space-conflict-theirs")).to_have_text(other)
    expect(editor).to_have_value("---\ntitle: Deploys\ntags: [ops, ci]\n---\nShip on Wednesdays.\n")
    screenshot(page, "spaces-conflict")

    page.get_by_role("button", name="Keep mine (save again on their revision)").click()
    expect(page.locator("#space-status")).to_have_text("Saved. The server holds version 3.")
    expect(page.locator("#space-conflict")).to_be_hidden()
    stored = store_get().read(handle, "ops/deploys.md")
    assert stored is not None
    assert (stored.meta.revision, stored.body) == (
        3,
        b"---\ntitle: Deploys\ntags: [ops, ci]\n---\nShip on Wednesdays.\n",
    )

    page.get_by_role("button", name="Delete").click()
    expect(page.locator("#space-list-status")).to_have_text("Deleted ops/deploys.md.")
    expect(page.get_by_text("No documents in this space yet.")).to_be_visible()
    expect(page.locator("#space-editor")).to_be_hidden()
    assert store_get().list(handle) == []
    screenshot(page, "spaces-deleted")
