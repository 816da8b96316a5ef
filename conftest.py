"""Fixtures shared by every app's tests."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import IntegrityError, connection, connections, transaction
from django.test import override_settings
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from memory.bots import bot_create
from memory.services import memory_save
from workspaces.models import Bot, FileVersion, Org, Team, TeamMembership, User, Workspace
from workspaces.services import (
    api_token_create,
    team_membership_ensure,
    workspace_create,
    workspace_membership_ensure,
)

# The browser tests' fixtures (workspaces/tests/browser.py), shared by every app.
pytest_plugins = ["workspaces.tests.browser"]

_names = itertools.count(1)

# Properties are judged on their examples, never on the machine's speed: on a loaded
# 2-core runner a deadline or the too-slow health check fails correct code. Example counts
# stay hypothesis' modest default unless a property asks for more.
hypothesis_settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("suite")


@dataclass
class Tenant:
    org: Org
    team: Team
    workspace: Workspace
    admin: User
    member: User

    def client_for(self, user: User) -> APIClient:
        """An API client authenticated by a fresh personal access token of `user`."""
        _, raw = api_token_create(user=user, team=self.team, name="test")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        return client

    def bot_create(self, slug: str = "helper", **fields: Any) -> Bot:
        """A bot of the team (runtime `claw`, no spec unless given), created by the admin,
        made the team's owner for it."""
        team_membership_ensure(team=self.team, user=self.admin)
        TeamMembership.objects.filter(team=self.team, user=self.admin).update(
            role=TeamMembership.Role.OWNER
        )
        return bot_create(
            team=self.team,
            actor=self.admin,
            slug=slug,
            name=fields.pop("name", slug),
            runtime=fields.pop("runtime", Bot.Runtime.CLAW),
            **fields,
        )


@pytest.fixture(autouse=True)
def _test_settings(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Tests never run collectstatic, so the hashed-name manifest does not exist.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(scope="session", autouse=True)
def _cache_per_worker() -> Iterator[None]:
    """Give each xdist worker its own Redis database: cache.clear() flushes a whole database."""
    backend = django_settings.CACHES["default"]
    if not backend["BACKEND"].endswith("RedisCache"):
        yield
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    base, _, _ = backend["LOCATION"].rpartition("/")
    location = f"{base}/{1 + int(worker) % 15}"
    with override_settings(CACHES={"default": {**backend, "LOCATION": location}}):
        yield


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def make_tenant(db: None) -> Callable[..., Tenant]:
    """Build an org, team and workspace with an admin and a plain member."""

    def make(*, ai_enabled: bool = True) -> Tenant:
        n = next(_names)
        org = Org.objects.create(name=f"org {n}")
        team = Team.objects.create(org=org, name=f"team {n}")
        admin = User.objects.create_user(username=f"admin{n}", password="pw-admin-123")
        member = User.objects.create_user(username=f"member{n}", password="pw-member-123")
        workspace = workspace_create(
            team=team, name=f"workspace {n}", admin=admin, ai_enabled=ai_enabled
        )
        workspace_membership_ensure(workspace=workspace, user=member)
        return Tenant(org=org, team=team, workspace=workspace, admin=admin, member=member)

    return make


@pytest.fixture
def tenant(make_tenant: Callable[..., Tenant]) -> Tenant:
    return make_tenant()


@pytest.fixture
def memory_revision(tenant: Tenant) -> FileVersion:
    """A first saved revision of the tenant's memory document."""
    return memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- likes tea\n"
    )


@dataclass
class MemoryApi:
    """The human memory routes of one workspace, as one member sees them."""

    client: APIClient
    workspace_id: int

    @property
    def url(self) -> str:
        return f"/api/v1/workspaces/{self.workspace_id}/memory"

    def get(self) -> Any:
        return self.client.get(self.url)

    def put(self, body: dict[str, Any], base: str | int | None, **headers: Any) -> Any:
        if base is not None:
            headers["HTTP_X_BASE_VERSION"] = str(base)
        return self.client.put(self.url, body, format="json", **headers)

    def save(self, content: str, base: str | int | None) -> Any:
        return self.put({"content": content}, base)

    def clear(self, base: int) -> Any:
        return self.put({"content": ""}, base, HTTP_X_MEMORY_CLEAR="1")

    def undo(self, restore_version: int, base: int) -> Any:
        return self.put({"restoreVersion": restore_version}, base)


@pytest.fixture
def memory_api(tenant) -> MemoryApi:
    return MemoryApi(client=tenant.client_for(tenant.member), workspace_id=tenant.workspace.pk)


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert the response is the one error shape with `status` and `code`; return the error."""
    assert response.status_code == status, response.content
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


def violates(constraint: str, write: Callable[[], Any]) -> None:
    """Assert `write` is refused by the database, naming `constraint` where it can."""
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        write()
    # SQLite names the constraint for a CHECK but only the columns for a UNIQUE.
    if connection.vendor == "postgresql" or "unique" not in constraint:
        assert constraint in str(caught.value)


def run_concurrently(*work: Callable[[], Any], timeout: float = 60.0) -> list[Any]:
    """Run each callable in its own thread and database connection, started together.

    Returns each callable's result, or the exception it raised, in order. Fails if a
    thread is still running `timeout` seconds after the start: it has no result to return.
    """
    barrier = threading.Barrier(len(work))
    results: list[Any] = [None] * len(work)

    def run(index: int, job: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = job()
        except BaseException as error:
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(work)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    hung = [index for index, thread in enumerate(threads) if thread.is_alive()]
    if hung:
        raise AssertionError(f"job(s) {hung} still running after {timeout}s; no result")
    return results


def wait_until_a_backend_waits_on_a_lock(timeout: float = 30.0) -> None:
    """Block until some PostgreSQL backend is waiting on a lock (polls pg_stat_activity)."""
    deadline = time.monotonic() + timeout
    with connections["default"].cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0] > 0:
                return
            time.sleep(0.01)
    raise AssertionError("no backend started waiting on a lock")


class Interleaving:
    """One side is held at an exact point; the other runs into its lock; the referee
    releases the held side only once some backend really waits on a lock."""

    def __init__(self) -> None:
        self.holding, self.release = threading.Event(), threading.Event()

    def _hold(self) -> None:
        self.holding.set()
        self.release.wait(timeout=30)

    def held_in_its_transaction(self, action: Callable[[], Any]) -> Callable[[], Any]:
        """`action`, kept uncommitted (its locks held) until the referee releases it."""

        def run() -> Any:
            with transaction.atomic():
                result = action()
                self._hold()
            return result

        return run

    def once_held(self, work: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            self.holding.wait(timeout=30)
            return work()

        return run

    def referee(self) -> None:
        self.holding.wait(timeout=30)
        wait_until_a_backend_waits_on_a_lock()
        self.release.set()


def backend_terminate(pid: int) -> None:
    """Kill PostgreSQL backend `pid` from a second connection, as a server restart or an
    operator would, and return once it has gone (pg_terminate_backend's wait)."""

    def terminate() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])
            return bool(cursor.fetchone()[0])

    (terminated,) = run_concurrently(terminate)
    assert terminated is True, f"backend {pid} was not terminated: {terminated!r}"


postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="races need real concurrent PostgreSQL connections; CI runs these on PostgreSQL",
)


@pytest.fixture
def turns_held(monkeypatch) -> None:
    """Admitted turns stay queued, as while an out-of-process agent runtime holds the turn:
    no worker runs them here, so their delivery credential stays live (a turn that has
    ended ends its credential with it)."""
    monkeypatch.setattr("automation.services.turn_enqueue", lambda *, turn_id: None)
