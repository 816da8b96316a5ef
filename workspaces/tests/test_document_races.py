"""Concurrent moves to one destination, on PostgreSQL with one connection per mover."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from conftest import postgres_only, run_concurrently, wait_until_a_backend_waits_on_a_lock
from workspaces.errors import DocumentExists, VersionConflict
from workspaces.models import File, FileVersion
from workspaces.services import file_move, file_write, workspace_key_ensure

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]


def write(tenant, path: str, text: str) -> FileVersion:
    return file_write(
        workspace=tenant.workspace,
        path=path,
        plaintext=text,
        base_version=0,
        data_key=workspace_key_ensure(workspace=tenant.workspace),
        author=tenant.member,
        author_kind=FileVersion.AuthorKind.HUMAN,
        change_kind=FileVersion.ChangeKind.SAVE,
    )


def rows(tenant) -> list[tuple[int, str]]:
    return list(
        File.objects.filter(workspace=tenant.workspace).order_by("pk").values_list("pk", "path")
    )


def in_thread(job: Callable[[], Any], results: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(job())
        except BaseException as error:
            results.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def move(tenant, source: str, destination: str) -> Callable[[], File]:
    return lambda: file_move(
        workspace=tenant.workspace, source=source, destination=destination, base_version=1
    )


def test_second_move_waits_on_the_destination_and_then_is_document_exists(tenant):
    a, b = write(tenant, "a.md", "a"), write(tenant, "b.md", "b")
    first_moved, release = threading.Event(), threading.Event()
    first: list[Any] = []
    second: list[Any] = []

    def hold_first_open() -> File:
        with transaction.atomic():
            moved = move(tenant, "a.md", "c.md")()
            first_moved.set()
            release.wait(timeout=30)
        return moved

    first_thread = in_thread(hold_first_open, first)
    assert first_moved.wait(timeout=30)
    second_thread = in_thread(move(tenant, "b.md", "c.md"), second)
    wait_until_a_backend_waits_on_a_lock()
    release.set()
    first_thread.join(timeout=60)
    second_thread.join(timeout=60)

    assert isinstance(first[0], File)
    assert isinstance(second[0], DocumentExists)
    assert rows(tenant) == [(a.file_id, "c.md"), (b.file_id, "b.md")]


def test_when_the_first_mover_rolls_back_the_waiting_one_lands(tenant):
    a, b = write(tenant, "a.md", "a"), write(tenant, "b.md", "b")
    first_moved, release = threading.Event(), threading.Event()
    first: list[Any] = []
    second: list[Any] = []

    def move_then_abort() -> None:
        with transaction.atomic():
            move(tenant, "a.md", "c.md")()
            first_moved.set()
            release.wait(timeout=30)
            transaction.set_rollback(True)

    first_thread = in_thread(move_then_abort, first)
    assert first_moved.wait(timeout=30)
    second_thread = in_thread(move(tenant, "b.md", "c.md"), second)
    wait_until_a_backend_waits_on_a_lock()
    release.set()
    first_thread.join(timeout=60)
    second_thread.join(timeout=60)

    assert isinstance(second[0], File)
    assert rows(tenant) == [(a.file_id, "a.md"), (b.file_id, "c.md")]


@pytest.mark.parametrize("same_source", [False, True])
def test_two_concurrent_moves_to_one_destination_exactly_one_lands(tenant, same_source):
    write(tenant, "a.md", "a")
    write(tenant, "b.md", "b")
    before = {pk for pk, _ in rows(tenant)}
    sources = ["a.md", "a.md"] if same_source else ["a.md", "b.md"]

    results = run_concurrently(*(move(tenant, source, "c.md") for source in sources))

    winners = [result for result in results if isinstance(result, File)]
    losers = [result for result in results if not isinstance(result, File)]
    assert len(winners) == 1
    expected = VersionConflict if same_source else DocumentExists
    assert len(losers) == 1
    assert isinstance(losers[0], expected)
    after = dict(rows(tenant))
    assert set(after) == before
    assert after[winners[0].pk] == "c.md"
    expected_paths = [["b.md", "c.md"]] if same_source else [["a.md", "c.md"], ["b.md", "c.md"]]
    assert sorted(after.values()) in expected_paths
