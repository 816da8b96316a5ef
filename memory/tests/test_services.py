"""Service-level guarantees: all-or-nothing writes and the policy compare-and-set."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import workspaces.services
from memory import services
from memory.errors import PolicyRevisionConflict
from memory.models import MEMORY_PATH, MemoryPolicy
from memory.selectors import memory_current_get, memory_policy_get
from workspaces.errors import VersionConflict
from workspaces.models import FileVersion, TeamStorageUsage, Workspace


class InjectedFailure(Exception):
    pass


@pytest.fixture
def fail_after_revision_insert(monkeypatch):
    """Make the revision insert succeed, then fail inside the same transaction."""
    real_insert = workspaces.services._revision_insert

    def insert_then_fail(*args, **kwargs):
        inserted, _quota = real_insert(*args, **kwargs)
        assert inserted is not None
        assert FileVersion.objects.filter(pk=inserted.pk).exists()
        raise InjectedFailure()

    monkeypatch.setattr(workspaces.services, "_revision_insert", insert_then_fail)


def revision_count(tenant) -> int:
    return FileVersion.objects.filter(file__workspace=tenant.workspace).count()


def test_failure_after_a_save_leaves_no_revision(
    tenant, memory_revision, fail_after_revision_insert
):
    with pytest.raises(InjectedFailure):
        services.memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=1, content="lost"
        )

    assert revision_count(tenant) == 1
    assert memory_current_get(workspace=tenant.workspace).version == 1


def test_failure_after_a_clear_leaves_no_revision_and_no_generation_change(
    tenant, memory_revision, fail_after_revision_insert
):
    with pytest.raises(InjectedFailure):
        services.memory_clear(workspace=tenant.workspace, author=tenant.member, base_version=1)

    assert revision_count(tenant) == 1
    assert memory_current_get(workspace=tenant.workspace).content == "- likes tea\n"
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 0


def test_policy_missing_row_reads_as_read_only_revision_0_generation_0(tenant):
    state = memory_policy_get(workspace=tenant.workspace)

    assert (state.mode, state.policy_revision, state.clear_generation) == ("read_only", 0, 0)
    assert not MemoryPolicy.objects.exists()


def test_policy_change_bumps_the_revision_and_nothing_else(tenant):
    services.memory_policy_set(
        workspace=tenant.workspace, mode="auto", expected_revision=0, actor=tenant.member
    )

    state = services.memory_policy_set(
        workspace=tenant.workspace, mode="off", expected_revision=1, actor=tenant.member
    )

    assert (state.mode, state.policy_revision, state.clear_generation) == ("off", 2, 0)
    workspace = Workspace.objects.get(pk=tenant.workspace.pk)
    assert (workspace.ai_enabled, workspace.ai_consent_revision) == (True, 0)


def test_stale_policy_revision_is_refused_and_changes_nothing(tenant):
    services.memory_policy_set(
        workspace=tenant.workspace, mode="auto", expected_revision=0, actor=tenant.member
    )

    with pytest.raises(PolicyRevisionConflict) as refused:
        services.memory_policy_set(
            workspace=tenant.workspace, mode="off", expected_revision=0, actor=tenant.member
        )

    assert refused.value.detail == {"currentRevision": 1}
    state = memory_policy_get(workspace=tenant.workspace)
    assert (state.mode, state.policy_revision) == ("auto", 1)


def test_clear_generation_never_moves_back_through_undo(tenant, memory_revision):
    services.memory_clear(workspace=tenant.workspace, author=tenant.member, base_version=1)
    services.memory_undo(
        workspace=tenant.workspace, author=tenant.member, base_version=2, restore_version=1
    )

    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 1
    assert memory_current_get(workspace=tenant.workspace).content == "- likes tea\n"
    kinds = list(
        FileVersion.objects.filter(file__path=MEMORY_PATH)
        .order_by("version")
        .values_list("change_kind", flat=True)
    )
    assert kinds == ["save", "clear", "undo"]


def work_statements(captured: CaptureQueriesContext) -> list[str]:
    """The statements that did work, without transaction control."""
    control = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")
    return [
        query["sql"]
        for query in captured.captured_queries
        if not query["sql"].lstrip().upper().startswith(control)
    ]


@pytest.mark.django_db(transaction=True)
def test_a_save_sends_a_read_then_the_compare_and_set_with_the_revision_insert(
    tenant, memory_revision
):
    same_size = "- likes tee\n"  # as long as the saved text: no storage charge

    with CaptureQueriesContext(connection) as captured:
        services.memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=1, content=same_size
        )

    # then: the key came with the read; a new statement here fails this test
    statements = work_statements(captured)
    assert statements[0].lstrip().startswith("SELECT")
    if connection.vendor == "postgresql":
        # The bump and the insert are one statement, atomic by itself: with no storage to
        # charge, no BEGIN or COMMIT either. Two round trips.
        assert len(captured.captured_queries) == 2, captured.captured_queries
        assert len(statements) == 2, statements
        assert statements[1].startswith('WITH bumped AS (UPDATE "workspaces_file"')
        assert 'INSERT INTO "workspaces_fileversion"' in statements[1]
    else:
        assert len(statements) == 3, statements
        assert statements[1].startswith('UPDATE "workspaces_file"')
        assert statements[2].startswith('INSERT INTO "workspaces_fileversion"')
    assert not any("SAVEPOINT" in query["sql"] for query in captured.captured_queries)
    assert memory_current_get(workspace=tenant.workspace).content == same_size


@pytest.mark.django_db(transaction=True)
def test_a_save_that_changes_the_size_reads_the_quota_with_its_write(tenant, memory_revision):
    longer = "- likes green tea\n"

    with CaptureQueriesContext(connection) as captured:
        services.memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=1, content=longer
        )

    # then: the storage charge needs the transaction and the org's quota, read with its row
    # held; on PostgreSQL that read is part of the write's statement. Four round trips.
    sent = [query["sql"] for query in captured.captured_queries]
    if connection.vendor == "postgresql":
        assert [sql.split()[0] for sql in sent] == ["SELECT", "BEGIN", "WITH", "COMMIT"], sent
        assert "FOR KEY SHARE" in sent[2]
    else:
        assert len(work_statements(captured)) == 4, sent
    assert memory_current_get(workspace=tenant.workspace).content == longer


class TransactionRefused:
    @staticmethod
    def atomic(*args, **kwargs):
        raise AssertionError("a refused save must not open a transaction")


@pytest.mark.django_db(transaction=True)
def test_a_stale_save_is_refused_by_one_read_without_a_transaction_or_the_key(
    tenant, memory_revision, monkeypatch
):
    def refuse(*args, **kwargs):
        raise AssertionError("a refused save must not need the data key")

    monkeypatch.setattr(workspaces.services, "data_key_unwrap", refuse)
    monkeypatch.setattr(workspaces.services, "workspace_key_ensure", refuse)
    monkeypatch.setattr(workspaces.services, "seal", refuse)
    monkeypatch.setattr(workspaces.services, "transaction", TransactionRefused)

    with CaptureQueriesContext(connection) as captured, pytest.raises(VersionConflict) as refused:
        services.memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=7, content="stale"
        )

    assert refused.value.detail == {"currentVersion": 1}
    assert len(captured.captured_queries) == 1
    assert revision_count(tenant) == 1


@pytest.mark.django_db(transaction=True)
def test_a_save_overtaken_between_its_read_and_its_write_is_refused_and_writes_nothing(
    tenant, memory_revision, monkeypatch
):
    real_read = workspaces.services._write_target
    # Marked before the overtaking Save, whose own read comes back through the hook.
    overtaken: list[bool] = []
    overtaking: list[FileVersion] = []

    def read_then_overtake(*args, **kwargs):
        target = real_read(*args, **kwargs)
        if not overtaken:
            overtaken.append(True)
            overtaking.append(
                services.memory_save(
                    workspace=tenant.workspace, author=tenant.admin, base_version=1, content="won"
                )
            )
        return target

    monkeypatch.setattr(workspaces.services, "_write_target", read_then_overtake)
    # The team's usage is kept, and so charged, only under a quota.
    workspaces.services.org_quota_set(org=tenant.org, memory_quota_bytes=10**9, actor=None)
    used_before = TeamStorageUsage.objects.get(team=tenant.team).used_bytes

    with pytest.raises(VersionConflict) as refused:
        services.memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=1, content="lost text"
        )

    assert refused.value.detail == {"currentVersion": 2}
    assert [revision.version for revision in overtaking] == [2]
    assert revision_count(tenant) == 2
    assert memory_current_get(workspace=tenant.workspace).content == "won"
    used_after = TeamStorageUsage.objects.get(team=tenant.team).used_bytes
    assert used_after == used_before + len("won") - len("- likes tea\n")
