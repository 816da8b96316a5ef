"""HTTP throughput: Saves, recalls and pings per second with 16 concurrent clients against
gunicorn on PostgreSQL and Redis, with 1 and with 2 worker processes, beside pgbench running
the equivalent Save transaction in the same run.

The benchmark starts its own Redis (bench/servers.py) and two gunicorn servers with the
product's configuration (memory_project/gunicorn_conf.py), one with 1 worker and one with 2.
16 clients, four threads in each of four processes, each keep one keep-alive connection and
act for their own person, workspace and turn, as 16 people of one team do: no two clients
write one document or share a throttle counter, but every Save changes its document's
length, as an edit does, so whatever the product does for the team's storage on such a
Save (with a quota, one usage row for all 16) it does on every Save. After one
untimed pass of every kind against both servers, each kind runs in windows against one
server then the other, alternating which goes first; requests completed in the windows
over their length is the rate. The CPU time of the server's processes and of the
PostgreSQL backends serving them is read from /proc at each window's start and end, the
clients' own CPU time in their processes, and during each window the server's backends are
sampled (pg_stat_activity) for what they wait on.

pgbench (installed with PostgreSQL) runs bench/pgbench_save.sql with 16 clients and
prepared statements on 16 other workspaces of the same database: the rate the database
itself sustains for the Save's statements.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_memory_save import DOCUMENT_BYTES, document
from bench_recall import delivery_credential_mint
from django.db import connection, connections
from psycopg.conninfo import conninfo_to_dict
from servers import Server, gunicorn_server, process_cpu_seconds, redis_server

from automation.models import Admission
from automation.services import conversation_create, message_admit
from memory.services import memory_policy_set, memory_save
from workspaces.models import Org, Team, User, Workspace
from workspaces.services import api_token_create, workspace_create

NAME = "http_throughput"
CLIENTS = 16
# The client threads run in this many processes (forked, without Django state in use).
CLIENT_PROCESSES = 4
WORKER_COUNTS = (1, 2)
# Each kind runs ROUNDS windows against each server, alternating which goes first, so that
# a change in the machine's load falls on both worker counts alike.
ROUNDS = 2
WARMUP_SECONDS = 0.5
WINDOW_SECONDS = 2.0
PGBENCH_SECONDS = 5
SCALING_TARGET = 1.7
PGBENCH_TARGET = 0.2
# Pinned far above what 16 clients reach, so no request is throttled: each client is its
# own person, and the limits are per person.
SERVER_ENV = {"THROTTLE_CREDENTIAL_RATE": "1000000/min", "THROTTLE_WRITE_RATE": "1000000/min"}
PGBENCH_SCRIPT = Path(__file__).resolve().parent / "pgbench_save.sql"
# A Save's text is this many bytes shorter than DOCUMENT_BYTES, at most: each client's
# successive Saves differ in length (their counters differ by CLIENTS, not a multiple of it).
SAVE_TRIM = 97
SAMPLE_SECONDS = 0.02
KINDS = ("save", "recall", "ping")


@dataclass
class Client:
    """One person with a workspace of their own, a personal access token and an admitted
    turn (with its delivery credential) whose key session the server opened."""

    workspace_id: int
    pat: str
    version: int
    credential: str = ""


@dataclass
class Tally:
    done: int = 0
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def _workspaces(team: Team, label: str) -> list[tuple[Workspace, User, int]]:
    made = []
    for index in range(CLIENTS):
        user = User.objects.create_user(username=f"bench-{label}-{index}", password=None)
        workspace = workspace_create(team=team, name=f"bench {label} {index}", admin=user)
        revision = memory_save(
            workspace=workspace, author=user, base_version=0, content=document(0)
        )
        made.append((workspace, user, revision.version))
    return made


def _request(
    conn: http.client.HTTPConnection, method: str, path: str, headers: dict[str, str], body: bytes
) -> tuple[int, bytes]:
    conn.request(method, path, body=body or None, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def _key_session_open(server: Server, client: Client) -> uuid.UUID:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        status, body = _request(
            conn,
            "POST",
            f"/api/v1/workspaces/{client.workspace_id}/key-sessions",
            {"Authorization": f"Bearer {client.pat}", "Content-Length": "0"},
            b"",
        )
    finally:
        conn.close()
    if status != 201:
        raise server.fail(f"opening a key session answered {status}: {body[:300]!r}")
    return uuid.UUID(json.loads(body)["id"])


def _turn_credential(
    client: Client, user: User, workspace: Workspace, key_session: uuid.UUID
) -> str:
    conversation = conversation_create(workspace=workspace, owner=user)
    admission = message_admit(
        conversation=conversation,
        sender=user,
        text="what do you know?",
        idempotency_key=f"bench-throughput-{client.workspace_id}",
        key_session_id=key_session,
        memory_state=None,
    ).admission
    return delivery_credential_mint(admission)


def _call(kind: str, client: Client, counter: int) -> tuple[str, str, dict[str, str], bytes]:
    if kind == "ping":
        return "GET", "/api/v1/ping", {"Authorization": f"Bearer {client.pat}"}, b""
    if kind == "recall":
        return (
            "GET",
            f"/api/v1/automation/workspaces/{client.workspace_id}/memory?purpose=recall",
            {"Authorization": f"Delivery {client.credential}"},
            b"",
        )
    body = json.dumps({"content": save_text(counter)}).encode()
    headers = {
        "Authorization": f"Bearer {client.pat}",
        "Content-Type": "application/json",
        "X-Base-Version": str(client.version),
    }
    return "PUT", f"/api/v1/workspaces/{client.workspace_id}/memory", headers, body


def save_text(counter: int) -> str:
    """A Save's text: about 4 KiB, of a length that differs from the client's last Save's,
    as a person's edit adds or removes a line, so the team's storage usage moves."""
    return document(counter)[: DOCUMENT_BYTES - counter % SAVE_TRIM]


@dataclass(frozen=True)
class Window:
    """When a window's requests count, on the machine-wide monotonic clock, which every
    client process shares."""

    port: int
    kind: str
    measure_from: float
    until: float


def _client_loop(window: Window, client: Client, tally: Tally, seed: int) -> None:
    """Requests of one client, back to back on one keep-alive connection, until the window
    ends; those answered inside it are counted."""
    conn = http.client.HTTPConnection("127.0.0.1", window.port, timeout=60)
    counter = seed
    try:
        while time.monotonic() < window.until:
            counter += CLIENTS
            method, path, headers, body = _call(window.kind, client, counter)
            status, answer = _request(conn, method, path, headers, body)
            tally.statuses[status] += 1
            tally.sent += 1
            if status != 200:
                tally.failures.append(answer[:300].decode(errors="replace"))
                return
            if window.kind == "save":
                client.version = int(json.loads(answer)["version"])
            if window.measure_from <= time.monotonic() < window.until:
                tally.done += 1
    except Exception as error:  # reported by the parent, with the server's log
        tally.failures.append(repr(error))
    finally:
        conn.close()


def _client_process(window: Window, clients: list[Client], first: int, answers: Any) -> None:
    """A few clients, one thread each, in a process of their own: the client side is Python
    too, and one process of 16 threads would hold back the server it measures."""
    tallies = [Tally() for _ in clients]
    cpu_before = time.process_time()
    threads = [
        threading.Thread(target=_client_loop, args=(window, client, tally, first + index))
        for index, (client, tally) in enumerate(zip(clients, tallies, strict=True))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers.put(
        (
            sum(tally.done for tally in tallies),
            sum(tally.sent for tally in tallies),
            time.process_time() - cpu_before,
            sum((tally.statuses for tally in tallies), Counter()),
            [failure for tally in tallies for failure in tally.failures],
            {client.workspace_id: client.version for client in clients},
        )
    )


def _backend_cpu() -> dict[int, float]:
    """CPU seconds of every PostgreSQL backend connected to the bench database but this
    process's own (the server's connections)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        pids = [row[0] for row in cursor.fetchall()]
    cpu = {}
    for pid in pids:
        try:
            cpu[pid] = process_cpu_seconds(pid)
        except FileNotFoundError:
            continue
    return cpu


