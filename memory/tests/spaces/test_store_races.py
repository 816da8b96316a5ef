"""Writers racing on one space, each on its own connection (and, for the filesystem store,
its own lock descriptor): counters never drift and the compare-and-set has one winner."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from conftest import postgres_only, run_concurrently
from memory.spaces.store import DocumentMeta, PendingWrite, Quotas, WriteBatch
from memory.tests.spaces.conftest import handle_of
from workspaces.errors import TenantQuotaExceeded, VersionConflict

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]


def test_sixteen_writers_of_one_space_leave_usage_equal_to_the_documents(adapter, team):
    handle = handle_of(team)
    bodies = {f"notes/{index:02}.md": b"x" * (100 + index) for index in range(16)}

    results = run_concurrently(
        *(
            lambda path=path, body=body: adapter.write(handle, path, body, expected=0, wait=30)
            for path, body in bodies.items()
        )
    )

    assert all(not isinstance(result, BaseException) for result in results), results
    expected = sum(len(body) for body in bodies.values())
    usage = adapter.store.usage(handle)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (expected, expected)
    assert [meta.path for meta in adapter.store.list(handle)] == sorted(bodies)
    assert {drift.drift for drift in adapter.store.reconcile()} == {0}


def test_twelve_writers_of_one_path_on_the_same_base_have_exactly_one_winner(adapter, team):
    handle = handle_of(team)
    adapter.write(handle, "a.md", b"base", expected=0)

    results = run_concurrently(
        *(
            lambda index=index: adapter.write(
                handle, "a.md", f"writer {index:02}".encode(), expected=1, wait=30
            )
            for index in range(12)
        )
    )

    winners = [result for result in results if not isinstance(result, BaseException)]
    conflicts = [result for result in results if isinstance(result, VersionConflict)]
    assert len(winners) == 1, results
    assert len(conflicts) == 11, results
    assert {conflict.detail["currentVersion"] for conflict in conflicts} == {2}
    stored = adapter.store.read(handle, "a.md")
    assert stored.meta == winners[0]
    assert stored.meta.revision == 2
    assert adapter.store.usage(handle).used_bytes == len(b"writer 00")
    assert {drift.drift for drift in adapter.store.reconcile()} == {0}


def test_a_tenants_first_batches_into_several_spaces_at_once_stay_within_its_quota(adapter, team):
    # A batch (an import) checked the tenant's counter under its row lock, but a tenant
    # that had never written had no row to lock: every first batch read 0 and passed, and
    # eight imports of 2,000 bytes took a tenant of 10,000 to 16,000.
    quotas = Quotas(space_bytes=0, tenant_bytes=10_000)

    def batch(index: int) -> Sequence[DocumentMeta]:
        return adapter.store.write_many(
            handle_of(team, name=f"space-{index}"),
            WriteBatch(
                writes=[PendingWrite(path="a.md", body=b"x" * 2_000, expected_revision=0)],
                updated_by="import:1",
                quotas=quotas,
                deadline=time.monotonic() + 30,
            ),
        )

    results = run_concurrently(*(lambda index=index: batch(index) for index in range(8)))

    landed = [result for result in results if not isinstance(result, BaseException)]
    refused = [result for result in results if isinstance(result, TenantQuotaExceeded)]
    assert (len(landed), len(refused)) == (5, 3), results
    spaces = [handle_of(team, name=f"space-{index}") for index in range(8)]
    assert adapter.store.usage(spaces[0]).tenant_used_bytes == 10_000
    assert sum(adapter.store.usage(space).used_bytes for space in spaces) == 10_000
    assert {drift.drift for drift in adapter.store.reconcile()} == {0}
