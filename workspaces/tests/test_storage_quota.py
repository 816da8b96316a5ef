"""The org's memory quota bounds each team's storage usage, counted in the transaction of
every write, delete and restore, so that concurrent writers cannot pass it together."""

from __future__ import annotations

import importlib
import threading

import pytest
from django.apps import apps
from django.db import connection, transaction

from conftest import postgres_only, run_concurrently
from memory.services import memory_clear, memory_save
from workspaces import services
from workspaces.errors import TenantQuotaExceeded
from workspaces.models import File, FileVersion, Org, Team, TeamStorageUsage
from workspaces.services import (
    file_delete,
    file_restore,
    file_write,
    org_quota_set,
    workspace_create,
    workspace_key_ensure,
)


def write(workspace, path: str, text: str, base: int = 0, author=None) -> FileVersion:
    return file_write(
        workspace=workspace,
        path=path,
        plaintext=text,
        base_version=base,
        data_key=workspace_key_ensure(workspace=workspace),
        author=author,
        author_kind=FileVersion.AuthorKind.HUMAN,
        change_kind=FileVersion.ChangeKind.SAVE,
    )


def used(team: Team) -> int:
    return TeamStorageUsage.objects.get(team=team).used_bytes


def quota(org: Org, value: int, actor) -> None:
    org_quota_set(org=org, memory_quota_bytes=value, actor=actor)


def grow(workspace):
    """The write of a.md's version 2, 25 bytes, to run in a thread of its own."""
    return lambda: write(workspace, "a.md", "x" * 25, base=1)


def held_after(monkeypatch, name: str) -> tuple[threading.Event, threading.Event]:
    """Stop each call of `workspaces.services.<name>` once it has returned, inside its
    caller's transaction, until the second event is set; the first is set when one has."""
    reached, release = threading.Event(), threading.Event()
    original = getattr(services, name)

    def held(*args, **kwargs):
        result = original(*args, **kwargs)
        reached.set()
        release.wait(timeout=30)
        return result

    monkeypatch.setattr(services, name, held)
    return reached, release


def test_usage_follows_writes_deletes_and_restores_across_the_teams_workspaces(tenant):
    quota(tenant.org, 10_000, tenant.admin)
    second = workspace_create(team=tenant.team, name="second", admin=tenant.admin)

    write(tenant.workspace, "a.md", "x" * 100)
    write(second, "b.md", "y" * 50)
    write(tenant.workspace, "a.md", "x" * 30, base=1)
    memory_save(workspace=second, author=tenant.admin, base_version=0, content="é" * 10)

    assert used(tenant.team) == 30 + 50 + 20  # UTF-8 bytes of the current revisions
    file_delete(workspace=second, path="b.md", base_version=1)
    assert used(tenant.team) == 30 + 20
    file_restore(workspace=second, path="b.md", base_version=1)
    assert used(tenant.team) == 30 + 50 + 20
    memory_clear(workspace=second, author=tenant.admin, base_version=1)
    assert used(tenant.team) == 30 + 50


def test_a_write_past_the_quota_is_refused_and_changes_nothing(tenant):
    quota(tenant.org, 100, tenant.admin)
    write(tenant.workspace, "a.md", "x" * 60)

    with pytest.raises(TenantQuotaExceeded) as refused:
        write(tenant.workspace, "a.md", "x" * 101, base=1)
    with pytest.raises(TenantQuotaExceeded):
        write(tenant.workspace, "b.md", "y" * 41)

    assert refused.value.detail == {"usedBytes": 60, "deltaBytes": 41, "quotaBytes": 100}
    assert used(tenant.team) == 60
    assert File.objects.get(path="a.md").current_version == 1
    assert not File.objects.filter(path="b.md").exists()
    # Exactly up to the quota is allowed, and shrinking always is.
    write(tenant.workspace, "b.md", "y" * 40)
    assert used(tenant.team) == 100
    quota(tenant.org, 10, tenant.admin)
    write(tenant.workspace, "a.md", "x", base=1)
    assert used(tenant.team) == 41


def test_a_restore_past_the_quota_is_refused_and_the_document_stays_deleted(tenant):
    write(tenant.workspace, "a.md", "x" * 60)
    file_delete(workspace=tenant.workspace, path="a.md", base_version=1)
    quota(tenant.org, 100, tenant.admin)
    write(tenant.workspace, "b.md", "y" * 50)

    with pytest.raises(TenantQuotaExceeded):
        file_restore(workspace=tenant.workspace, path="a.md", base_version=1)

    assert File.objects.get(path="a.md").is_deleted
    assert used(tenant.team) == 50


def test_each_team_of_an_org_has_its_own_usage_under_the_orgs_quota(make_tenant):
    tenant = make_tenant()
    other_team = Team.objects.create(org=tenant.org, name="other team")
    other = workspace_create(team=other_team, name="other", admin=tenant.admin)
    quota(tenant.org, 100, tenant.admin)

    write(tenant.workspace, "a.md", "x" * 100)
    write(other, "a.md", "x" * 100)

    assert (used(tenant.team), used(other_team)) == (100, 100)


