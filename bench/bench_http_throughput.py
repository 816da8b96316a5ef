"""HTTP throughput: Saves, recalls and pings per second with 16 concurrent clients against
gunicorn on PostgreSQL and Redis, with 1 and with 2 worker processes, beside pgbench running
the equivalent Save transaction in the same run.

The benchmark starts its own Redis (bench/servers.py) and two gunicorn servers with the
product's configuration (memory_project/gunicorn_conf.py), one with 1 worker and one with 2.
16 clients, driven by one thread of a process of its own, each keep one keep-alive connection
and act for their own person, workspace and turn, as 16 people of one team do: no two clients
write one document or share a throttle counter, but every Save changes its document's
length, as an edit does, so whatever the product does for the team's storage on such a
Save (with a quota, one usage row for all 16) it does on every Save. After one
untimed pass of every kind against both servers, each kind runs in windows against one
server then the other, alternating which goes first; requests completed in the windows
over their length is the rate. The CPU time of the server's processes and of the
PostgreSQL backends serving them is read from /proc at each window's start and end, the
clients' own CPU time in their process, and during each window the server's backends are
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
import selectors
import shutil
import socket
import subprocess
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
RECEIVE_BYTES = 65536
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)")


@dataclass
class Client:
    """One person with a workspace of their own, a personal access token and an admitted
    turn (with its delivery credential) whose key session the server opened."""

    workspace_id: int
    pat: str
    version: int
    credential: str = ""
    # The request bodies of its Saves (_save_bodies), sent in turn; `saves` counts them.
    save_bodies: list[bytes] = field(default_factory=list)
    saves: int = 0


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


def save_text(counter: int) -> str:
    """A Save's text: about 4 KiB, of a length that differs from the client's last Save's,
    as a person's edit adds or removes a line, so the team's storage usage moves."""
    return document(counter)[: DOCUMENT_BYTES - counter % SAVE_TRIM]


def _save_bodies(index: int) -> list[bytes]:
    """The JSON bodies client `index` Saves in turn, built before any window: SAVE_TRIM
    texts whose lengths are all different (successive counters differ by CLIENTS, which
    SAVE_TRIM does not divide), so every Save, the first after a wrap included, changes
    the document's length and text."""
    return [
        json.dumps({"content": save_text(index + CLIENTS * step)}).encode()
        for step in range(SAVE_TRIM)
    ]


@dataclass(frozen=True)
class Window:
    """When a window's requests count, on the machine-wide monotonic clock, which every
    client process shares."""

    port: int
    kind: str
    measure_from: float
    until: float


@dataclass
class Tally:
    done: int = 0
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


