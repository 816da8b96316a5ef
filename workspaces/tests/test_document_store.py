"""Delete, restore and move by compare-and-set, and the list, read and search selectors."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.db import connection

from conftest import violates
from workspaces import selectors
from workspaces.errors import DocumentExists, DocumentUnreadable, NotFound, VersionConflict
from workspaces.models import File, FileVersion
from workspaces.selectors import file_list, file_read_text, file_search
from workspaces.services import (
    file_delete,
    file_move,
    file_restore,
    file_write,
    workspace_key_ensure,
)


def write(tenant, path: str, text: str, base: int = 0) -> FileVersion:
    return file_write(
        workspace=tenant.workspace,
        path=path,
        plaintext=text,
        base_version=base,
        data_key=workspace_key_ensure(workspace=tenant.workspace),
        author=tenant.member,
        author_kind=FileVersion.AuthorKind.HUMAN,
        change_kind=FileVersion.ChangeKind.SAVE,
    )


def stored(tenant) -> list[tuple[str, int, bool]]:
    return [
        (file.path, file.current_version, file.is_deleted)
        for file in File.objects.filter(workspace=tenant.workspace).order_by("path")
    ]


def test_delete_at_the_current_version_leaves_a_tombstone_with_its_revisions(tenant):
    write(tenant, "notes/a.md", "one")
    write(tenant, "notes/a.md", "two", base=1)

    file = file_delete(workspace=tenant.workspace, path="notes/a.md", base_version=2)

    assert (file.current_version, file.is_deleted) == (2, True)
    assert stored(tenant) == [("notes/a.md", 2, True)]
    assert FileVersion.objects.filter(file=file).count() == 2


def test_delete_with_a_stale_version_is_a_conflict_and_deletes_nothing(tenant):
    write(tenant, "notes/a.md", "one")
    write(tenant, "notes/a.md", "two", base=1)

    with pytest.raises(VersionConflict) as conflict:
        file_delete(workspace=tenant.workspace, path="notes/a.md", base_version=1)

    assert conflict.value.detail == {"currentVersion": 2, "deleted": False}
    assert stored(tenant) == [("notes/a.md", 2, False)]


def test_deleting_a_deleted_or_missing_file_is_a_conflict(tenant):
    write(tenant, "notes/a.md", "one")
    file_delete(workspace=tenant.workspace, path="notes/a.md", base_version=1)

    with pytest.raises(VersionConflict) as again:
        file_delete(workspace=tenant.workspace, path="notes/a.md", base_version=1)
    with pytest.raises(VersionConflict) as missing:
        file_delete(workspace=tenant.workspace, path="notes/none.md", base_version=1)

    assert again.value.detail == {"currentVersion": 1, "deleted": True}
    assert missing.value.detail == {"currentVersion": 0, "deleted": False}


def test_restore_brings_back_the_text_it_had(tenant):
    write(tenant, "notes/a.md", "kept")
    file_delete(workspace=tenant.workspace, path="notes/a.md", base_version=1)

    file_restore(workspace=tenant.workspace, path="notes/a.md", base_version=1)

    _, text = file_read_text(
        workspace=tenant.workspace,
        path="notes/a.md",
        data_key=workspace_key_ensure(workspace=tenant.workspace),
    )
    assert text == "kept"
    assert stored(tenant) == [("notes/a.md", 1, False)]


def test_restoring_a_live_file_is_a_conflict(tenant):
    write(tenant, "notes/a.md", "live")

    with pytest.raises(VersionConflict) as conflict:
        file_restore(workspace=tenant.workspace, path="notes/a.md", base_version=1)

    assert conflict.value.detail == {"currentVersion": 1, "deleted": False}
    assert stored(tenant) == [("notes/a.md", 1, False)]


def test_a_write_does_not_revive_a_deleted_file(tenant):
    write(tenant, "notes/a.md", "one")
    file_delete(workspace=tenant.workspace, path="notes/a.md", base_version=1)

    with pytest.raises(VersionConflict):
        write(tenant, "notes/a.md", "again", base=1)

    assert stored(tenant) == [("notes/a.md", 1, True)]


def test_move_keeps_the_file_its_version_and_readable_revisions(tenant):
    first = write(tenant, "notes/a.md", "one")
    write(tenant, "notes/a.md", "two", base=1)

    moved = file_move(
        workspace=tenant.workspace, source="notes/a.md", destination="done/a.md", base_version=2
    )

    assert (moved.pk, moved.current_version) == (first.file_id, 2)
    assert stored(tenant) == [("done/a.md", 2, False)]
    _, text = file_read_text(
        workspace=tenant.workspace,
        path="done/a.md",
        data_key=workspace_key_ensure(workspace=tenant.workspace),
    )
    assert text == "two"


def test_move_with_a_stale_version_is_a_conflict_and_moves_nothing(tenant):
    write(tenant, "notes/a.md", "one")
    write(tenant, "notes/a.md", "two", base=1)

    with pytest.raises(VersionConflict) as conflict:
        file_move(
            workspace=tenant.workspace, source="notes/a.md", destination="b.md", base_version=1
        )

    assert conflict.value.detail["currentVersion"] == 2
    assert stored(tenant) == [("notes/a.md", 2, False)]


@pytest.mark.parametrize("destination_deleted", [False, True])
def test_move_onto_a_taken_destination_is_document_exists(tenant, destination_deleted):
    write(tenant, "a.md", "a")
    write(tenant, "b.md", "b")
    if destination_deleted:
        file_delete(workspace=tenant.workspace, path="b.md", base_version=1)

    with pytest.raises(DocumentExists) as refused:
        file_move(workspace=tenant.workspace, source="a.md", destination="b.md", base_version=1)

    assert (refused.value.status, refused.value.detail) == (409, {"path": "b.md"})
    assert stored(tenant) == [("a.md", 1, False), ("b.md", 1, destination_deleted)]


def test_moving_a_deleted_file_is_a_conflict(tenant):
    write(tenant, "a.md", "a")
    file_delete(workspace=tenant.workspace, path="a.md", base_version=1)

    with pytest.raises(VersionConflict):
        file_move(workspace=tenant.workspace, source="a.md", destination="b.md", base_version=1)

    assert stored(tenant) == [("a.md", 1, True)]


def test_the_path_constraint_refuses_a_duplicate_past_python(tenant):
    write(tenant, "a.md", "a")
    write(tenant, "b.md", "b")

    violates(
        "workspaces_file_path_unique_in_workspace",
        lambda: File.objects.filter(workspace=tenant.workspace, path="b.md").update(path="a.md"),
    )


def test_list_is_ordered_by_path_with_sizes_in_one_query(tenant, django_assert_num_queries):
    write(tenant, "b.md", "bb")
    write(tenant, "a/c.md", "ccc")
    write(tenant, "a/d.md", "d")
    file_delete(workspace=tenant.workspace, path="a/d.md", base_version=1)

    with django_assert_num_queries(1):
        files = file_list(workspace=tenant.workspace, prefix=None, include_deleted=False)

    sizes = [(f.path, f.current_bytes) for f in files]  # type: ignore[attr-defined]
    assert sizes == [("a/c.md", 3), ("b.md", 2)]


def test_list_filters_by_a_literal_prefix_and_can_include_deleted(tenant):
    write(tenant, "a/c.md", "c")
    write(tenant, "a/d.md", "d")
    write(tenant, "a_/e.md", "e")
    file_delete(workspace=tenant.workspace, path="a/d.md", base_version=1)

    files = file_list(workspace=tenant.workspace, prefix="a/", include_deleted=True)

    assert [(f.path, f.is_deleted) for f in files] == [("a/c.md", False), ("a/d.md", True)]


def test_a_listing_prefix_matches_case_sensitively(tenant):
    # SQLite's LIKE, behind `startswith`, folds ASCII case; the prefix is literal.
    write(tenant, "notes/a.md", "a")
    write(tenant, "Notes/b.md", "b")

    files = file_list(workspace=tenant.workspace, prefix="notes/", include_deleted=False)

    assert [f.path for f in files] == ["notes/a.md"]


def test_read_of_a_deleted_or_missing_file_is_not_found(tenant):
    write(tenant, "a.md", "a")
    file_delete(workspace=tenant.workspace, path="a.md", base_version=1)
    key = workspace_key_ensure(workspace=tenant.workspace)

    with pytest.raises(NotFound):
        file_read_text(workspace=tenant.workspace, path="a.md", data_key=key)
    with pytest.raises(NotFound):
        file_read_text(workspace=tenant.workspace, path="none.md", data_key=key)


def search(tenant, query: str, **options) -> selectors.SearchPage:
    options = {"limit": 10, "byte_budget": 10**9, **options}
    return file_search(
        workspace=tenant.workspace,
        query=query,
        data_key=workspace_key_ensure(workspace=tenant.workspace),
        **options,
    )


def test_search_finds_live_files_case_insensitively_with_a_snippet(tenant):
    write(tenant, "a.md", "Shopping list:\n- Green TEA\n- milk")
    write(tenant, "b.md", "nothing here")
    write(tenant, "c.md", "green tea, deleted")
    file_delete(workspace=tenant.workspace, path="c.md", base_version=1)

    page = search(tenant, "green tea")

    assert [(file.path, snippet) for file, snippet in page.hits] == [
        ("a.md", "Shopping list: - Green TEA - milk")
    ]
    assert page.resume_after is None


def test_search_snippet_is_cut_around_the_match(tenant):
    write(tenant, "a.md", "x" * 500 + "needle" + "y" * 500)

    [(_, snippet)] = search(tenant, "NEEDLE").hits

    assert snippet == "…" + "x" * 60 + "needle" + "y" * 60 + "…"


def test_search_never_opens_a_hidden_file(tenant):
    write(tenant, "hidden/a.md", "secret word")
    write(tenant, "open/a.md", "secret word")
    # A hidden revision that is opened would fail its integrity check and raise.
    FileVersion.objects.filter(file__path="hidden/a.md").update(ciphertext=b"\x00" * 64)

    page = search(tenant, "secret", is_hidden=lambda path: path.startswith("hidden/"))

    assert [file.path for file, _ in page.hits] == ["open/a.md"]


def test_search_of_a_tampered_file_is_unreadable_not_partial(tenant):
    write(tenant, "a.md", "secret word")
    FileVersion.objects.filter(file__path="a.md").update(ciphertext=b"\x00" * 64)

    with pytest.raises(DocumentUnreadable):
        search(tenant, "secret")


def test_search_stops_at_the_limit_and_says_where_to_go_on(tenant):
    for n in range(5):
        write(tenant, f"n{n}.md", "match")

    first = search(tenant, "match", limit=2)
    rest = search(tenant, "match", limit=10, after=first.resume_after)

    assert [file.path for file, _ in first.hits] == ["n0.md", "n1.md"]
    assert first.resume_after == "n1.md"
    assert [file.path for file, _ in rest.hits] == ["n2.md", "n3.md", "n4.md"]
    assert rest.resume_after is None


def test_search_scans_a_bounded_number_of_files_and_continues_after_them(tenant, monkeypatch):
    monkeypatch.setattr(selectors, "FILE_SEARCH_SCAN_LIMIT", 3)
    for n in range(4):
        write(tenant, f"n{n}.md", "match" if n in {1, 3} else "other")

    first = search(tenant, "match")
    rest = search(tenant, "match", after=first.resume_after)

    assert [file.path for file, _ in first.hits] == ["n1.md"]
    assert first.resume_after == "n2.md"
    assert [file.path for file, _ in rest.hits] == ["n3.md"]
    assert rest.resume_after is None


def test_search_decrypts_no_more_than_its_byte_budget(tenant, monkeypatch):
    for n in range(4):
        write(tenant, f"n{n}.md", f"match {n} " + "x" * 992)  # 1000 bytes each
    opened: list[str] = []
    real = selectors.file_version_plaintext

    def spy(*, version, workspace, data_key):
        opened.append(version.file.path)
        return real(version=version, workspace=workspace, data_key=data_key)

    monkeypatch.setattr(selectors, "file_version_plaintext", spy)

    first = search(tenant, "match", byte_budget=2500)
    rest = search(tenant, "match", byte_budget=2500, after=first.resume_after)

    assert [file.path for file, _ in first.hits] == ["n0.md", "n1.md"]
    assert first.resume_after == "n1.md"
    assert [file.path for file, _ in rest.hits] == ["n2.md", "n3.md"]
    assert rest.resume_after is None
    assert opened == ["n0.md", "n1.md", "n2.md", "n3.md"]


def test_search_always_opens_one_document_even_over_the_budget(tenant):
    write(tenant, "big.md", "match " + "x" * 5000)
    write(tenant, "next.md", "match")

    page = search(tenant, "match", byte_budget=100)

    assert [file.path for file, _ in page.hits] == ["big.md"]
    assert page.resume_after == "big.md"


@pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="SQLite stores datetimes as text, so only there can one column hold two formats",
)
def test_a_versioned_write_stores_updated_at_in_the_orms_format_on_sqlite(tenant):
    # given: a file created through the ORM
    write(tenant, "notes/a.md", "one")

    # when: the compare-and-set bump (hand-written SQL) moves updated_at
    write(tenant, "notes/a.md", "two", base=1)

    # then: both columns hold the text the ORM writes (naive UTC), not one with an offset
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT CAST(created_at AS TEXT), CAST(updated_at AS TEXT) FROM {File._meta.db_table} "
            "WHERE path = %s",
            ["notes/a.md"],
        )
        created_text, updated_text = cursor.fetchone()
    assert datetime.fromisoformat(created_text).tzinfo is None
    assert datetime.fromisoformat(updated_text).tzinfo is None
    file = File.objects.get(workspace=tenant.workspace, path="notes/a.md")
    assert File.objects.filter(pk=file.pk, updated_at=file.updated_at).exists()


def test_a_version_page_names_the_next_page_until_it_reaches_version_one(tenant):
    for base in range(5):
        write(tenant, "notes/a.md", f"v{base + 1}", base=base)

    first = selectors.file_version_page(
        workspace=tenant.workspace, path="notes/a.md", before=None, limit=2
    )
    second = selectors.file_version_page(
        workspace=tenant.workspace, path="notes/a.md", before=first.next_before, limit=2
    )
    last = selectors.file_version_page(
        workspace=tenant.workspace, path="notes/a.md", before=second.next_before, limit=2
    )

    assert [[r.version for r in page.revisions] for page in (first, second, last)] == [
        [5, 4],
        [3, 2],
        [1],
    ]
    assert (first.next_before, second.next_before, last.next_before) == (4, 2, None)


def test_a_full_version_page_that_ends_at_version_one_names_no_next_page(tenant):
    write(tenant, "notes/a.md", "v1")
    write(tenant, "notes/a.md", "v2", base=1)

    page = selectors.file_version_page(
        workspace=tenant.workspace, path="notes/a.md", before=None, limit=2
    )

    assert [r.version for r in page.revisions] == [2, 1]
    assert page.next_before is None