@dataclass
class Phase:
    """Requests of one kind against one server, summed over its measured windows."""

    done: int = 0
    seconds: float = 0.0
    server_cpu: float = 0.0
    database_cpu: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)
    worker_cpu: dict[int, float] = field(default_factory=dict)
    # Every request the clients sent, warm-up included, and their CPU time for them.
    sent: int = 0
    client_cpu: float = 0.0
    waits: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.done / self.seconds

    @property
    def worker_split(self) -> str:
        """Each worker's share of the workers' CPU time, largest first."""
        total = sum(self.worker_cpu.values()) or 1.0
        shares = sorted(self.worker_cpu.values(), reverse=True)
        return " / ".join(f"{100 * seconds / total:.0f}%" for seconds in shares)

    @property
    def server_cpu_ms(self) -> float:
        return self.server_cpu * 1000 / self.done

    @property
    def database_cpu_ms(self) -> float:
        return self.database_cpu * 1000 / self.done

    @property
    def client_cpu_ms(self) -> float:
        return self.client_cpu * 1000 / self.sent

    @property
    def wait_split(self) -> str:
        """What the server's busy backends were doing, as shares of the samples."""
        total = sum(self.waits.values()) or 1
        return ", ".join(
            f"{name} {100 * count / total:.0f}%" for name, count in self.waits.most_common()
        )


