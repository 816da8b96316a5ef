"""Compare-and-set under real concurrency, on PostgreSQL with one connection per writer."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

import workspaces.services
from conftest import postgres_only, run_concurrently, wait_until_a_backend_waits_on_a_lock
from memory import provenance, services
from memory.errors import ProposalRetired
from memory.models import MEMORY_PATH, LineProvenance
from memory.provenance import memory_blame
from memory.selectors import memory_current_get, memory_policy_get
from memory.tests.conftest import proposal_create
from workspaces.errors import VersionConflict
from workspaces.models import FileVersion, TeamStorageUsage
from workspaces.services import api_token_create

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]


def stored_versions(tenant) -> list[int]:
    return list(
        FileVersion.objects.filter(file__workspace=tenant.workspace, file__path=MEMORY_PATH)
        .order_by("version")
        .values_list("version", flat=True)
    )


def client_of(tenant, user) -> APIClient:
    _, raw = api_token_create(user=user, team=tenant.team, name="race")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_two_writers_with_the_same_base_one_200_one_409(tenant, memory_revision):
    url = f"/api/v1/workspaces/{tenant.workspace.pk}/memory"
    clients = [client_of(tenant, tenant.member), client_of(tenant, tenant.admin)]

    def save(client, text):
        return lambda: client.put(url, {"content": text}, format="json", HTTP_X_BASE_VERSION="1")

    responses = run_concurrently(save(clients[0], "from tab A"), save(clients[1], "from tab B"))

    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 409]
    winner = next(r for r in responses if r.status_code == 200)
    loser = next(r for r in responses if r.status_code == 409)
    assert loser.json()["error"] == {
        "code": "VERSION_CONFLICT",
        "message": loser.json()["error"]["message"],
        "detail": {"currentVersion": 2},
    }
    final = memory_current_get(workspace=tenant.workspace)
    assert (final.version, winner.json()["version"]) == (2, 2)
    assert final.content in {"from tab A", "from tab B"}
    assert stored_versions(tenant) == [1, 2]


def test_eight_writers_with_the_same_base_exactly_one_lands(tenant, memory_revision):
    def save(n):
        return lambda: services.memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=1, content=f"w{n}"
        )

    results = run_concurrently(*(save(n) for n in range(8)))

    winners = [r for r in results if isinstance(r, FileVersion)]
    assert len(winners) == 1
    assert all(isinstance(r, VersionConflict) for r in results if r not in winners)
    assert stored_versions(tenant) == [1, 2]


def test_writer_blocked_behind_an_uncommitted_save_conflicts_once_it_commits(
    tenant, memory_revision
):
    holding = threading.Event()
    release = threading.Event()

    def first():
        with transaction.atomic():
            revision = services.memory_save(
                workspace=tenant.workspace, author=tenant.member, base_version=1, content="first"
            )
            holding.set()
            release.wait(timeout=30)
        return revision

    def second():
        holding.wait(timeout=30)
        return services.memory_save(
            workspace=tenant.workspace, author=tenant.admin, base_version=1, content="second"
        )

    def referee():
        holding.wait(timeout=30)
        wait_until_a_backend_waits_on_a_lock()
        release.set()

    results = run_concurrently(first, second, referee)

    assert isinstance(results[0], FileVersion)
    assert isinstance(results[1], VersionConflict)
    assert results[1].detail == {"currentVersion": 2}
    assert memory_current_get(workspace=tenant.workspace).content == "first"
    assert stored_versions(tenant) == [1, 2]


def test_a_save_overtaken_after_its_read_is_refused_by_its_compare_and_set(
    tenant, memory_revision, monkeypatch
):
    read_done, release = threading.Event(), threading.Event()
    real_read = workspaces.services._write_target

    def read_then_hold(*args, **kwargs):
        target = real_read(*args, **kwargs)
        if not read_done.is_set():
            read_done.set()
            release.wait(timeout=30)
        return target

    monkeypatch.setattr(workspaces.services, "_write_target", read_then_hold)
    # The team's usage is kept, and so charged, only under a quota.
    workspaces.services.org_quota_set(org=tenant.org, memory_quota_bytes=10**9, actor=None)
    used_before = TeamStorageUsage.objects.get(team=tenant.team).used_bytes

    def overtaken():
        return services.memory_save(
            workspace=tenant.workspace,
            author=tenant.member,
            base_version=1,
            content="- a much longer line the read saw version 1 for\n",
        )

    def overtaking():
        read_done.wait(timeout=30)
        try:
            return services.memory_save(
                workspace=tenant.workspace, author=tenant.admin, base_version=1, content="won"
            )
        finally:
            release.set()

    results = run_concurrently(overtaken, overtaking)

    assert isinstance(results[0], VersionConflict)
    assert results[0].detail == {"currentVersion": 2}
    assert isinstance(results[1], FileVersion)
    assert memory_current_get(workspace=tenant.workspace).content == "won"
    assert stored_versions(tenant) == [1, 2]
    # Charged once, for the winner's revision only.
    used_after = TeamStorageUsage.objects.get(team=tenant.team).used_bytes
    assert used_after == used_before + len("won") - len("- likes tea\n")


def test_clear_that_loses_a_race_writes_nothing_and_keeps_the_generation(tenant, memory_revision):
    holding = threading.Event()
    release = threading.Event()

    def save():
        with transaction.atomic():
            services.memory_save(
                workspace=tenant.workspace, author=tenant.member, base_version=1, content="newer"
            )
            holding.set()
            release.wait(timeout=30)

    def clear():
        holding.wait(timeout=30)
        return services.memory_clear(
            workspace=tenant.workspace, author=tenant.admin, base_version=1
        )

    def referee():
        holding.wait(timeout=30)
        wait_until_a_backend_waits_on_a_lock()
        release.set()

    results = run_concurrently(save, clear, referee)

    assert isinstance(results[1], VersionConflict)
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 0
    assert memory_current_get(workspace=tenant.workspace).content == "newer"
    assert stored_versions(tenant) == [1, 2]


def test_concurrent_first_writes_create_one_document_and_one_key(tenant):
    def create(n):
        return lambda: services.memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=0, content=f"c{n}"
        )

    results = run_concurrently(*(create(n) for n in range(6)))

    assert sum(isinstance(r, FileVersion) for r in results) == 1
    assert sum(isinstance(r, VersionConflict) for r in results) == 5
    assert stored_versions(tenant) == [1]
    assert memory_current_get(workspace=tenant.workspace).version == 1
    connection.close()


def test_two_blames_filling_the_origin_cache_at_once_keep_one_row_per_revision(tenant, monkeypatch):
    for base in range(5):
        services.memory_save(
            workspace=tenant.workspace,
            author=tenant.member,
            base_version=base,
            content=f"- kept\n- line {base}\n",
        )
    real_insert = provenance.origins_cache
    holds = threading.local()
    second_done = threading.Event()

    def insert_after_the_second(rows, **then):
        # The first blame has computed its rows; it inserts them only once the second one
        # has inserted the same rows and committed.
        if getattr(holds, "is_first", False):
            assert second_done.wait(timeout=30)
        return real_insert(rows, **then)

    def first():
        holds.is_first = True
        return memory_blame(workspace=tenant.workspace)

    def second():
        try:
            return memory_blame(workspace=tenant.workspace)
        finally:
            second_done.set()

    monkeypatch.setattr(provenance, "origins_cache", insert_after_the_second)

    results = run_concurrently(first, second)

    assert not [result for result in results if isinstance(result, BaseException)], results
    held, free = results
    assert [line.origin.version for line in held.lines] == [1, 5]
    assert held.lines == free.lines
    assert LineProvenance.objects.filter(revision__file__workspace=tenant.workspace).count() == 5


def test_a_dismiss_between_an_applys_check_and_its_write_leaves_memory_unchanged(
    tenant, memory_revision, monkeypatch
):
    proposal = proposal_create(tenant, "- likes green tea", "read_only")
    checked, release = threading.Event(), threading.Event()
    real_current_get = services.memory_current_get

    def check_then_hold(**kwargs):
        # The apply has found the proposal open; hold it there while the dismiss commits.
        if not checked.is_set():
            checked.set()
            release.wait(timeout=30)
        return real_current_get(**kwargs)

    monkeypatch.setattr(services, "memory_current_get", check_then_hold)

    def apply():
        return services.memory_proposal_apply(
            workspace=tenant.workspace,
            author=tenant.member,
            proposal_id=proposal.pk,
            base_version=1,
        )

    def dismiss():
        checked.wait(timeout=30)
        try:
            return services.memory_proposal_dismiss(
                workspace=tenant.workspace, author=tenant.admin, proposal_id=proposal.pk
            )
        finally:
            release.set()

    results = run_concurrently(apply, dismiss)

    assert isinstance(results[0], ProposalRetired)
    assert results[0].detail == {"status": "dismissed"}
    assert results[1] is None
    proposal.refresh_from_db()
    assert (proposal.status, proposal.resolved_by) == ("dismissed", tenant.admin)
    assert memory_current_get(workspace=tenant.workspace).content == "- likes tea\n"
    assert stored_versions(tenant) == [1]
