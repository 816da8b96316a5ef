"""Team memory in a real browser: create a document in a space, list it, edit it, meet a
second writer's change in the conflict view with the draft kept, resolve, delete; export the
space, preview an archive's import, then import it."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from playwright.sync_api import Route, expect

from memory.spaces.archive import space_export
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import (
    SpaceWriter,
    WriterKind,
    space_document_delete,
    space_document_write,
)
from memory.tests.test_space_archive import archive_of, layout
from workspaces.tests.browser import (
    NARROW,
    WIDE,
    assert_within_width,
    open_page,
    requires_chromium,
    screenshot,
    sign_in,
)

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
    expect(editor).to_be_focused()
    expect(page.get_by_label("New document at path")).to_have_value("")
    first = "---\ntitle: Deploys\ntags: [ops, ci]\n---\nShip on Tuesdays.\n"
    editor.fill(first)
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#space-status")).to_have_text("Saved. The server holds version 1.")
    row = page.locator("#space-documents tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Deploys")
    expect(row).to_contain_text("ops, ci")
    # The member's name, not the stored attribution `user:<id>`.
    expect(row.locator("td").nth(4)).to_have_text(tenant.member.username)
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


def test_a_save_over_a_document_deleted_elsewhere_says_so_and_keep_mine_recreates_it(
    browser_context, live_server, tenant
):
    """A save's conflict over a deleted document says only `currentVersion` 0, and its text
    reads as NOT_FOUND: the page says it was deleted, not that "version 0" was saved."""
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    bot = SpaceWriter(kind=WriterKind.BOT, ident="9", tenant_id=tenant.team.pk, user=None)
    space_document_write(
        handle=handle, path="ops/deploys.md", body=b"Fridays no.\n", expected_revision=0, writer=bot
    )
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    page.get_by_role("button", name="Open space").click()
    page.get_by_role("button", name="ops/deploys.md").click()
    editor = page.get_by_label("Document text (Markdown)")
    expect(editor).to_have_value("Fridays no.\n")
    editor.fill("Fridays never.\n")
    space_document_delete(handle=handle, path="ops/deploys.md", expected_revision=1, writer=bot)

    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator("#space-status")).to_have_text(
        "Not saved: It was deleted elsewhere first. Your draft is kept: Keep mine creates it "
        "again. (VERSION_CONFLICT)"
    )
    expect(page.locator("#space-conflict-summary")).to_have_text(
        "It was deleted elsewhere after revision 1, which your draft is based on. Nothing of "
        "yours was written."
    )
    expect(editor).to_have_value("Fridays never.\n")
    page.get_by_role("button", name="Keep mine (save again on their revision)").click()
    # Created again above the revision deleted: version 1 named the text deleted.
    expect(page.locator("#space-status")).to_have_text("Saved. The server holds version 2.")
    stored = store_get().read(handle, "ops/deploys.md")
    assert stored is not None
    assert (stored.meta.revision, stored.body) == (2, b"Fridays never.\n")


def test_a_space_is_exported_and_an_archive_previewed_then_imported(
    browser_context, live_server, tenant
):
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    space_document_write(
        handle=handle, path="a.md", body=b"# Ours\n", expected_revision=0, writer=writer
    )
    archive = archive_of(layout({"a.md": b"# Theirs\n", "b.md": b"# B\n"}))
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    expect(page.locator("#space-documents tr")).to_have_count(1)

    with page.expect_download() as download:
        page.get_by_role("link", name="Export this space").click()
    assert download.value.suggested_filename == "memory-org-notes.tar.gz"
    exported = io.BytesIO()
    space_export(handle=handle, out=exported)
    assert Path(download.value.path()).read_bytes() == exported.getvalue()

    page.get_by_label("Archive to import").set_input_files(
        {"name": "theirs.tar.gz", "mimeType": "application/gzip", "buffer": archive}
    )
    page.get_by_label("When a document already exists").select_option("rename")
    expect(page.get_by_role("button", name="Import", exact=True)).to_be_disabled()
    page.get_by_role("button", name="Preview import").click()
    expect(page.locator("#space-import-summary")).to_have_text(
        "Preview: 1 imported, 0 replaced, 0 skipped, 1 renamed. Nothing is written yet."
    )
    expect(page.locator("#space-import-documents li")).to_have_text(
        ["a.md → a.import.md (renamed)", "b.md (new)"]
    )
    assert [meta.path for meta in store_get().list(handle)] == ["a.md"]
    screenshot(page, "spaces-import-preview")

    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#space-import-status")).to_have_text(
        "Imported: 1 imported, 0 replaced, 0 skipped, 1 renamed."
    )
    expect(page.locator("#space-documents tr")).to_have_count(3)
    expect(page.get_by_role("button", name="Import", exact=True)).to_be_disabled()
    assert [meta.path for meta in store_get().list(handle)] == ["a.import.md", "a.md", "b.md"]

    page.get_by_label("Archive to import").set_input_files(
        {"name": "bad.tar.gz", "mimeType": "application/gzip", "buffer": b"not an archive"}
    )
    page.get_by_role("button", name="Preview import").click()
    expect(page.locator("#space-import-status")).to_have_text(
        "Import preview refused: This file is not an archive that can be imported (not_gzip). "
        "Nothing was imported; export a fresh archive and try again. (ARCHIVE_INVALID)"
    )
    screenshot(page, "spaces-import-done")


def test_an_import_refused_for_its_strategy_names_the_field_and_writes_nothing(
    browser_context, live_server, tenant
):
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    # A strategy the form does not offer, as a page older than the server would send it.
    page.get_by_label("When a document already exists").evaluate(
        "(select) => { select.add(new Option('merge', 'merge')); select.value = 'merge'; }"
    )
    page.get_by_label("Archive to import").set_input_files(
        {
            "name": "theirs.tar.gz",
            "mimeType": "application/gzip",
            "buffer": archive_of(layout({"a.md": b"# A\n"})),
        }
    )

    page.get_by_role("button", name="Preview import").click()

    expect(page.locator("#space-import-status")).to_have_text(
        "Import preview refused: Check “strategy”: Must be one of skip, overwrite, rename. "
        "(VALIDATION_FAILED)"
    )
    expect(page.get_by_role("button", name="Import", exact=True)).to_be_disabled()
    assert store_get().list(handle) == []
    screenshot(page, "spaces-import-strategy-refused")


def test_create_at_a_path_written_since_the_list_loaded_opens_that_document(
    browser_context, live_server, tenant
):
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    bot = SpaceWriter(kind=WriterKind.BOT, ident="9", tenant_id=tenant.team.pk, user=None)
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    page.get_by_role("button", name="Open space").click()
    expect(page.locator("#space-empty")).to_be_visible()
    space_document_write(
        handle=handle, path="ops/deploys.md", body=b"Fridays no.\n", expected_revision=0, writer=bot
    )

    page.get_by_label("New document at path").fill("ops/deploys.md")
    page.get_by_role("button", name="Create").click()

    expect(page.locator("#space-status")).to_have_text(
        "ops/deploys.md already exists: opened it, at revision 1."
    )
    editor = page.get_by_label("Document text (Markdown)")
    expect(editor).to_have_value("Fridays no.\n")
    editor.fill("Fridays never.\n")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#space-status")).to_have_text("Saved. The server holds version 2.")


def test_a_double_click_on_import_imports_the_archive_once(browser_context, live_server, tenant):
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    space_document_write(
        handle=handle, path="a.md", body=b"# Ours\n", expected_revision=0, writer=writer
    )
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    page.get_by_label("Archive to import").set_input_files(
        {
            "name": "theirs.tar.gz",
            "mimeType": "application/gzip",
            "buffer": archive_of(layout({"a.md": b"# Theirs\n"})),
        }
    )
    page.get_by_label("When a document already exists").select_option("rename")
    page.get_by_role("button", name="Preview import").click()
    expect(page.locator("#space-import-documents li")).to_have_text(
        ["a.md → a.import.md (renamed)"]
    )
    held: list[Route] = []
    page.route("**/api/v1/memory/import?*dryRun=0*", lambda route: held.append(route))

    page.get_by_role("button", name="Import", exact=True).dblclick()

    # While the import is on its way, Import is off: a second press would import it again.
    expect(page.get_by_role("button", name="Import", exact=True)).to_be_disabled()
    page.wait_for_timeout(200)
    assert len(held) == 1
    held[0].continue_()
    expect(page.locator("#space-import-status")).to_have_text(
        "Imported: 0 imported, 0 replaced, 0 skipped, 1 renamed."
    )
    expect(page.locator("#space-documents tr")).to_have_count(2)
    assert [meta.path for meta in store_get().list(handle)] == ["a.import.md", "a.md"]


def test_a_space_opened_while_another_is_still_loading_shows_only_its_own_documents(
    browser_context, live_server, tenant
):
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    for name, path in (("slow", "from-slow.md"), ("fast", "from-fast.md")):
        space_document_write(
            handle=SpaceHandle(visibility=Visibility.ORG, name=name, tenant_id=tenant.team.pk),
            path=path,
            body=b"# A document\n",
            expected_revision=0,
            writer=writer,
        )
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    expect(page.locator("#space-label")).to_have_text("org space “notes”")
    held: list[Route] = []
    page.route("**/api/v1/memory/docs?*name=slow*", lambda route: held.append(route))
    space_name = page.get_by_label("Name", exact=True)

    space_name.fill("slow")
    with page.expect_request("**/api/v1/memory/docs?*name=slow*"):
        page.get_by_role("button", name="Open space").click()
    space_name.fill("fast")
    page.get_by_role("button", name="Open space").click()
    expect(page.locator("#space-label")).to_have_text("org space “fast”")
    held[0].continue_()

    # The slow space's answer, arriving last, is dropped: it was not asked for any more.
    page.wait_for_timeout(500)
    expect(page.locator("#space-label")).to_have_text("org space “fast”")
    expect(page.locator("#space-documents tr")).to_have_text([re.compile("from-fast.md")])


def test_a_slow_document_arriving_after_another_was_opened_does_not_replace_it(
    browser_context, live_server, tenant
):
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    for path in ("slow.md", "fast.md"):
        space_document_write(
            handle=handle,
            path=path,
            body=f"# {path}\n".encode(),
            expected_revision=0,
            writer=writer,
        )
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    held: list[Route] = []
    page.route("**/api/v1/memory/doc?*path=slow.md*", lambda route: held.append(route))
    editor = page.get_by_label("Document text (Markdown)")

    with page.expect_request("**/api/v1/memory/doc?*path=slow.md*"):
        page.get_by_role("button", name="slow.md").click()
    page.get_by_role("button", name="fast.md").click()
    expect(editor).to_have_value("# fast.md\n")
    editor.fill("# fast.md\nmy draft\n")
    held[0].continue_()

    page.wait_for_timeout(500)
    expect(page.get_by_role("heading", name="fast.md")).to_be_visible()
    expect(editor).to_have_value("# fast.md\nmy draft\n")


def test_a_slow_document_arriving_after_another_space_was_opened_is_not_opened_there(
    browser_context, live_server, tenant
):
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    space_document_write(
        handle=handle, path="slow.md", body=b"# Slow\n", expected_revision=0, writer=writer
    )
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    held: list[Route] = []
    page.route("**/api/v1/memory/doc?*path=slow.md*", lambda route: held.append(route))

    with page.expect_request("**/api/v1/memory/doc?*path=slow.md*"):
        page.get_by_role("button", name="slow.md").click()
    page.get_by_label("Name", exact=True).fill("other")
    page.get_by_role("button", name="Open space").click()
    expect(page.locator("#space-label")).to_have_text("org space “other”")
    held[0].continue_()

    # Opened there, its Save would have written it into the other space.
    page.wait_for_timeout(500)
    expect(page.locator("#space-editor")).to_be_hidden()


def test_an_export_refused_says_why_on_the_page_instead_of_a_failed_download(
    browser_context, live_server, tenant
):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    expect(page.locator("#space-label")).to_have_text("org space “notes”")
    browser_context.clear_cookies()  # the session ends

    page.get_by_role("link", name="Export this space").click()

    expect(page.locator("#space-export-status")).to_have_text(
        re.compile(r"^Not downloaded: You are signed out\..*\(AUTHENTICATION_REQUIRED\)$")
    )


def test_a_space_named_in_another_script_downloads_under_its_name(
    browser_context, live_server, tenant
):
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    page.get_by_label("Name", exact=True).fill("café")
    page.get_by_role("button", name="Open space").click()
    expect(page.locator("#space-label")).to_have_text("org space “café”")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export this space").click()

    assert download.value.suggested_filename == "memory-org-café.tar.gz"
    expect(page.locator("#space-export-status")).to_have_text("Downloaded org space “café”.")


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("n" * 129, "longer than 128 bytes"),
        ("no\u200btes", "invisible character"),
        ("ops/notes", "“/”"),
        ("..", "“.” or “..”"),
        ("notes ", "starts or ends with a space"),
    ],
)
def test_a_refused_space_name_says_what_is_wrong_with_it(
    browser_context, live_server, tenant, name, said
):
    """SPACE_INVALID's `detail.problem` says which rule the name broke: a name too long, or
    holding an invisible character, is not told it holds a "/"."""
    sign_in(browser_context, live_server, tenant.member)
    page = open_page(browser_context, "/team/memory/")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_role("button", name="Open space").click()

    status = page.locator("#space-pick-status")
    expect(status).to_contain_text("SPACE_INVALID")
    expect(status).to_contain_text(said)


def test_a_long_document_path_wraps_in_the_list(new_context, live_server, tenant):
    """A path of one long name (up to 255 bytes) wraps in its cell: the revision and the
    writer beside it stay on a 1280 px page. On a phone the names' cells keep a readable
    width (the table scrolls sideways) rather than a letter a line."""
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    writer = SpaceWriter(kind=WriterKind.BOT, ident="9", tenant_id=tenant.team.pk, user=None)
    path = "ops/" + "d" * 200 + ".md"
    space_document_write(
        handle=handle, path=path, body=b"# D\n", expected_revision=0, writer=writer
    )
    for viewport in (WIDE, NARROW):
        context = new_context(viewport=viewport)
        sign_in(context, live_server, tenant.member)
        # The page opens the org space "notes" by itself.
        page = open_page(context, "/team/memory/")
        expect(page.locator("#space-pick-status")).to_have_text("Opened org space “notes”.")
        row = page.locator("#space-documents tr")
        expect(row).to_have_count(1)
        screenshot(page, f"spaces-long-path-{viewport['width']}")
        if viewport is WIDE:
            assert_within_width(row.get_by_role("cell", name="bot:9"), WIDE["width"])
        else:
            box = row.get_by_role("button", name=path).bounding_box()
            assert box is not None
            assert box["width"] >= 80, f"the path is squeezed to {box['width']:.0f} px"