class _Connection:
    """One client's keep-alive connection to the server. The load generator shares the
    server's cores, so it does as little as the measurement allows: the request's bytes
    are built before the window (a Save's only per-request part is its X-Base-Version),
    and of each answer it reads only the status line, Content-Length and, for a Save, the
    version the next Save is based on."""

    def __init__(self, window: Window, client: Client, tally: Tally):
        self.window, self.client, self.tally = window, client, tally
        host = f"Host: 127.0.0.1:{window.port}\r\n"
        if window.kind == "save":
            self.head = (
                f"PUT /api/v1/workspaces/{client.workspace_id}/memory HTTP/1.1\r\n{host}"
                f"Authorization: Bearer {client.pat}\r\nContent-Type: application/json\r\n"
            ).encode()
        elif window.kind == "recall":
            self.head = (
                f"GET /api/v1/automation/workspaces/{client.workspace_id}/memory"
                f"?purpose=recall HTTP/1.1\r\n{host}"
                f"Authorization: Delivery {client.credential}\r\n\r\n"
            ).encode()
        else:
            self.head = (
                f"GET /api/v1/ping HTTP/1.1\r\n{host}Authorization: Bearer {client.pat}\r\n\r\n"
            ).encode()
        self.socket = socket.create_connection(("127.0.0.1", window.port), timeout=60)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.received = bytearray()
        self.answers = 0

    def send(self) -> None:
        request = self.head
        if self.window.kind == "save":
            body = self.client.save_bodies[self.client.saves % SAVE_TRIM]
            self.client.saves += 1
            request += (
                f"X-Base-Version: {self.client.version}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body
        self.socket.sendall(request)
        self.tally.sent += 1

    def receive(self) -> bool:
        """Reads what has arrived; once an answer is whole, counts it and sends the next
        request. False when this client is done: the window is over, or an answer was
        not a 200."""
        chunk = self.socket.recv(RECEIVE_BYTES)
        if not chunk:
            raise ConnectionError("the server closed a keep-alive connection")
        self.received += chunk
        head_end = self.received.find(b"\r\n\r\n")
        if head_end < 0:
            return True
        head = bytes(self.received[:head_end]).lower()
        length = CONTENT_LENGTH.search(head)
        if length is None:
            raise ValueError(f"an answer without Content-Length: {head[:300]!r}")
        answer_end = head_end + 4 + int(length[1])
        if len(self.received) < answer_end:
            return True
        status = int(head[9:12])
        body = bytes(self.received[head_end + 4 : answer_end])
        del self.received[:answer_end]
        self.answers += 1
        self.tally.statuses[status] += 1
        if status != 200:
            self.tally.failures.append(body[:300].decode(errors="replace"))
            return False
        if self.window.kind == "save":
            self.client.version = int(json.loads(body)["version"])
        now = time.monotonic()
        if self.window.measure_from <= now < self.window.until:
            self.tally.done += 1
        if now >= self.window.until:
            return False
        self.send()
        return True


def _client_process(window: Window, clients: list[Client], answers: Any) -> None:
    """The clients, each with a request in flight on its own connection, driven by one
    thread of a process of its own (forked, without Django state in use) until the window
    ends; answers received inside it are counted. One thread waiting on every socket at
    once costs less CPU than a thread per client, which the server would then miss."""
    tally = Tally()
    cpu_before = time.process_time()
    unconnected = list(clients)
    try:
        with selectors.DefaultSelector() as selector:

            def connect() -> _Connection:
                conn = _Connection(window, unconnected.pop(0), tally)
                conn.send()
                selector.register(conn.socket, selectors.EVENT_READ, conn)
                return conn

            # One connection at a time, each once the one before has had its first
            # answer: a gunicorn worker accepts in a loop while connections wait, so a
            # burst of them would all stay with whichever worker woke first.
            latest = connect()
            while selector.get_map():
                events = selector.select(timeout=60)
                if not events:
                    raise TimeoutError("no answer in 60 s")
                for key, _events in events:
                    conn = key.data
                    if not conn.receive():
                        selector.unregister(conn.socket)
                        conn.socket.close()
                if unconnected and latest.answers:
                    latest = connect()
    except Exception as error:  # reported by the parent, with the server's log
        tally.failures.append(repr(error))
    answers.put(
        (
            tally.done,
            tally.sent,
            time.process_time() - cpu_before,
            tally.statuses,
            tally.failures,
            {client.workspace_id: (client.version, client.saves) for client in clients},
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
    def cpu_ms(self) -> float:
        """The server's, PostgreSQL's and the clients' CPU per request, all on the same
        cores."""
        return self.server_cpu_ms + self.database_cpu_ms + self.client_cpu_ms

    @property
    def scaling_ceiling(self) -> float:
        """What a second worker could give at most, measured from this phase (1 worker):
        one worker uses at most a core, S ms of CPU per request, and two share the two
        cores with PostgreSQL and the clients, S + O, so 2 / (S + O) over 1 / S."""
        return 2 * self.server_cpu_ms / self.cpu_ms

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
    process = context.Process(target=_client_process, args=(window, clients, answers), daemon=True)
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
    done, sent, cpu, statuses, failures, states = answers.get(timeout=120)
    process.join(timeout=60)
    phase.sent += sent
    phase.client_cpu += cpu
    for client in clients:
        client.version, client.saves = states[client.workspace_id]
    if failures or done == 0:
        raise server.fail(f"{kind}: {len(failures)} client(s) failed, first: {failures[:1]}")
    phase.done += done
    phase.seconds += window.until - window.measure_from
    phase.server_cpu += server_after - server_before
    phase.database_cpu += sum(
        seconds - database_before.get(pid, 0.0) for pid, seconds in database_after.items()
    )
    phase.statuses += statuses


@dataclass
class Pgbench:
    """Save transactions per second pgbench sustained (16 clients, prepared statements),
    and the CPU time per transaction of its backends and of pgbench itself, over the
    middle of its run (from its first to its last fifth)."""

    tps: float
    database_cpu_ms: float
    client_cpu_ms: float


def _pgbench(first_workspace: int, author: int, team: int) -> Pgbench:
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
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    time.sleep(PGBENCH_SECONDS / 5)
    # The servers have stopped: the database's other backends are pgbench's.
    database_before, client_before = _backend_cpu(), process_cpu_seconds(process.pid)
    begun = time.monotonic()
    time.sleep(PGBENCH_SECONDS * 3 / 5)
    database_after, client_after = _backend_cpu(), process_cpu_seconds(process.pid)
    seconds = time.monotonic() - begun
    stdout, stderr = process.communicate()
    match = re.search(r"tps = ([\d.]+)", stdout)
    if process.returncode != 0 or match is None:
        raise RuntimeError(f"{NAME}: pgbench failed: {stdout}\n{stderr}")
    tps = float(match.group(1))
    database_cpu = sum(cpu - database_before.get(pid, cpu) for pid, cpu in database_after.items())
    return Pgbench(
        tps=tps,
        database_cpu_ms=database_cpu * 1000 / (tps * seconds),
        client_cpu_ms=(client_after - client_before) * 1000 / (tps * seconds),
    )


def _clients(team: Team) -> tuple[list[Client], list[Callable[[Server], None]]]:
    """The clients, and the steps that give each a turn once a server is up."""
    clients: list[Client] = []
    steps: list[Callable[[Server], None]] = []
    for index, (workspace, user, version) in enumerate(_workspaces(team, "http")):
        Workspace.objects.filter(pk=workspace.pk).update(ai_enabled=True)
        workspace.refresh_from_db()
        memory_policy_set(workspace=workspace, mode="auto", expected_revision=0, actor=user)
        _token, pat = api_token_create(user=user, team=team, name="bench throughput")
        client = Client(
            workspace_id=workspace.pk, pat=pat, version=version, save_bodies=_save_bodies(index)
        )
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
    pgbench = _pgbench(first_workspace, pgbench_side[0][1].pk, team.pk)
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
        f"{CLIENTS} clients driven by one thread of one process (one keep-alive "
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
            baseline=pgbench.tps,
            figure=saves_2,
            target=PGBENCH_TARGET,
            notes=(
                f"baseline: pgbench, {CLIENTS} clients, prepared statements, "
                f"{PGBENCH_SECONDS} s, bench/pgbench_save.sql (the Save's statements without "
                f"HTTP, Django or cryptography) on {CLIENTS} other workspaces of the same "
                f"database, run after the servers stopped; its CPU per transaction "
                f"PostgreSQL {pgbench.database_cpu_ms:.2f} ms, pgbench "
                f"{pgbench.client_cpu_ms:.2f} ms. On 2 cores, {PGBENCH_TARGET} of its rate "
                f"needs at most {2 / (PGBENCH_TARGET * pgbench.tps) * 1000:.2f} ms of CPU "
                f"per Save for the server, PostgreSQL and the clients together; with 2 "
                f"workers this run spent {phases[2, 'save'].cpu_ms:.2f} ms. {common}"
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
                    f"evenly the 16 keep-alive connections fell on them); with 1 worker "
                    f"keeping a core busy, the most 2 could give on 2 cores is "
                    f"{one_worker.scaling_ceiling:.2f}x (2 S / (S + O), O being "
                    f"PostgreSQL's and the clients' CPU per {kind})"
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
