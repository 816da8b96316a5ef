"""The fault suite: PostgreSQL backends killed in the middle of a Save, a Clear, a capture
and a turn, and a Redis the suite started itself stopped in the middle of requests.
Afterwards the invariants hold, checked with SQL over every row:

- no version bump without its revision (a file at version N has exactly revisions 1..N);
- no capture without its fence row (every captured revision has a fence with ok = 1);
- the Clear generation equals the number of Clears of the memory document;
- no turn is left unfinished once the reaper has run.

Each fault fires at an exact statement through Django's `execute_wrapper`, never by timing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.core.cache import cache
from django.db import OperationalError, connection
from django.db.models import F
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from automation import capture, runtime, services
from automation.models import Admission, CommitFence, Message, Turn
from automation.reaper import TURN_TIMED_OUT, turns_reap
from automation.tokens import delivery_credential_cache_key
from conftest import backend_terminate
from memory.models import MEMORY_PATH, MemoryPolicy
from memory.selectors import memory_current_get, memory_policy_get
from workspaces.models import File, FileVersion, KeySession
from workspaces.sql import table

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="kills PostgreSQL backends with pg_terminate_backend; CI runs it on PostgreSQL",
    ),
    pytest.mark.django_db(transaction=True),
]

CHANGE = {"expectedVersion": 1, "changes": [{"op": "add", "line": "- likes green tea"}]}


def invariants_violated() -> dict[str, list[Any]]:
    """Every row that breaks an invariant, by invariant (all empty when they hold)."""
    file, version = table(File), table(FileVersion)
    checks = {
        "version bump without its revision": (
            f"""SELECT f.id FROM {file} f
            WHERE f.current_version <> (SELECT count(*) FROM {version} v WHERE v.file_id = f.id)
               OR f.current_version <> (SELECT max(v.version) FROM {version} v
                                        WHERE v.file_id = f.id)""",
            [],
        ),
        "capture without its fence row": (
            f"""SELECT v.id FROM {version} v
            LEFT JOIN {table(CommitFence)} c ON c.revision_id = v.id AND c.ok = 1
            WHERE v.change_kind = 'capture' AND c.revision_id IS NULL""",
            [],
        ),
        "clear generation is not the number of clears": (
            f"""SELECT p.workspace_id FROM {table(MemoryPolicy)} p
            WHERE p.clear_generation <> (
                SELECT count(*) FROM {version} v JOIN {file} f ON f.id = v.file_id
                WHERE f.workspace_id = p.workspace_id AND f.path = %s
                  AND v.change_kind = 'clear')""",
            [MEMORY_PATH],
        ),
        "turn left unfinished": (
            f"SELECT t.id FROM {table(Turn)} t WHERE t.state IN ('queued', 'running')",
            [],
        ),
    }
    violated: dict[str, list[Any]] = {}
    with connection.cursor() as cursor:
        for name, (sql, params) in checks.items():
            cursor.execute(sql, params)
            violated[name] = [row[0] for row in cursor.fetchall()]
    return violated


def assert_invariants_hold_once_the_reaper_has_run() -> None:
    turns_reap(now=timezone.now() + timedelta(days=1))
    assert invariants_violated() == {name: [] for name in invariants_violated()}


@contextmanager
def at_statement(sql_part: str, fault: Callable[[], None]) -> Iterator[None]:
    """Run `fault` just before this thread's connection sends the first statement that
    contains `sql_part` (a write may be one part of a statement, as the fence's insert is);
    fails if no such statement was sent."""
    fired: list[str] = []

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any):
        if not fired and sql_part in sql:
            fired.append(sql)
            fault()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield
    assert fired, f"no statement contained {sql_part!r}"


def kill_this_backend() -> None:
    backend_terminate(connection.connection.info.backend_pid)


def internal_error(response: Any) -> None:
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "INTERNAL_ERROR"


@pytest.fixture
def api(memory_api):
    """The member's memory routes, answering 500 as a server would instead of raising."""
    memory_api.client.raise_request_exception = False
    return memory_api


def test_a_save_whose_backend_is_killed_before_its_revision_leaves_no_bare_bump(
    api, memory_revision
):
    with at_statement(f"INSERT INTO {table(FileVersion)}", kill_this_backend):
        killed = api.save("- likes coffee\n", base=1)
    again = api.save("- likes coffee\n", base=1)

    internal_error(killed)
    assert (again.status_code, again.json()["version"]) == (200, 2)
    assert memory_current_get(workspace=memory_revision.file.workspace).content == (
        "- likes coffee\n"
    )
    assert_invariants_hold_once_the_reaper_has_run()


def test_a_clear_whose_backend_is_killed_mid_way_neither_clears_nor_advances(api, memory_revision):
    workspace = memory_revision.file.workspace

    with at_statement(f"INSERT INTO {table(FileVersion)}", kill_this_backend):
        killed = api.clear(base=1)
    generation_after_the_kill = memory_policy_get(workspace=workspace).clear_generation
    cleared = api.clear(base=1)

    internal_error(killed)
    assert generation_after_the_kill == 0
    assert (cleared.status_code, cleared.json()["version"]) == (200, 2)
    assert memory_policy_get(workspace=workspace).clear_generation == 1
    assert_invariants_hold_once_the_reaper_has_run()


class Runtime:
    """An out-of-process agent runtime holding one turn's delivery credential."""

    def __init__(self, assistant: Any, admission: Admission) -> None:
        self.url = f"/api/v1/automation/workspaces/{assistant.tenant.workspace.pk}/memory"
        self.client = APIClient(raise_request_exception=False)
        credential = cache.get(delivery_credential_cache_key(admission.pk))
        self.headers: dict[str, Any] = {
            "HTTP_AUTHORIZATION": f"Delivery {credential}",
            "HTTP_IDEMPOTENCY_KEY": f"memory:{admission.pk}",
            "HTTP_X_KEY_SESSION": str(assistant.key_session.pk),
        }

    def capture(self) -> Any:
        return self.client.put(self.url, CHANGE, format="json", **self.headers)


def test_a_capture_whose_backend_is_killed_at_the_fence_commits_nothing_and_can_retry(
    assistant, turns_held
):
    admission = assistant.send()
    agent = Runtime(assistant, admission)

    with at_statement(f"INSERT INTO {table(CommitFence)}", kill_this_backend):
        killed = agent.capture()
    version_after_the_kill = memory_current_get(workspace=assistant.tenant.workspace).version
    retried = agent.capture()

    internal_error(killed)
    assert version_after_the_kill == 1
    assert (retried.status_code, retried.json()["version"]) == (200, 2)
    assert CommitFence.objects.filter(admission=admission, ok=1).exists()
    assert_invariants_hold_once_the_reaper_has_run()


def test_a_capture_killed_with_its_locks_held_fails_as_djangos_error_on_the_drivers_cursor(
    assistant, monkeypatch, turns_held
):
    # No execute wrapper: the capture's statements go on the driver's own cursor
    # (`workspaces.sql.driver_cursor`), whose errors must still be Django's.
    admission = assistant.send()
    killed: list[str] = []

    def checkpoint(stage: str) -> None:
        if stage == "locked" and not killed:
            killed.append(stage)
            kill_this_backend()

    monkeypatch.setattr(capture, "_checkpoint", checkpoint)
    added = [{"op": "add", "line": "- likes green tea"}]
    with pytest.raises(OperationalError):
        assistant.capture(admission, added)
    retried = assistant.capture(admission, added)

    assert killed == ["locked"]
    assert retried.version == 2
    assert_invariants_hold_once_the_reaper_has_run()


def test_turns_killed_mid_run_or_lost_all_end_once_the_reaper_has_run(assistant, monkeypatch):
    # given: three turns handed to workers that never run them here
    monkeypatch.setattr(services, "turn_enqueue", lambda *, turn_id: None)
    killed, lost_worker, lost_enqueue = (assistant.send(text).turn for text in ("a", "b", "c"))

    # when: one runs and its backend is killed as it writes the answer, one is claimed by
    # a worker that dies, and one's enqueue never reached a broker
    with (
        at_statement(f"INSERT INTO {table(Message)}", kill_this_backend),
        pytest.raises(OperationalError),
    ):
        runtime.turn_run(turn_id=killed.pk)
    assert services.turn_claim(turn_id=lost_worker.pk)

    # then: the killed turn ended on a fresh connection, the reaper ended the others
    assert Turn.objects.get(pk=killed.pk).failure_code == "INTERNAL_ERROR"
    assert_invariants_hold_once_the_reaper_has_run()
    codes = dict(Turn.objects.values_list("pk", "failure_code"))
    assert codes[lost_worker.pk] == codes[lost_enqueue.pk] == TURN_TIMED_OUT


class RedisServer:
    """A redis-server of the suite's own, without persistence, on a free loopback port."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        # No persistence: like production's, what it holds is lost when it stops.
        arguments = ["--bind", "127.0.0.1", "--port", str(self.port), "--save", ""]
        self.process = subprocess.Popen(
            ["redis-server", *arguments, "--appendonly", "no", "--loglevel", "notice"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if "Ready to accept connections" in line:
                return
        raise AssertionError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        """Stop it and return once it has exited (its port then refuses connections)."""
        if self.process is None:
            return
        redis.Redis.from_url(self.url).shutdown(nosave=True)
        self.process.wait(timeout=30)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.process = None


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """The cache is a Redis this test starts (never the machine's), and stops at its end."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer()
    server.start()
    backend = {"BACKEND": "memory_project.cache.RedisCache", "LOCATION": server.url}
    try:
        with override_settings(CACHES={"default": backend}):
            yield server
    finally:
        server.stop()


def test_redis_stopped_during_requests_refuses_only_what_needs_a_key_session(
    own_redis, make_assistant
):
    assistant = make_assistant()
    member = assistant.tenant.client_for(assistant.tenant.member)
    member.raise_request_exception = False
    workspace_id = assistant.tenant.workspace.pk
    # The agent's turn stays queued, its runtime out of process; the member's turn runs.
    with pytest.MonkeyPatch.context() as held:
        held.setattr(services, "turn_enqueue", lambda *, turn_id: None)
        admission = assistant.send()
    agent = Runtime(assistant, admission)

    # when: Redis stops while a capture is inside its fence (its key was already resolved)
    with at_statement(f"INSERT INTO {table(CommitFence)}", own_redis.stop):
        captured = agent.capture()
    # and requests go on while it is down
    saved = member.put(
        f"/api/v1/workspaces/{workspace_id}/memory",
        {"content": "- likes tea\n- likes green tea\n- and cake\n"},
        format="json",
        HTTP_X_BASE_VERSION="2",
    )
    sent = assistant.post_message(member, idempotency_key="while-redis-is-down")
    refused = member.post(f"/api/v1/workspaces/{workspace_id}/key-sessions")
    sessions_while_down = KeySession.objects.count()
    own_redis.start()
    reopened = member.post(f"/api/v1/workspaces/{workspace_id}/key-sessions")

    # then: the capture committed, the Save and the turn went through, only opening a key
    # session was refused while Redis was down, and it works again once Redis is back
    assert (captured.status_code, captured.json()["version"]) == (200, 2)
    assert (saved.status_code, saved.json()["version"]) == (200, 3)
    assert sent.status_code == 202
    turn_admission = Admission.objects.select_related("turn").get(pk=sent.json()["admissionId"])
    assert (turn_admission.turn.state, turn_admission.recall_status) == ("completed", "unavailable")
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "KEY_SESSION_STORE_UNAVAILABLE"
    assert sessions_while_down == 1
    assert reopened.status_code == 201
    assert_invariants_hold_once_the_reaper_has_run()


def test_the_invariant_checks_find_each_kind_of_violation(assistant, monkeypatch):
    # given: one row breaking each invariant, written past the services
    monkeypatch.setattr(services, "turn_enqueue", lambda *, turn_id: None)
    turn = assistant.send().turn
    memory = File.objects.get(workspace=assistant.tenant.workspace, path=MEMORY_PATH)
    File.objects.filter(pk=memory.pk).update(current_version=F("current_version") + 1)
    revision = FileVersion.objects.get(file=memory, version=1)
    FileVersion.objects.filter(pk=revision.pk).update(change_kind="capture")
    MemoryPolicy.objects.filter(workspace=assistant.tenant.workspace).update(clear_generation=3)

    violated = invariants_violated()

    assert violated == {
        "version bump without its revision": [memory.pk],
        "capture without its fence row": [revision.pk],
        "clear generation is not the number of clears": [assistant.tenant.workspace.pk],
        "turn left unfinished": [turn.pk],
    }