def _backend_waits(until: float) -> Counter[str]:
    """Until `until`, what the server's backends that are in a statement wait on: a lock
    (a row every Save updates would show here), the WAL flush of a commit, anything else,
    or nothing (running)."""
    waits: Counter[str] = Counter()
    with connection.cursor() as cursor:
        while time.monotonic() < until:
            cursor.execute(
                "SELECT wait_event_type, wait_event FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND state = 'active'"
            )
            for event_type, event in cursor.fetchall():
                if event_type == "Lock":
                    waits[f"lock ({event})"] += 1
                elif event in ("WALWrite", "WALSync"):
                    waits["WAL flush"] += 1
                else:
                    waits["other wait" if event_type else "running"] += 1
            time.sleep(SAMPLE_SECONDS)
    return waits


def _window(server: Server, kind: str, clients: list[Client], phase: Phase) -> None:
    """The clients against `server` for a warm-up, then a measured window added to `phase`."""
    begun = time.monotonic()
    window = Window(
        port=server.port,
        kind=kind,
        measure_from=begun + WARMUP_SECONDS,
        until=begun + WARMUP_SECONDS + WINDOW_SECONDS,
    )
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    connections.close_all()  # no database connection crosses the fork
    share = CLIENTS // CLIENT_PROCESSES
    processes = [
        context.Process(
            target=_client_process,
            args=(window, clients[first : first + share], first, answers),
            daemon=True,
        )
        for first in range(0, CLIENTS, share)
    ]
    for process in processes:
        process.start()
    time.sleep(max(0.0, window.measure_from - time.monotonic()))
    server_before, database_before = server.cpu_seconds(), _backend_cpu()
    workers_before = server.worker_cpu_seconds()
    phase.waits += _backend_waits(window.until)
    server_after, database_after = server.cpu_seconds(), _backend_cpu()
    for pid, seconds in server.worker_cpu_seconds().items():
        phase.worker_cpu[pid] = (
            phase.worker_cpu.get(pid, 0.0) + seconds - workers_before.get(pid, 0.0)
        )
    done, statuses, failures = 0, Counter[int](), []
    for _ in processes:
        process_done, sent, cpu, process_statuses, process_failures, versions = answers.get(
            timeout=120
        )
        phase.sent += sent
        phase.client_cpu += cpu
        done += process_done
        statuses += process_statuses
        failures += process_failures
        for client in clients:
            client.version = versions.get(client.workspace_id, client.version)
    for process in processes:
        process.join(timeout=60)
    if failures or done == 0:
        raise server.fail(f"{kind}: {len(failures)} client(s) failed, first: {failures[:1]}")
    phase.done += done
    phase.seconds += window.until - window.measure_from
    phase.server_cpu += server_after - server_before
    phase.database_cpu += sum(
        seconds - database_before.get(pid, 0.0) for pid, seconds in database_after.items()
    )
    phase.statuses += statuses


