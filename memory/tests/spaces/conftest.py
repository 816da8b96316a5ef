"""Both adapters of the memory space store, behind one fixture, with what a test needs to
reach around the seam: hold a space's lock from elsewhere, and corrupt a counter."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from memory.models import MemorySpace
from memory.spaces.database import DatabaseStore
from memory.spaces.filesystem import FilesystemStore, _flock
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.store import DocumentMeta, DocumentWrite, MemoryStore, Quotas
from workspaces.models import Org, Team

ADAPTERS = ("database", "filesystem")
# Room enough that only the quota a test sets refuses anything.
ROOMY = Quotas(space_bytes=0, tenant_bytes=0)
_names = itertools.count(1)


@dataclass
class Adapter:
    name: str
    store: MemoryStore
    hold_space_lock: Callable[[SpaceHandle], AbstractContextManager[None]]
    counter_set: Callable[[SpaceHandle, int], None]
    # Date the space's last write `age` ago, as if nothing had changed it since.
    age: Callable[[SpaceHandle, timedelta], None]

    def write(self, handle: SpaceHandle, path: str, body: bytes, **options: Any) -> DocumentMeta:
        return store_write(self.store, handle, path, body, **options)

    def delete(self, handle: SpaceHandle, path: str, *, expected: int | None = None) -> None:
        self.store.delete(handle, path, expected_revision=expected, deadline=time.monotonic() + 5)


def store_write(
    store: MemoryStore,
    handle: SpaceHandle,
    path: str,
    body: bytes,
    *,
    expected: int | None = None,
    by: str = "user:1",
    quotas: Quotas = ROOMY,
    wait: float = 5.0,
) -> DocumentMeta:
    """A write with the defaults a test of the store wants, waiting `wait` seconds at most."""
    request = DocumentWrite(
        path=path,
        body=body,
        expected_revision=expected,
        updated_by=by,
        quotas=quotas,
        deadline=time.monotonic() + wait,
    )
    return store.write(handle, request)


def _database_adapter() -> Adapter:
    @contextmanager
    def hold(handle: SpaceHandle) -> Iterator[None]:
        # Another connection holds the space's row lock until the block ends.
        held, release = threading.Event(), threading.Event()

        def holder() -> None:
            try:
                with transaction.atomic():
                    MemorySpace.objects.select_for_update().get(handle_id=handle.id)
                    held.set()
                    release.wait(timeout=30)
            finally:
                connection.close()

        thread = threading.Thread(target=holder)
        thread.start()
        assert held.wait(timeout=30)
        try:
            yield
        finally:
            release.set()
            thread.join(timeout=30)

    def counter_set(handle: SpaceHandle, used: int) -> None:
        MemorySpace.objects.filter(handle_id=handle.id).update(used_bytes=used)

    def age(handle: SpaceHandle, age: timedelta) -> None:
        MemorySpace.objects.filter(handle_id=handle.id).update(last_written_at=timezone.now() - age)

    return Adapter("database", DatabaseStore(), hold, counter_set, age)


def _filesystem_adapter(root: Path) -> Adapter:
    store = FilesystemStore(root=root)

    @contextmanager
    def hold(handle: SpaceHandle) -> Iterator[None]:
        # A second open file description conflicts with the store's, in this process too.
        with _flock(store._space_dir(handle) / "space.lock", deadline=None):
            yield

    def counter_set(handle: SpaceHandle, used: int) -> None:
        state_file = store._space_dir(handle) / "space.json"
        state = json.loads(state_file.read_text())
        state_file.write_text(json.dumps({**state, "usedBytes": used}))

    def age(handle: SpaceHandle, age: timedelta) -> None:
        state_file = store._space_dir(handle) / "space.json"
        state = json.loads(state_file.read_text())
        written = (timezone.now() - age).isoformat()
        state_file.write_text(json.dumps({**state, "lastWrittenAt": written}))

    return Adapter("filesystem", store, hold, counter_set, age)


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest, tmp_path: Path) -> Adapter:
    if request.param == "database":
        return _database_adapter()
    return _filesystem_adapter(tmp_path / "spaces")


@pytest.fixture
def make_team(db: None) -> Callable[[], Team]:
    def make() -> Team:
        n = next(_names)
        return Team.objects.create(org=Org.objects.create(name=f"space org {n}"), name=f"team {n}")

    return make


@pytest.fixture
def team(make_team: Callable[[], Team]) -> Team:
    return make_team()


def handle_of(
    tenant: Team | int | None,
    visibility: Visibility = Visibility.PROJECT,
    name: str = "notes",
    **axes: Any,
) -> SpaceHandle:
    """A space handle as the handle parser would build it for a caller of `tenant` (a team
    or its id; None for the global space)."""
    qualifiers: dict[Visibility, dict[str, Any]] = {
        Visibility.PRIVATE: {"run": "run-1", "user_id": 7},
        Visibility.BOT: {"project": "app", "bot": "helper"},
        Visibility.PROJECT: {"project": "app"},
        Visibility.USER: {"user_id": 7},
    }
    defaults = qualifiers.get(visibility, {})
    return SpaceHandle(
        visibility=visibility,
        name=name,
        tenant_id=tenant.pk if isinstance(tenant, Team) else tenant,
        **{**defaults, **axes},
    )
