"""Line provenance: the pure carry of origins, the cached blame of the memory document, stale
lines and the review that keeps one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.backends.postgresql.base import Cursor as ClientBindingCursor
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from conftest import postgres_only
from memory import provenance
from memory.models import MEMORY_PATH, LineProvenance, LineReview
from memory.provenance import (
    memory_blame,
    origin_runs,
    origins_carry,
    origins_of_runs,
    text_lines,
)
from memory.services import memory_clear, memory_line_keep, memory_save, memory_undo
from workspaces.errors import NotFound, VersionConflict
from workspaces.models import FileVersion


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("one", ["one"]),
        ("one\n", ["one"]),
        ("one\n\n", ["one", ""]),
        ("\n", [""]),
        ("a\r\nb", ["a\r", "b"]),
        ("a\u2028b\x0cc\n", ["a\u2028b\x0cc"]),
    ],
)
def test_lines_are_split_at_line_feeds_only(text, lines):
    assert text_lines(text) == lines


def test_an_unchanged_line_keeps_its_origin_and_a_changed_one_takes_the_new_revision():
    previous = ["a", "b", "c", "d"]
    origins = [(1, 0), (2, 0), (1, 2), (3, 5)]

    carried = origins_carry(previous, origins, ["a", "B", "c", "new", "d"], 4)

    assert carried == [(1, 0), (4, 1), (1, 2), (4, 3), (3, 5)]


def test_a_moved_line_takes_the_revision_that_moved_it():
    carried = origins_carry(["a", "b", "c"], [(1, 0), (1, 1), (1, 2)], ["c", "a", "b"], 2)

    assert carried == [(2, 0), (1, 0), (1, 1)]


def test_runs_round_trip_and_fold_consecutive_lines_of_one_origin():
    origins = [(1, 0), (1, 1), (1, 2), (4, 0), (1, 3), (1, 5)]

    runs = origin_runs(origins)

    assert runs == [[1, 0, 3], [4, 0, 1], [1, 3, 1], [1, 5, 1]]
    assert origins_of_runs(runs) == origins


line_text = st.sampled_from(["", "- a", "- b", "- c", "# h", "- d", "x"])


@given(st.lists(st.lists(line_text, max_size=8), min_size=1, max_size=8))
def test_every_origin_names_the_revision_and_place_that_hold_the_line(history):
    lines: list[str] = []
    origins: list[tuple[int, int]] = []

    for version, current in enumerate(history, start=1):
        carried = origins_carry(lines, origins, current, version)

        assert len(carried) == len(current)
        for number, (origin_version, index) in enumerate(carried):
            assert history[origin_version - 1][index] == current[number]
            if origin_version < version:
                assert current[number] in lines
        assert len(set(carried)) == len(carried)
        lines, origins = current, carried


# ---- the memory document ---------------------------------------------------------------------


def save(tenant, content: str, base: int) -> FileVersion:
    return memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=base, content=content
    )


def origins(blame) -> list[tuple[int, str, str]]:
    return [
        (line.origin.version, line.origin.change_kind, line.origin.author_kind)
        for line in blame.lines
    ]


def test_never_written_memory_has_no_lines(tenant):
    blame = memory_blame(workspace=tenant.workspace)

    assert (blame.version, blame.lines, blame.stale_lines) == (0, [], 0)


def test_save_clear_and_undo_each_originate_the_lines_they_changed(tenant):
    save(tenant, "- likes tea\n- uses tabs\n", 0)
    save(tenant, "- likes tea\n- uses spaces\n", 1)
    memory_clear(workspace=tenant.workspace, author=tenant.admin, base_version=2)
    assert memory_blame(workspace=tenant.workspace).lines == []

    memory_undo(workspace=tenant.workspace, author=tenant.admin, base_version=3, restore_version=2)

    blame = memory_blame(workspace=tenant.workspace)
    assert blame.version == 4
    assert origins(blame) == [(4, "undo", "human"), (4, "undo", "human")]
    assert [line.origin.author for line in blame.lines] == [tenant.admin, tenant.admin]
    assert [line.origin_line for line in blame.lines] == [0, 1]


def test_an_unchanged_line_keeps_its_revision_across_a_hundred_unrelated_revisions(tenant):
    save(tenant, "- the office is in Kyoto\n- scratch 0\n", 0)
    first = memory_blame(workspace=tenant.workspace)

    for n in range(1, 101):
        save(tenant, f"- the office is in Kyoto\n- scratch {n}\n", n)
        if n % 25 == 0:
            memory_blame(workspace=tenant.workspace)

    blame = memory_blame(workspace=tenant.workspace)
    assert blame.version == 101
    assert first.lines[0].origin.version == 1
    assert [(line.origin.version, line.origin_line) for line in blame.lines] == [(1, 0), (101, 1)]
    assert LineProvenance.objects.filter(revision__file__path=MEMORY_PATH).count() == 101


def test_a_cold_blame_caches_every_revision_when_they_take_several_inserts(tenant, monkeypatch):
    monkeypatch.setattr(provenance, "_CACHE_BATCH", 2)
    for n in range(5):
        save(tenant, f"- kept\n- changing {n}\n", n)

    blame = memory_blame(workspace=tenant.workspace)

    assert [line.origin.version for line in blame.lines] == [1, 5]
    cached = LineProvenance.objects.filter(revision__file__path=MEMORY_PATH)
    assert sorted(cached.values_list("revision__version", flat=True)) == [1, 2, 3, 4, 5]


@postgres_only
def test_blame_caches_and_loads_behind_a_client_binding_cursor(tenant, monkeypatch):
    """With DATABASE_PREPARED_STATEMENTS=false Django's cursors bind on the client: the
    insert riding with the select, and its binary rows, go through a server-binding one."""
    save(tenant, "- kept\n- changing 0\n", 0)
    memory_blame(workspace=tenant.workspace)
    save(tenant, "- kept\n- changing 1\n", 1)
    connection.ensure_connection()
    monkeypatch.setattr(connection.connection, "cursor_factory", ClientBindingCursor)

    blame = memory_blame(workspace=tenant.workspace)

    assert [line.origin.version for line in blame.lines] == [1, 2]
    cached = LineProvenance.objects.filter(revision__file__path=MEMORY_PATH)
    assert sorted(cached.values_list("revision__version", flat=True)) == [1, 2]


def test_blame_of_version_n_opens_only_n_minus_1_and_n_once_n_minus_1_is_known(tenant, monkeypatch):
    for n in range(20):
        save(tenant, f"- kept\n- changing {n}\n", n)
    memory_blame(workspace=tenant.workspace)
    save(tenant, "- kept\n- changing 20\n", 20)
    opened: list[int] = []
    real_open = provenance.file_version_plaintext

    def counting_open(*, version, workspace, data_key):
        opened.append(version.version)
        return real_open(version=version, workspace=workspace, data_key=data_key)

    monkeypatch.setattr(provenance, "file_version_plaintext", counting_open)

    blame = memory_blame(workspace=tenant.workspace)
    again = memory_blame(workspace=tenant.workspace)

    assert sorted(opened) == [20, 21]
    assert [line.origin.version for line in blame.lines] == [1, 21]
    assert again.lines == blame.lines


def test_a_cache_row_holds_origins_and_never_text(tenant):
    save(tenant, "- secret recipe: miso\n", 0)

    memory_blame(workspace=tenant.workspace)

    row = LineProvenance.objects.get()
    assert (row.line_count, row.origin_runs) == (1, [[1, 0, 1]])


# ---- stale lines and Keep --------------------------------------------------------------------


def test_lines_turn_stale_once_the_clock_passes_the_stale_age(tenant, settings):
    settings.MEMORY_STALE_DAYS = 90
    save(tenant, "- old fact\n", 0)
    save(tenant, "- old fact\n- new fact\n", 1)
    FileVersion.objects.filter(version=1).update(created_at=timezone.now() - timedelta(days=60))
    now = timezone.now()

    today = memory_blame(workspace=tenant.workspace, now=now)
    in_31_days = memory_blame(workspace=tenant.workspace, now=now + timedelta(days=31))
    in_91_days = memory_blame(workspace=tenant.workspace, now=now + timedelta(days=91))

    assert ([line.is_stale for line in today.lines], today.stale_lines) == ([False, False], 0)
    assert [line.is_stale for line in in_31_days.lines] == [True, False]
    assert ([line.is_stale for line in in_91_days.lines], in_91_days.stale_lines) == (
        [True, True],
        2,
    )
    assert today.stale_days == 90


def age(tenant, days: int) -> None:
    """Move every revision so far `days` into the past, as the clock moving on would."""
    FileVersion.objects.filter(file__workspace=tenant.workspace).update(
        created_at=timezone.now() - timedelta(days=days)
    )


def test_keep_records_a_review_that_makes_the_line_fresh_without_a_revision(tenant):
    save(tenant, "- old fact\n- other\n", 0)
    age(tenant, 100)

    review = memory_line_keep(
        workspace=tenant.workspace, reviewer=tenant.admin, base_version=1, line=1
    )

    blame = memory_blame(workspace=tenant.workspace)
    assert [line.is_stale for line in blame.lines] == [False, True]
    assert blame.lines[0].reviewed_at == review.reviewed_at
    assert blame.lines[1].reviewed_at is None
    assert (review.origin.version, review.origin_line, review.reviewed_version) == (1, 0, 1)
    assert review.reviewer == tenant.admin
    assert FileVersion.objects.filter(file__workspace=tenant.workspace).count() == 1
    in_91_days = timezone.now() + timedelta(days=91)
    assert memory_blame(workspace=tenant.workspace, now=in_91_days).stale_lines == 2


def test_a_review_follows_its_line_until_the_line_is_edited(tenant):
    save(tenant, "- kept fact\n- other\n", 0)
    age(tenant, 100)
    memory_line_keep(workspace=tenant.workspace, reviewer=tenant.member, base_version=1, line=1)
    in_30_days = timezone.now() + timedelta(days=30)

    save(tenant, "# heading\n- kept fact\n- other\n", 1)
    moved = memory_blame(workspace=tenant.workspace, now=in_30_days)
    save(tenant, "# heading\n- kept fact, edited\n- other\n", 2)
    edited = memory_blame(workspace=tenant.workspace, now=in_30_days)

    assert [line.is_stale for line in moved.lines] == [False, False, True]
    assert moved.lines[1].reviewed_at is not None
    assert edited.lines[1].reviewed_at is None
    assert edited.lines[1].origin.version == 3


def test_keep_on_a_stale_version_is_a_conflict_and_records_nothing(tenant):
    save(tenant, "- a\n", 0)
    save(tenant, "- b\n- a\n", 1)

    with pytest.raises(VersionConflict) as refused:
        memory_line_keep(workspace=tenant.workspace, reviewer=tenant.member, base_version=1, line=1)

    assert refused.value.detail == {"currentVersion": 2}
    assert not LineReview.objects.exists()


@pytest.mark.parametrize("line", [0, 3])
def test_keep_of_a_line_the_version_does_not_have_is_not_found(tenant, line):
    save(tenant, "- a\n- b\n", 0)

    with pytest.raises(NotFound):
        memory_line_keep(
            workspace=tenant.workspace, reviewer=tenant.member, base_version=1, line=line
        )

    assert not LineReview.objects.exists()