def _pgbench(first_workspace: int, author: int, team: int) -> float:
    """Save transactions per second pgbench sustains (16 clients, prepared statements)."""
    binary = shutil.which("pgbench")
    if binary is None:
        raise RuntimeError(f"{NAME}: pgbench (from PostgreSQL's client tools) is not installed")
    params = conninfo_to_dict(os.environ["DATABASE_URL"])
    command = [
        binary,
        "--no-vacuum",
        f"--client={CLIENTS}",
        "--jobs=2",
        f"--time={PGBENCH_SECONDS}",
        "--protocol=prepared",
        f"--file={PGBENCH_SCRIPT}",
        f"--define=first_workspace={first_workspace}",
        f"--define=author={author}",
        f"--define=team={team}",
        f"--host={params.get('host', '127.0.0.1')}",
        f"--port={params.get('port', 5432)}",
        f"--username={params.get('user', 'postgres')}",
        str(params["dbname"]),
    ]
    env = dict(os.environ)
    if params.get("password"):
        env["PGPASSWORD"] = str(params["password"])
    finished = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    match = re.search(r"tps = ([\d.]+)", finished.stdout)
    if finished.returncode != 0 or match is None:
        raise RuntimeError(f"{NAME}: pgbench failed: {finished.stdout}\n{finished.stderr}")
    return float(match.group(1))


def _clients(team: Team) -> tuple[list[Client], list[Callable[[Server], None]]]:
    """The clients, and the steps that give each a turn once a server is up."""
    clients: list[Client] = []
    steps: list[Callable[[Server], None]] = []
    for workspace, user, version in _workspaces(team, "http"):
        Workspace.objects.filter(pk=workspace.pk).update(ai_enabled=True)
        workspace.refresh_from_db()
        memory_policy_set(workspace=workspace, mode="auto", expected_revision=0, actor=user)
        _token, pat = api_token_create(user=user, team=team, name="bench throughput")
        client = Client(workspace_id=workspace.pk, pat=pat, version=version)
        clients.append(client)

        def turn(
            server: Server, client: Client = client, user: User = user, ws: Workspace = workspace
        ) -> None:
            client.credential = _turn_credential(
                client, user, ws, _key_session_open(server, client)
            )

        steps.append(turn)
    return clients, steps