def test_the_api_refuses_a_note_past_the_quota_with_the_numbers(tenant):
    quota(tenant.org, 10, tenant.admin)
    client = tenant.client_for(tenant.member)
    url = f"/api/v1/workspaces/{tenant.workspace.pk}/documents?path=notes/a.md"

    response = client.put(url, {"content": "x" * 11}, format="json", HTTP_X_BASE_VERSION="0")

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "TENANT_QUOTA_EXCEEDED"
    assert error["detail"] == {"usedBytes": 0, "deltaBytes": 11, "quotaBytes": 10}
    assert not File.objects.filter(workspace=tenant.workspace).exists()


def test_the_migration_counts_what_teams_already_store(tenant):
    write(tenant.workspace, "a.md", "x" * 70)
    write(tenant.workspace, "gone.md", "y" * 5)
    file_delete(workspace=tenant.workspace, path="gone.md", base_version=1)
    TeamStorageUsage.objects.all().delete()
    migration = importlib.import_module("workspaces.migrations.0006_team_storage_usage")

    migration.count_existing_documents(apps, None)

    assert used(tenant.team) == 70


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_cannot_pass_the_quota_together(tenant):
    quota(tenant.org, 500, tenant.admin)
    write(tenant.workspace, "first.md", "x" * 100)  # the usage row exists before the race

    def create(n: int):
        def work():
            with transaction.atomic():
                return write(tenant.workspace, f"n{n}.md", "y" * 100)

        return work

    results = run_concurrently(*(create(n) for n in range(12)))

    refused = [r for r in results if isinstance(r, TenantQuotaExceeded)]
    assert len(refused) == 8
    assert len([r for r in results if isinstance(r, FileVersion)]) == 4
    assert used(tenant.team) == 500
    assert File.objects.filter(workspace=tenant.workspace).count() == 5


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_first_writes_of_a_team_count_every_byte(tenant):
    quota(tenant.org, 10_000, tenant.admin)  # before any document: no usage row yet
    results = run_concurrently(
        *(lambda n=n: write(tenant.workspace, f"n{n}.md", "y" * 10) for n in range(8))
    )

    assert all(isinstance(r, FileVersion) for r in results), results
    assert used(tenant.team) == 80


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_write_locks_the_teams_usage_only_after_inserting_its_revision(tenant, monkeypatch):
    # Under a quota every growing or shrinking write of the team updates the one usage row,
    # and holds its lock until the commit: taken before the encryption and the INSERT, it
    # serialised the team's writes for longer than the commit's own flush.
    quota(tenant.org, 10_000, tenant.admin)
    write(tenant.workspace, "a.md", "x" * 10)
    inserting, release = held_after(monkeypatch, "_revision_insert")

    def other_writer():
        inserting.wait(timeout=30)
        try:
            with transaction.atomic():
                # NOWAIT: an error now, instead of waiting, if the held write has the row.
                list(
                    TeamStorageUsage.objects.select_for_update(nowait=True).filter(team=tenant.team)
                )
            return "free"
        finally:
            release.set()

    saved, usage_row = run_concurrently(grow(tenant.workspace), other_writer)

    assert usage_row == "free"
    assert isinstance(saved, FileVersion)
    assert saved.version == 2
    assert used(tenant.team) == 25


def test_without_a_quota_no_usage_is_kept_and_setting_one_counts_what_the_teams_store(
    make_tenant,
):
    tenant = make_tenant()
    other_team = Team.objects.create(org=tenant.org, name="other team")
    other = workspace_create(team=other_team, name="other", admin=tenant.admin)
    write(tenant.workspace, "a.md", "x" * 70)
    write(tenant.workspace, "a.md", "x" * 40, base=1)
    write(tenant.workspace, "gone.md", "z" * 500)
    file_delete(workspace=tenant.workspace, path="gone.md", base_version=1)
    memory_save(workspace=other, author=tenant.admin, base_version=0, content="é" * 10)

    assert not TeamStorageUsage.objects.exists()
    quota(tenant.org, 1_000, tenant.admin)

    assert (used(tenant.team), used(other_team)) == (40, 20)
    write(tenant.workspace, "a.md", "x" * 45, base=2)
    assert used(tenant.team) == 45
    # Changing a quota keeps the usage; only setting one where there was none counts it.
    TeamStorageUsage.objects.filter(team=tenant.team).update(used_bytes=44)
    quota(tenant.org, 2_000, tenant.admin)
    assert used(tenant.team) == 44


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_quota_set_while_a_write_is_in_flight_counts_that_write(tenant, monkeypatch):
    # Without a quota a write keeps no usage; a quota set meanwhile must not count the
    # documents before that write commits, or its bytes would never be counted.
    write(tenant.workspace, "a.md", "x" * 10)
    # The write holds the org's row from its statement (the quota's read rides on it).
    charging, release = held_after(monkeypatch, "_revision_insert")

    def quota_setter():
        charging.wait(timeout=30)
        try:
            return quota(tenant.org, 100, tenant.admin)
        finally:
            release.set()

    def releaser():
        # The write stays held until the quota's transaction waits for its lock (or, were
        # there none, has ended), so the quota is set while the write is in flight.
        charging.wait(timeout=30)
        with connection.cursor() as cursor:
            while not release.is_set():
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
                if cursor.fetchone()[0]:
                    release.set()

    saved, _quota, _released = run_concurrently(grow(tenant.workspace), quota_setter, releaser)

    assert isinstance(saved, FileVersion)
    assert saved.version == 2
    assert used(tenant.team) == 25
