"""The MemoryStore contract: every behaviour, run against both adapters.

A behaviour one adapter lacks fails here for that adapter: the two never differ.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory.errors import SpaceQuotaExceeded, StoreBusy
from memory.spaces.handle import Visibility
from memory.spaces.store import PendingWrite, Quotas, WriteBatch, body_checksum
from memory.tests.spaces.conftest import ROOMY, handle_of
from workspaces.errors import InvalidDocumentPath, NotFound, TenantQuotaExceeded, VersionConflict

pytestmark = pytest.mark.django_db


def test_a_space_never_written_lists_nothing_reads_nothing_and_uses_nothing(adapter, team):
    handle = handle_of(team)

    assert list(adapter.store.list(handle)) == []
    assert adapter.store.read(handle, "a.md") is None
    usage = adapter.store.usage(handle)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (0, 0)


def test_listing_is_recursive_under_a_prefix_sorted_by_path_with_full_metadata(adapter, team):
    handle = handle_of(team)
    for path in ("notes/b.md", "notes/deep/c.md", "a.md", "notes/a.md", "notesX/d.md"):
        adapter.write(handle, path, path.encode(), expected=0, by="bot:helper")

    everything = adapter.store.list(handle)
    under_notes = adapter.store.list(handle, prefix="notes")

    assert [meta.path for meta in everything] == [
        "a.md",
        "notes/a.md",
        "notes/b.md",
        "notes/deep/c.md",
        "notesX/d.md",
    ]
    assert [meta.path for meta in under_notes] == ["notes/a.md", "notes/b.md", "notes/deep/c.md"]
    assert adapter.store.list(handle, prefix="notes/") == under_notes
    deep = under_notes[-1]
    assert deep.size == len(b"notes/deep/c.md")
    assert deep.checksum == body_checksum(b"notes/deep/c.md")
    assert deep.revision == 1
    assert deep.updated_by == "bot:helper"
    assert abs(timezone.now() - deep.updated_at) < timedelta(minutes=1)


def test_each_write_moves_the_revision_by_one_and_reads_back_whole(adapter, team):
    handle = handle_of(team)

    revisions = [
        adapter.write(handle, "a.md", body, expected=expected).revision
        for expected, body in ((0, b"one"), (1, b"two"), (2, b"three"))
    ]

    assert revisions == [1, 2, 3]
    stored = adapter.store.read(handle, "a.md")
    assert stored.body == b"three"
    assert stored.meta.revision == 3
    assert stored.meta.checksum == body_checksum(b"three")


def test_expected_revision_zero_creates_only(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"first", expected=0)

    with pytest.raises(VersionConflict) as conflict:
        adapter.write(handle, "a.md", b"second", expected=0)

    assert conflict.value.detail == {"currentVersion": 1}
    assert adapter.store.read(handle, "a.md").body == b"first"
    assert adapter.store.usage(handle).used_bytes == len(b"first")


@pytest.mark.parametrize("stale", [1, 5])
def test_a_stale_expected_revision_conflicts_and_changes_nothing(adapter, team, stale):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"one", expected=0)
    adapter.write(handle, "a.md", b"two!", expected=1)

    with pytest.raises(VersionConflict) as conflict:
        adapter.write(handle, "a.md", b"a much longer body", expected=stale)

    assert conflict.value.detail == {"currentVersion": 2}
    stored = adapter.store.read(handle, "a.md")
    assert (stored.body, stored.meta.revision) == (b"two!", 2)
    usage = adapter.store.usage(handle)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (4, 4)


def test_an_expected_revision_on_an_absent_document_conflicts_with_zero(adapter, team):
    handle = handle_of(team)

    with pytest.raises(VersionConflict) as conflict:
        adapter.write(handle, "a.md", b"x", expected=3)

    assert conflict.value.detail == {"currentVersion": 0}
    assert adapter.store.list(handle) == []
    assert adapter.store.usage(handle).used_bytes == 0


def test_a_path_created_again_after_a_delete_never_reuses_a_revision(adapter, team):
    # A revision names one text: a writer holding revision 1 of the deleted document must
    # not find a new document at revision 1 and write over it.
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"the text a writer saw", expected=0)
    adapter.write(handle, "other.md", b"o", expected=0)
    adapter.write(handle, "other.md", b"o2", expected=1)
    adapter.write(handle, "other.md", b"o3", expected=2)
    adapter.delete(handle, "other.md", expected=3)
    adapter.delete(handle, "a.md", expected=1)

    again = adapter.write(handle, "a.md", b"another", expected=0)

    assert again.revision == 4  # above every revision a deleted document of the space had
    with pytest.raises(VersionConflict) as conflict:
        adapter.write(handle, "a.md", b"over what it saw", expected=1)
    assert conflict.value.detail == {"currentVersion": 4}
    with pytest.raises(VersionConflict):
        adapter.delete(handle, "a.md", expected=1)
    stored = adapter.store.read(handle, "a.md")
    assert (stored.body, stored.meta.revision) == (b"another", 4)
    assert adapter.store.usage(handle).used_bytes == len(b"another")
    assert adapter.write(handle, "a.md", b"next", expected=4).revision == 5
    assert adapter.write(handle, "new.md", b"n", expected=0).revision == 4


def test_no_expected_revision_replaces_whatever_is_current(adapter, team):
    handle = handle_of(team)

    first = adapter.write(handle, "a.md", b"one", expected=None)
    second = adapter.write(handle, "a.md", b"two", expected=None)

    assert (first.revision, second.revision) == (1, 2)
    assert adapter.store.read(handle, "a.md").body == b"two"


@pytest.mark.parametrize("visibility", list(Visibility))
def test_every_visibility_has_a_home(adapter, team, visibility):
    handle = handle_of(None if visibility is Visibility.GLOBAL else team, visibility)

    meta = adapter.write(handle, "docs/a.md", b"hello", expected=0)

    assert adapter.store.read(handle, "docs/a.md").body == b"hello"
    assert adapter.store.list(handle) == [meta]
    assert adapter.store.usage(handle).used_bytes == 5
    assert adapter.store.describe(handle)


def test_spaces_that_differ_in_any_axis_are_apart(adapter, make_team):
    team, other_team = make_team(), make_team()
    handles = [
        handle_of(team),
        handle_of(other_team),
        handle_of(team, name="other"),
        handle_of(team, project="other"),
        handle_of(team, Visibility.USER, user_id=8),
        handle_of(team, Visibility.USER, user_id=9),
    ]

    for index, handle in enumerate(handles):
        adapter.write(handle, "a.md", str(index).encode() * (index + 1), expected=0)

    for index, handle in enumerate(handles):
        assert adapter.store.read(handle, "a.md").body == str(index).encode() * (index + 1)
        assert adapter.store.usage(handle).used_bytes == index + 1


def test_a_tenant_names_every_space_holding_a_document_and_no_other(adapter, make_team):
    team, other_team = make_team(), make_team()
    empty_body = handle_of(team, Visibility.BOT)
    private = handle_of(team, Visibility.PRIVATE)
    emptied = handle_of(team, Visibility.ORG)
    adapter.write(empty_body, "empty.md", b"", expected=0)
    adapter.write(private, "a.md", b"private", expected=0)
    adapter.write(emptied, "gone.md", b"gone", expected=0)
    adapter.delete(emptied, "gone.md")
    adapter.write(handle_of(other_team), "a.md", b"theirs", expected=0)
    adapter.write(handle_of(None, Visibility.GLOBAL), "a.md", b"everyone's", expected=0)

    spaces = adapter.store.spaces(team.pk)

    assert spaces == sorted([empty_body, private], key=lambda handle: handle.id)
    assert adapter.store.spaces(make_team().pk) == []


def test_reaching_the_space_quota_refuses_and_moves_nothing(adapter, team):
    handle = handle_of(team)
    quotas = Quotas(space_bytes=10, tenant_bytes=100)
    adapter.write(handle, "a.md", b"123456", expected=0, quotas=quotas)

    with pytest.raises(SpaceQuotaExceeded) as refused:
        adapter.write(handle, "b.md", b"12345", expected=0, quotas=quotas)

    assert refused.value.detail == {"usedBytes": 6, "deltaBytes": 5, "quotaBytes": 10}
    assert adapter.store.read(handle, "b.md") is None
    usage = adapter.store.usage(handle)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (6, 6)
    # Exactly at the quota is still within it.
    adapter.write(handle, "b.md", b"1234", expected=0, quotas=quotas)
    assert adapter.store.usage(handle).used_bytes == 10


def test_reaching_the_tenant_quota_from_a_second_space_refuses(adapter, team):
    first, second = handle_of(team, name="first"), handle_of(team, name="second")
    quotas = Quotas(space_bytes=100, tenant_bytes=10)
    adapter.write(first, "a.md", b"12345678", expected=0, quotas=quotas)

    with pytest.raises(TenantQuotaExceeded) as refused:
        adapter.write(second, "a.md", b"123", expected=0, quotas=quotas)

    assert refused.value.detail == {"usedBytes": 8, "deltaBytes": 3, "quotaBytes": 10}
    assert adapter.store.list(second) == []
    assert adapter.store.usage(second).used_bytes == 0
    assert adapter.store.usage(first).tenant_used_bytes == 8


def test_the_tenant_refusal_wins_when_both_quotas_would_refuse(adapter, team):
    handle = handle_of(team)
    quotas = Quotas(space_bytes=5, tenant_bytes=5)
    adapter.write(handle, "a.md", b"1234", expected=0, quotas=quotas)

    with pytest.raises(TenantQuotaExceeded):
        adapter.write(handle, "b.md", b"12", expected=0, quotas=quotas)


def test_a_quota_of_zero_is_no_cap(adapter, team):
    handle = handle_of(team)

    adapter.write(handle, "a.md", b"x" * 4096, expected=0, quotas=Quotas(0, 0))

    assert adapter.store.usage(handle).used_bytes == 4096


def test_an_overwrite_charges_the_difference(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"x" * 10, expected=0)
    adapter.write(handle, "b.md", b"y" * 3, expected=0)

    adapter.write(handle, "a.md", b"x" * 15, expected=1)
    grown = adapter.store.usage(handle)
    adapter.write(handle, "a.md", b"x" * 4, expected=2)
    shrunk = adapter.store.usage(handle)

    assert (grown.used_bytes, grown.tenant_used_bytes) == (18, 18)
    assert (shrunk.used_bytes, shrunk.tenant_used_bytes) == (7, 7)


def test_a_shrinking_overwrite_passes_a_quota_already_exceeded(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"x" * 10, expected=0)

    adapter.write(handle, "a.md", b"x" * 8, expected=1, quotas=Quotas(5, 5))

    assert adapter.store.usage(handle).used_bytes == 8


def test_a_delete_frees_the_bytes(adapter, team):
    handle = handle_of(team)
    other = handle_of(team, name="other")
    adapter.write(handle, "docs/a.md", b"x" * 10, expected=0)
    adapter.write(other, "a.md", b"y" * 3, expected=0)

    adapter.delete(handle, "docs/a.md", expected=1)

    assert adapter.store.read(handle, "docs/a.md") is None
    assert adapter.store.list(handle) == []
    usage = adapter.store.usage(handle)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (0, 3)
    # The name is free again (a create), above the revision deleted, which named "x" * 10.
    assert adapter.write(handle, "docs/a.md", b"z", expected=0).revision == 2


def test_deleting_an_absent_document_is_not_found(adapter, team):
    handle = handle_of(team)

    with pytest.raises(NotFound):
        adapter.delete(handle, "a.md", expected=None)
    adapter.write(handle, "b.md", b"b", expected=0)
    with pytest.raises(NotFound):
        adapter.delete(handle, "a.md", expected=1)


def test_a_stale_delete_conflicts_and_keeps_the_document(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"one", expected=0)
    adapter.write(handle, "a.md", b"two", expected=1)

    with pytest.raises(VersionConflict) as conflict:
        adapter.delete(handle, "a.md", expected=1)

    assert conflict.value.detail == {"currentVersion": 2}
    assert adapter.store.read(handle, "a.md").body == b"two"
    assert adapter.store.usage(handle).used_bytes == 3


def test_attribution_and_time_are_kept_with_each_revision(adapter, team):
    handle = handle_of(team)
    before = timezone.now()

    adapter.write(handle, "a.md", b"one", expected=0, by="user:5")
    adapter.write(handle, "a.md", b"two", expected=1, by="import:5")

    meta = adapter.store.read(handle, "a.md").meta
    assert meta.updated_by == "import:5"
    assert before <= meta.updated_at <= timezone.now()
    assert adapter.store.list(handle) == [meta]


@pytest.mark.parametrize(
    ("existing", "new"), [("a.md", "a.md/b.md"), ("a.md/b.md", "a.md"), ("x/a.md/c.md", "x/a.md")]
)
def test_a_document_cannot_be_both_a_file_and_a_directory(adapter, team, existing, new):
    handle = handle_of(team)
    adapter.write(handle, existing, b"first", expected=0)

    with pytest.raises(InvalidDocumentPath) as refused:
        adapter.write(handle, new, b"second", expected=0)

    assert refused.value.detail == {"reason": "path_conflict", "conflictsWith": existing}
    assert [meta.path for meta in adapter.store.list(handle)] == [existing]
    assert adapter.store.usage(handle).used_bytes == 5


def test_paths_differing_only_in_case_are_apart_in_listing_and_as_a_file_tree(adapter, team):
    # SQLite's LIKE folds ASCII case: a prefix match there must not.
    handle = handle_of(team)
    adapter.write(handle, "notes/a.md", b"lower", expected=0)
    adapter.write(handle, "Notes.md/b.md", b"upper", expected=0)

    adapter.write(handle, "NOTES/c.md", b"third", expected=0)
    adapter.write(handle, "notes.md", b"file", expected=0)

    assert [meta.path for meta in adapter.store.list(handle, prefix="notes")] == ["notes/a.md"]
    assert [meta.path for meta in adapter.store.list(handle, prefix="NOTES")] == ["NOTES/c.md"]
    assert [meta.path for meta in adapter.store.list(handle, prefix="Notes.md")] == [
        "Notes.md/b.md"
    ]


@pytest.mark.django_db(transaction=True)
def test_a_write_that_cannot_take_the_space_lock_by_its_deadline_is_busy(adapter, team):
    if adapter.name == "database" and connection.vendor != "postgresql":
        pytest.skip("the database store's deadline is PostgreSQL's lock_timeout")
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"one", expected=0)

    with adapter.hold_space_lock(handle), pytest.raises(StoreBusy):
        adapter.write(handle, "a.md", b"two", expected=1, wait=0.2)
    with adapter.hold_space_lock(handle), pytest.raises(StoreBusy):
        adapter.store.delete(handle, "a.md", expected_revision=1, deadline=0.0)
    with adapter.hold_space_lock(handle), pytest.raises(StoreBusy):
        adapter.store.write_many(
            handle,
            WriteBatch(
                writes=[PendingWrite("a.md", b"two", 1)],
                updated_by="import:7",
                quotas=ROOMY,
                deadline=time.monotonic() + 0.2,
            ),
        )

    stored = adapter.store.read(handle, "a.md")
    assert (stored.body, stored.meta.revision) == (b"one", 1)
    assert adapter.store.usage(handle).used_bytes == 3


def test_the_global_space_has_no_tenant_aggregate(adapter, team):
    glob = handle_of(None, Visibility.GLOBAL)
    tenant_space = handle_of(team)
    adapter.write(tenant_space, "a.md", b"123", expected=0)

    adapter.write(
        glob, "a.md", b"x" * 50, expected=0, quotas=Quotas(space_bytes=60, tenant_bytes=1)
    )
    with pytest.raises(SpaceQuotaExceeded):
        adapter.write(glob, "b.md", b"x" * 11, expected=0, quotas=Quotas(60, 1))

    usage = adapter.store.usage(glob)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (50, 0)
    assert adapter.store.usage(tenant_space).tenant_used_bytes == 3


def test_purging_tenants_removes_everything_of_theirs_and_nothing_else(adapter, make_team):
    doomed, kept = make_team(), make_team()
    for team in (doomed, kept):
        for visibility in (Visibility.PRIVATE, Visibility.PROJECT, Visibility.ORG):
            adapter.write(handle_of(team, visibility), "a.md", b"abc", expected=0)
    glob = handle_of(None, Visibility.GLOBAL)
    adapter.write(glob, "a.md", b"global", expected=0)

    removed = adapter.store.purge_tenants([doomed.pk])

    assert removed == 3
    for visibility in (Visibility.PRIVATE, Visibility.PROJECT, Visibility.ORG):
        assert adapter.store.list(handle_of(doomed, visibility)) == []
        assert adapter.store.usage(handle_of(doomed, visibility)).tenant_used_bytes == 0
        assert adapter.store.read(handle_of(kept, visibility), "a.md").body == b"abc"
    assert adapter.store.usage(handle_of(kept)).tenant_used_bytes == 9
    assert adapter.store.read(glob, "a.md").body == b"global"
    # A purged tenant starts again from nothing.
    assert adapter.write(handle_of(doomed), "a.md", b"z", expected=0).revision == 1


def test_reconcile_reports_and_fixes_a_drifted_counter(adapter, make_team):
    team, other = make_team(), make_team()
    drifted, steady = handle_of(team), handle_of(other)
    adapter.write(drifted, "a.md", b"x" * 10, expected=0)
    adapter.write(steady, "a.md", b"y" * 4, expected=0)
    adapter.counter_set(drifted, 25)

    found = {drift.scope: drift for drift in adapter.store.reconcile()}
    again = {drift.scope: drift for drift in adapter.store.reconcile()}

    assert (found[drifted.id].recorded, found[drifted.id].actual) == (25, 10)
    assert found[drifted.id].drift == 15
    assert found[steady.id].drift == 0
    assert found[f"tenant:{team.pk}"].drift == 0
    assert adapter.store.usage(drifted).used_bytes == 10
    assert {scope: drift.drift for scope, drift in again.items()} == dict.fromkeys(again, 0)


def test_reconcile_reports_each_space_and_tenant_once_and_nothing_else(adapter, team):
    first, second = handle_of(team), handle_of(team, name="other")
    adapter.write(first, "a.md", b"x" * 10, expected=0)
    adapter.write(second, "b.md", b"y" * 4, expected=0)

    drifts = adapter.store.reconcile()

    assert sorted(drift.scope for drift in drifts) == sorted(
        [first.id, second.id, f"tenant:{team.pk}"]
    )


def test_reconcile_does_not_report_a_space_whose_first_write_was_refused(adapter, team):
    kept, refused = handle_of(team), handle_of(team, name="refused")
    adapter.write(kept, "a.md", b"x", expected=0)
    with pytest.raises(SpaceQuotaExceeded):
        adapter.write(refused, "a.md", b"xx", expected=0, quotas=Quotas(1, 0))

    drifts = adapter.store.reconcile()

    assert sorted(drift.scope for drift in drifts) == sorted([kept.id, f"tenant:{team.pk}"])


# ---- write_many: a batch, all or none ------------------------------------------------------


def batch(*writes: tuple[str, bytes, int | None], quotas: Quotas = ROOMY, check_only=False):
    return WriteBatch(
        writes=[PendingWrite(path, body, expected) for path, body, expected in writes],
        updated_by="import:7",
        quotas=quotas,
        deadline=time.monotonic() + 5,
        check_only=check_only,
    )


def snapshot(adapter, handle):
    documents = {
        meta.path: (adapter.store.read(handle, meta.path).body, meta.revision)
        for meta in adapter.store.list(handle)
    }
    usage = adapter.store.usage(handle)
    return documents, usage.used_bytes, usage.tenant_used_bytes


def test_a_batch_writes_every_document_and_charges_its_total(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"old", expected=0)

    metas = adapter.store.write_many(
        handle, batch(("b.md", b"bee", 0), ("a.md", b"newer", 1), ("c/d.md", b"", None))
    )

    assert [(m.path, m.revision, m.size, m.updated_by) for m in metas] == [
        ("b.md", 1, 3, "import:7"),
        ("a.md", 2, 5, "import:7"),
        ("c/d.md", 1, 0, "import:7"),
    ]
    assert snapshot(adapter, handle) == (
        {"a.md": (b"newer", 2), "b.md": (b"bee", 1), "c/d.md": (b"", 1)},
        8,
        8,
    )
    assert adapter.store.read(handle, "a.md").meta.checksum == body_checksum(b"newer")


@pytest.mark.parametrize(
    ("writes", "refusal"),
    [
        ((("new.md", b"x", 0), ("a.md", b"y", 0)), VersionConflict),
        ((("new.md", b"x", 0), ("a.md", b"y", 5)), VersionConflict),
        ((("new.md", b"x", 0), ("a.md/under.md", b"y", 0)), InvalidDocumentPath),
        ((("n.md", b"x", 0), ("n.md/m.md", b"y", 0)), InvalidDocumentPath),
        ((("n.md", b"x", 0), ("n.md", b"y", None)), InvalidDocumentPath),
    ],
    ids=["create-only on existing", "stale revision", "path conflict", "conflict within", "twice"],
)
def test_one_refused_document_refuses_the_whole_batch(adapter, team, writes, refusal):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"kept", expected=0)
    before = snapshot(adapter, handle)

    with pytest.raises(refusal):
        adapter.store.write_many(handle, batch(*writes))

    assert snapshot(adapter, handle) == before


def test_a_batch_is_charged_as_one_delta(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "big.md", b"x" * 50, expected=0)
    adapter.write(handle, "other.md", b"y" * 40, expected=0)
    quotas = Quotas(space_bytes=100, tenant_bytes=0)

    # Written one by one in this order the new document would pass the quota first; as one
    # delta (+40 - 40) the batch fits.
    adapter.store.write_many(
        handle, batch(("new.md", b"z" * 40, 0), ("big.md", b"x" * 10, 1), quotas=quotas)
    )

    assert adapter.store.usage(handle).used_bytes == 90
    with pytest.raises(SpaceQuotaExceeded) as refused:
        adapter.store.write_many(
            handle, batch(("n1.md", b"1" * 6, 0), ("n2.md", b"2" * 6, 0), quotas=quotas)
        )
    assert refused.value.detail == {"usedBytes": 90, "deltaBytes": 12, "quotaBytes": 100}
    assert adapter.store.usage(handle).used_bytes == 90


def test_a_batch_past_the_tenant_quota_is_refused_by_the_tenant(adapter, team):
    handle = handle_of(team)
    adapter.write(handle_of(team, name="other"), "a.md", b"x" * 8, expected=0)

    with pytest.raises(TenantQuotaExceeded) as refused:
        adapter.store.write_many(
            handle,
            batch(("a.md", b"1" * 2, 0), ("b.md", b"2" * 2, 0), quotas=Quotas(3, 10)),
        )

    assert refused.value.detail == {"usedBytes": 8, "deltaBytes": 4, "quotaBytes": 10}
    assert list(adapter.store.list(handle)) == []


def test_a_checked_batch_answers_the_same_and_writes_nothing(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"old", expected=0)
    before = snapshot(adapter, handle)

    checked = adapter.store.write_many(
        handle, batch(("a.md", b"newer", 1), ("b.md", b"bee", 0), check_only=True)
    )

    assert [(m.path, m.revision, m.size) for m in checked] == [("a.md", 2, 5), ("b.md", 1, 3)]
    assert snapshot(adapter, handle) == before
    with pytest.raises(SpaceQuotaExceeded):
        adapter.store.write_many(
            handle, batch(("c.md", b"cc", 0), quotas=Quotas(4, 0), check_only=True)
        )


class Reader:
    """A batch still being read (`write_many_as_read`): offers `offered` while reading,
    then answers `writes`, or raises `refusal` there (after the store may have written the
    offered documents)."""

    def __init__(self, offered, writes, refusal=None):
        self.offered, self.answered, self.refusal = offered, writes, refusal

    def read(self, offer):
        for path, body, expected in self.offered:
            offer(PendingWrite(path, body, expected))

    def writes(self):
        if self.refusal is not None:
            raise self.refusal
        return [PendingWrite(path, body, expected) for path, body, expected in self.answered]


def test_a_batch_written_as_it_is_read_writes_what_the_reader_answers(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"old", expected=0)
    new = [("b.md", b"bee", 0), ("c/d.md", b"", 0)]
    # `a.md` is offered as new though the space holds it: the judgement refuses or writes
    # it, whatever was offered.
    writes = [*new, ("a.md", b"newer", 1), ("e.md", b"not offered", 0)]

    metas = adapter.store.write_many_as_read(
        handle, batch(), Reader([*new, ("a.md", b"newer", 0)], writes)
    )

    assert [(m.path, m.revision, m.size, m.updated_by) for m in metas] == [
        ("b.md", 1, 3, "import:7"),
        ("c/d.md", 1, 0, "import:7"),
        ("a.md", 2, 5, "import:7"),
        ("e.md", 1, 11, "import:7"),
    ]
    assert snapshot(adapter, handle) == (
        {
            "a.md": (b"newer", 2),
            "b.md": (b"bee", 1),
            "c/d.md": (b"", 1),
            "e.md": (b"not offered", 1),
        },
        19,
        19,
    )
    assert adapter.store.read(handle, "b.md").meta.checksum == body_checksum(b"bee")


@pytest.mark.parametrize(
    ("writes", "refusal", "error"),
    [
        ([("n.md", b"x", 0)], InvalidDocumentPath("refused by the reader"), InvalidDocumentPath),
        ([("n.md", b"x", 0), ("a.md", b"y", 0)], None, VersionConflict),
        ([("n.md", b"x", 0), ("a.md/n.md", b"y", 0)], None, InvalidDocumentPath),
        ([("n.md", b"x", 0), ("n.md/m.md", b"y", 0)], None, InvalidDocumentPath),
        ([("n.md", b"x" * 200, 0)], None, SpaceQuotaExceeded),
    ],
    ids=["by the reader", "create-only on existing", "path conflict", "within", "past the quota"],
)
def test_a_batch_refused_after_its_documents_were_offered_writes_nothing(
    adapter, team, writes, refusal, error
):
    handle, new = handle_of(team), handle_of(team, name="new")
    adapter.write(handle, "a.md", b"kept", expected=0)
    before = snapshot(adapter, handle)
    quotas = Quotas(space_bytes=100, tenant_bytes=0)
    # A refusal that needs `a.md` is judged in the space holding it; the others in a new
    # space as well, which is not created.
    targets = [handle] if any(path.startswith("a.md") for path, _, _ in writes) else [handle, new]

    for target in targets:
        with pytest.raises(error):
            adapter.store.write_many_as_read(
                target, batch(quotas=quotas), Reader(writes, writes, refusal)
            )

    assert snapshot(adapter, handle) == before
    assert snapshot(adapter, new) == ({}, 0, 4)
    assert adapter.store.spaces(team.pk) == [handle]


def test_read_all_answers_every_document_as_read_does(adapter, team):
    handle = handle_of(team)
    for path in ("b.md", "a/c.md", "a.md"):
        adapter.write(handle, path, path.encode(), expected=0)
    adapter.write(handle, "a.md", b"again", expected=1)
    adapter.write(handle_of(team, name="other"), "x.md", b"not this space", expected=0)

    everything = sorted(adapter.store.read_all(handle), key=lambda document: document.meta.path)

    assert everything == [adapter.store.read(handle, path) for path in ("a.md", "a/c.md", "b.md")]
    assert list(adapter.store.read_all(handle_of(team, name="never"))) == []


# ---- private_spaces_expire: a private space's lifetime -------------------------------------

TTL = timedelta(days=7)


def expire(adapter):
    return adapter.store.private_spaces_expire(written_before=timezone.now() - TTL)


def test_a_private_space_expires_a_lifetime_after_its_last_write_and_nothing_else(adapter, team):
    stale = handle_of(team, Visibility.PRIVATE, run="stale")
    recent = handle_of(team, Visibility.PRIVATE, run="recent")
    lasting = handle_of(team, Visibility.PROJECT)
    adapter.write(stale, "a.md", b"12345", expected=0)
    adapter.write(stale, "notes/b.md", b"678", expected=0)
    adapter.write(recent, "a.md", b"kept", expected=0)
    adapter.write(lasting, "a.md", b"project", expected=0)
    adapter.age(stale, TTL + timedelta(hours=1))
    adapter.age(recent, TTL - timedelta(hours=1))
    adapter.age(lasting, TTL * 10)

    expired = expire(adapter)

    assert [(each.handle, each.documents, each.freed_bytes) for each in expired] == [(stale, 2, 8)]
    assert adapter.store.list(stale) == []
    assert adapter.store.read(stale, "a.md") is None
    assert adapter.store.usage(stale).used_bytes == 0
    assert adapter.store.read(recent, "a.md").body == b"kept"
    assert adapter.store.read(lasting, "a.md").body == b"project"
    assert adapter.store.usage(recent).tenant_used_bytes == len(b"kept") + len(b"project")
    assert adapter.store.spaces(team.pk) == sorted([recent, lasting], key=lambda h: h.id)
    assert expire(adapter) == []


@pytest.mark.parametrize("change", ["write", "delete", "write_many"])
def test_every_change_of_a_private_space_starts_its_lifetime_again(adapter, team, change):
    handle = handle_of(team, Visibility.PRIVATE)
    adapter.write(handle, "a.md", b"one", expected=0)
    adapter.write(handle, "b.md", b"two", expected=0)
    adapter.age(handle, TTL * 2)

    if change == "write":
        adapter.write(handle, "a.md", b"", expected=1)  # no byte moves; the time still does
    elif change == "delete":
        adapter.delete(handle, "b.md")
    else:
        adapter.store.write_many(handle, batch(("c.md", b"three", 0)))

    assert expire(adapter) == []
    assert adapter.store.read(handle, "a.md") is not None


def test_a_write_after_expiry_starts_the_space_again_from_nothing(adapter, team):
    handle = handle_of(team, Visibility.PRIVATE)
    adapter.write(handle, "a.md", b"old", expected=0)
    adapter.write(handle, "a.md", b"older", expected=1)
    adapter.age(handle, TTL * 2)
    expire(adapter)

    meta = adapter.write(handle, "a.md", b"new", expected=0)

    assert meta.revision == 1
    usage = adapter.store.usage(handle)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (3, 3)


@pytest.mark.django_db(transaction=True)
def test_a_private_space_a_writer_holds_is_left_for_the_next_run(adapter, team, settings):
    if adapter.name == "database" and connection.vendor != "postgresql":
        pytest.skip("the database store's wait is PostgreSQL's lock_timeout")
    settings.MEMORY_STORE_WAIT_SECONDS = 1
    handle = handle_of(team, Visibility.PRIVATE)
    adapter.write(handle, "a.md", b"busy", expected=0)
    adapter.age(handle, TTL * 2)

    with adapter.hold_space_lock(handle):
        assert expire(adapter) == []

    assert adapter.store.read(handle, "a.md").body == b"busy"
    assert [each.handle for each in expire(adapter)] == [handle]


def test_a_batch_creates_above_every_deleted_revision_too(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"one", expected=0)
    adapter.write(handle, "a.md", b"two", expected=1)
    adapter.delete(handle, "a.md", expected=2)

    checked = adapter.store.write_many(handle, batch(("a.md", b"x", 0), check_only=True))
    written = adapter.store.write_many(handle, batch(("a.md", b"x", 0), ("b.md", b"y", 0)))

    assert [meta.revision for meta in checked] == [3]
    assert [meta.revision for meta in written] == [3, 3]
    assert adapter.store.read(handle, "a.md").meta.revision == 3
    adapter.delete(handle, "b.md", expected=3)
    new = [("b.md", b"bee", 0), ("c.md", b"sea", 0)]
    as_read = adapter.store.write_many_as_read(handle, batch(), Reader(new, new))
    assert [meta.revision for meta in as_read] == [4, 4]
    assert snapshot(adapter, handle)[0] == {
        "a.md": (b"x", 3),
        "b.md": (b"bee", 4),
        "c.md": (b"sea", 4),
    }