def run() -> list[dict[str, Any]]:
    org = Org.objects.create(name="bench throughput org")
    team = Team.objects.create(org=org, name="bench throughput team")
    clients, turn_steps = _clients(team)
    pgbench_side = _workspaces(team, "pgbench")
    first_workspace = pgbench_side[0][0].pk
    if [workspace.pk for workspace, _, _ in pgbench_side] != list(
        range(first_workspace, first_workspace + CLIENTS)
    ):
        raise RuntimeError(f"{NAME}: pgbench's workspaces do not have consecutive ids")

    phases = {(workers, kind): Phase() for workers in WORKER_COUNTS for kind in KINDS}
    with (
        redis_server() as redis_url,
        gunicorn_server(label=NAME, redis_url=redis_url, workers=1, env=SERVER_ENV) as one,
        gunicorn_server(label=NAME, redis_url=redis_url, workers=2, env=SERVER_ENV) as two,
    ):
        # The key sessions live in the Redis both servers share.
        for step in turn_steps:
            step(one)
        # Untimed: every thread of both servers opens its database and Redis connections
        # and every process loads what it loads lazily, which the 2-worker server has
        # twice as much of.
        for kind in KINDS:
            for server in (one, two):
                _window(server, kind, clients, Phase())
        for kind in KINDS:
            for index in range(ROUNDS):
                servers = [(1, one), (2, two)]
                for workers, server in servers if index % 2 == 0 else servers[::-1]:
                    _window(server, kind, clients, phases[workers, kind])
    pgbench_tps = _pgbench(first_workspace, pgbench_side[0][1].pk, team.pk)
    turns = Admission.objects.filter(workspace__team=team).count()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())

    def described(workers: int) -> str:
        return "; ".join(
            f"{kind} {phases[workers, kind].rate:.1f}/s, server CPU "
            f"{phases[workers, kind].server_cpu_ms:.2f} ms, PostgreSQL CPU "
            f"{phases[workers, kind].database_cpu_ms:.2f} ms and the clients' CPU "
            f"{phases[workers, kind].client_cpu_ms:.2f} ms per request"
            for kind in KINDS
        )

    common = (
        f"{CLIENTS} client threads in {CLIENT_PROCESSES} processes (one keep-alive "
        f"connection, person, workspace and turn each, all in one team, each Save "
        f"{DOCUMENT_BYTES - SAVE_TRIM + 1}-{DOCUMENT_BYTES} bytes; they share the machine's "
        f"cores with the server), "
        f"after an untimed pass, per kind and server {ROUNDS} windows of "
        f"{WINDOW_SECONDS:.0f} s (each after {WARMUP_SECONDS} s of warm-up), the two "
        f"servers alternating; "
        f"1 worker: {described(1)}. 2 workers: {described(2)}. {turns} turns; every answer "
        f"a 200. Load average (1, 5, 15 min) after the run: {load}"
    )
    saves_2 = phases[2, "save"].rate
    results = [
        _result(
            name=f"{NAME}_saves_2_workers_vs_pgbench",
            unit="Saves per second",
            baseline=pgbench_tps,
            figure=saves_2,
            target=PGBENCH_TARGET,
            notes=(
                f"baseline: pgbench, {CLIENTS} clients, prepared statements, "
                f"{PGBENCH_SECONDS} s, bench/pgbench_save.sql (the Save's statements without "
                f"HTTP, Django or cryptography) on {CLIENTS} other workspaces of the same "
                f"database, run after the servers stopped. {common}"
            ),
        )
    ]
    for kind in KINDS:
        one_worker, two_workers = phases[1, kind], phases[2, kind]
        results.append(
            _result(
                name=f"{NAME}_{kind}s_2_workers_vs_1",
                unit=f"{kind}s per second",
                baseline=one_worker.rate,
                figure=two_workers.rate,
                target=SCALING_TARGET,
                notes=(
                    f"the product's gunicorn configuration with WEB_CONCURRENCY=1 and 2; "
                    f"server CPU per {kind} {one_worker.server_cpu_ms:.2f} ms (1 worker), "
                    f"{two_workers.server_cpu_ms:.2f} ms (2); PostgreSQL CPU per {kind} "
                    f"{one_worker.database_cpu_ms:.2f} / {two_workers.database_cpu_ms:.2f} ms; "
                    f"status codes {dict(one_worker.statuses)} / {dict(two_workers.statuses)}; "
                    f"the server's backends, sampled every {SAMPLE_SECONDS * 1000:.0f} ms "
                    f"while in a statement: {one_worker.wait_split} (1 worker), "
                    f"{two_workers.wait_split} (2); "
                    f"the 2 workers' shares of their CPU time {two_workers.worker_split} (how "
                    f"evenly the 16 keep-alive connections fell on them)"
                ),
            )
        )
    return results


def _result(
    *, name: str, unit: str, baseline: float, figure: float, target: float, notes: str
) -> dict[str, Any]:
    """A rate against a baseline rate: figure / baseline, which should reach `target`."""
    ratio = figure / baseline
    return {
        "name": name,
        "unit": unit,
        "baseline": round(baseline, 1),
        "figure": round(figure, 1),
        "ratio": round(ratio, 4),
        "target": f">= {target}",
        "meets_target": ratio >= target,
        "notes": notes,
    }
