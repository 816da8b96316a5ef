"""Recall of an 8 KiB memory over HTTP against a trivial authenticated ping, one server run.

One real gunicorn process (one worker with the product's gunicorn configuration, the bench's
DATABASE_URL and DATA_DIR, and a Redis the benchmark starts for itself as its cache) serves
three sides:

- recall: `GET /api/v1/automation/workspaces/{id}/memory?purpose=recall` with
  `Authorization: Delivery dlv_...`. The view authenticates the delivery credential and
  reads, in the same query, the live facts the recall decides on (membership, the
  credential slot, the policy, the key session's row and the memory's revision); then
  `automation.services.memory_recall` reads the unwrapped data key from the server's Redis
  cache, decrypts the 8192-byte memory and records the receipt (an UPDATE on the
  admission). The receipt write is part of what is measured.
- ping: `GET /api/v1/ping` with a personal access token (`Authorization: Bearer iap_...`):
  one token lookup and a two-field answer. The yardstick for what any authenticated route
  costs in this server (middleware, DRF, throttle, JSON, HTTP).
- bare: `GET /bench/bare`, a Django function view that exists only in the bench's URLconf
  (bench/server_urls.py), behind the same middleware: the yardstick for the ping.

The key session is of the kind most recalls use in the product: the web frame's, opened by
a signed-in browser session (one stored here with `force_login`, its cookie sent to the
server's own API), so its key lands in the cache the server reads, and every recall checks
that browser session (signed in, unexpired, the person's password unchanged) as the
product's do. The admission is made in this
process with `message_admit`, and its delivery credential is minted again here (as the
tests do) because the raw credential `message_admit` writes is only in this process's
cache. Each side keeps one keep-alive
connection; after a warm-up they run interleaved in blocks. Every response must be a 200.

Afterwards, untimed for the result, the same work is timed in this process (Django's test
client for the whole stack without HTTP, and `memory_recall` alone with its statements
timed) to show where the recall's extra time goes.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import re
import secrets
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import figures
import redis
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from server_urls import BARE_PATH
from servers import Server, gunicorn_server, redis_server

from automation.models import Admission, DeliveryCredential
from automation.services import conversation_create, memory_recall, message_admit
from automation.tokens import delivery_credential_generate
from memory.models import MEMORY_PATH
from memory.services import memory_policy_set, memory_save
from memory_project.api.renderers import JSONRenderer
from workspaces.models import KeySession, Org, Team, User, Workspace
from workspaces.selectors import file_current_version, file_version_plaintext
from workspaces.services import (
    api_token_create,
    browser_session_digest,
    key_session_open,
    team_membership_ensure,
    workspace_create,
    workspace_key_ensure,
)

NAME = "recall_http_8k_vs_ping"
PING_NAME = "ping_http_vs_bare_django_view"
PING_TARGET_RATIO = 2.0
MEMORY_BYTES = 8192  # the recall bound (MEMORY_RECALL_MAX_BYTES): still recallable
WARMUP_REQUESTS = 50
MEASURED_REQUESTS = 1000
BLOCK = 50
TARGET_RATIO = 1.35

# Each side authenticates as its own user: the per-credential throttle counts per user,
# and one user making both sides' requests inside a minute would pass its limit. The rate
# is pinned at the default so the request counts below always fit it.
SERVER_THROTTLE_RATE_PER_MINUTE = 1200

RECALL_PATH = "/api/v1/automation/workspaces/{workspace_id}/memory?purpose=recall"
PING_PATH = "/api/v1/ping"

# In-process breakdown (not part of the result's figures).
INPROCESS_WARMUP = 20
INPROCESS_REQUESTS = 200
# One call of each in turn: the machine's load drifts, and each median should see the same.
INPROCESS_BLOCK = 1

# Requests each user makes against the server: the recall user also opens the key session
# and makes one checked recall before the warm-up.
_RECALL_USER_REQUESTS = 1 + 1 + WARMUP_REQUESTS + MEASURED_REQUESTS
assert _RECALL_USER_REQUESTS < SERVER_THROTTLE_RATE_PER_MINUTE
assert MEASURED_REQUESTS % (2 * BLOCK) == 0


def memory_document() -> str:
    return figures.memory_document(
        size_bytes=MEMORY_BYTES, note="prefers short answers; cite `docs/errors.md`"
    )


def delivery_credential_mint(admission: Admission) -> str:
    """Mint a fresh delivery credential for the admission, as ingress does, without the cache:
    both the admission and its conversation's slot get the new digest."""
    raw, digest = delivery_credential_generate()
    Admission.objects.filter(pk=admission.pk).update(credential_digest=digest)
    DeliveryCredential.objects.filter(conversation_id=admission.conversation_id).update(
        credential_digest=digest
    )
    return raw


@dataclass
class Side:
    """One keep-alive connection making the same GET again and again."""

    label: str
    port: int
    path: str
    headers: dict[str, str]
    expected_body: bytes | None = None
    samples: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    reconnects: int = 0
    other_bodies: int = 0

    def __post_init__(self) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def get(self) -> tuple[int, bytes]:
        try:
            self.conn.request("GET", self.path, headers=self.headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # The server closed the idle keep-alive connection: open a new one, counted.
            self.conn.close()
            self.reconnects += 1
            self.conn.request("GET", self.path, headers=self.headers)
            response = self.conn.getresponse()
        return response.status, response.read()

    def request(self, *, record: bool) -> None:
        begun = time.perf_counter_ns()
        status, body = self.get()
        elapsed_ms = (time.perf_counter_ns() - begun) / 1e6
        self.statuses[status] += 1
        if self.expected_body is not None and body != self.expected_body:
            self.other_bodies += 1
        if record:
            self.samples.append(elapsed_ms)

    def close(self) -> None:
        self.conn.close()


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


def _interleave(sides: tuple[Side, ...], *, warmup: int, measured: int, block: int) -> None:
    for _ in range(warmup):
        for side in sides:
            side.request(record=False)
    for index in range(measured // block):
        # Alternate which side goes first so neither always follows the other.
        order = sides if index % 2 == 0 else sides[::-1]
        for side in order:
            for _ in range(block):
                side.request(record=True)


@dataclass
class Tenant:
    workspace: Workspace
    member: User
    pinger: User
    version: int


def _tenant() -> Tenant:
    org = Org.objects.create(name="bench recall org")
    team = Team.objects.create(org=org, name="bench recall team")
    # No passwords: hashing one costs a noticeable fraction of a second per user.
    member = User.objects.create_user(username="bench-recall-member", password=None)
    pinger = User.objects.create_user(username="bench-recall-pinger", password=None)
    workspace = workspace_create(team=team, name="bench recall", admin=member, ai_enabled=True)
    team_membership_ensure(team=team, user=pinger)
    memory_policy_set(workspace=workspace, mode="auto", expected_revision=0, actor=member)
    revision = memory_save(
        workspace=workspace, author=member, base_version=0, content=memory_document()
    )
    return Tenant(workspace=workspace, member=member, pinger=pinger, version=revision.version)


def _admit(tenant: Tenant, key_session_id: uuid.UUID, label: str) -> Admission:
    """A new turn in a new conversation of the member, under the given key session."""
    conversation = conversation_create(workspace=tenant.workspace, owner=tenant.member)
    # The turn is held, not run (bench/run.py), so its credential stays live; it is
    # minted again afterwards, the raw one having gone only to this process's cache.
    return message_admit(
        conversation=conversation,
        sender=tenant.member,
        text=f"what do you know? ({label})",
        idempotency_key=f"bench-recall-{label}",
        key_session_id=key_session_id,
        memory_state=None,
    ).admission


def _signed_in(user: User) -> str:
    """A browser session signing `user` in (stored in the database the server reads, signed
    with the secret it shares through DATA_DIR): its key, the browser's cookie."""
    browser = Client()
    browser.force_login(user)
    return str(browser.session.session_key)


def _key_session_open_over_http(server: Server, *, workspace: Workspace, user: User) -> uuid.UUID:
    """A key session opened by a signed-in browser session, as the web frame opens one at the
    browser's first visit of the workspace: the one the person's chat turns use, which ends
    with that browser session and is checked against it on every use. Opened through the
    API with the session's cookie (and a CSRF token, as the frame's script sends), which
    records the browser session as the frame's page does: the page itself cannot render in
    the bench's server, whose static files are not collected (bench/README.md)."""
    browser_session_key = _signed_in(user)
    csrf = secrets.token_hex(16)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(
            "POST",
            f"/api/v1/workspaces/{workspace.pk}/key-sessions",
            headers={
                "Cookie": (
                    f"{settings.SESSION_COOKIE_NAME}={browser_session_key}; "
                    f"{settings.CSRF_COOKIE_NAME}={csrf}"
                ),
                "X-CSRFToken": csrf,
                "Content-Length": "0",
            },
        )
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 201:
        raise server.fail(f"opening the key session answered {response.status}: {body[:500]!r}")
    session_id = uuid.UUID(json.loads(body)["id"])
    # The check every use of it then makes: it names this browser session.
    if not KeySession.objects.filter(
        pk=session_id, browser_session=browser_session_digest(browser_session_key)
    ).exists():
        raise server.fail("the key session opened names no browser session")
    return session_id


def _recall_check(server: Server, side: Side, *, version: int, text: str) -> bytes:
    """One recall before measuring: it must provide the whole 8 KiB at the saved version."""
    status, body = side.get()
    if status != 200:
        raise server.fail(f"recall answered {status}: {body[:500]!r}")
    answer = json.loads(body)
    if answer != {"status": "provided", "version": version, "text": text}:
        shown = {**answer, "text": None if answer.get("text") is None else len(answer["text"])}
        raise server.fail(f"recall did not provide the 8 KiB memory: {shown}")
    return body


def _over_http(tenant: Tenant, redis_url: str) -> dict[str, Any]:
    _token, pinger_pat = api_token_create(
        user=tenant.pinger, team=tenant.workspace.team, name="bench ping"
    )
    with gunicorn_server(
        label=NAME,
        redis_url=redis_url,
        workers=1,
        env={"THROTTLE_CREDENTIAL_RATE": f"{SERVER_THROTTLE_RATE_PER_MINUTE}/min"},
    ) as server:
        key_session_id = _key_session_open_over_http(
            server, workspace=tenant.workspace, user=tenant.member
        )
        admission = _admit(tenant, key_session_id, "http")
        credential = delivery_credential_mint(admission)
        recall = Side(
            label="recall",
            port=server.port,
            path=RECALL_PATH.format(workspace_id=tenant.workspace.pk),
            headers={"Authorization": f"Delivery {credential}", "Accept": "application/json"},
        )
        ping = Side(
            label="ping",
            port=server.port,
            path=PING_PATH,
            headers={"Authorization": f"Bearer {pinger_pat}", "Accept": "application/json"},
        )
        bare = Side(
            label="bare", port=server.port, path=BARE_PATH, headers={"Accept": "application/json"}
        )
        try:
            recall.expected_body = _recall_check(
                server, recall, version=tenant.version, text=memory_document()
            )
            status, body = ping.get()
            if status != 200:
                raise server.fail(f"ping answered {status}: {body[:500]!r}")
            ping.expected_body = body
            status, body = bare.get()
            if status != 200:
                raise server.fail(f"bare view answered {status}: {body[:500]!r}")
            bare.expected_body = body
            count_before = Admission.objects.get(pk=admission.pk).recall_count
            _interleave(
                (recall, ping, bare),
                warmup=WARMUP_REQUESTS,
                measured=MEASURED_REQUESTS,
                block=BLOCK,
            )
        finally:
            for side in (recall, ping, bare):
                side.close()
        admission.refresh_from_db()
        receipts = admission.recall_count - count_before
        for side in (recall, ping, bare):
            bad = {code: n for code, n in side.statuses.items() if code != 200}
            if bad or side.other_bodies:
                raise server.fail(
                    f"{side.label}: non-200 responses {bad}, "
                    f"{side.other_bodies} answer(s) other than the checked one"
                )
        if receipts != recall.statuses[200] or (
            admission.recall_status,
            admission.recall_version,
        ) != ("provided", tenant.version):
            raise server.fail(
                f"{receipts} recall receipts written for {recall.statuses[200]} recalls, the "
                f"last {admission.recall_status!r} at version {admission.recall_version}"
            )
    return {"recall": recall, "ping": ping, "bare": bare, "receipts": receipts}


def _timed_median(
    calls: dict[str, Callable[[], object]], *, warmup: int, measured: int, block: int
) -> dict[str, float]:
    """Median ms of each call, the calls run interleaved in blocks."""
    samples: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(warmup):
        for call in calls.values():
            call()
    labels = list(calls)
    for index in range(measured // block):
        for label in labels if index % 2 == 0 else labels[::-1]:
            for _ in range(block):
                begun = time.perf_counter_ns()
                calls[label]()
                samples[label].append((time.perf_counter_ns() - begun) / 1e6)
    return {label: statistics.median(values) for label, values in samples.items()}


def _table(sql: str) -> str:
    """`SELECT workspaces_file`, `UPDATE automation_admission`: what the statement does and
    to which table, for the notes (a write wins over the reads inside it)."""
    for verb, pattern in _TABLES:
        match = pattern.search(sql)
        if match:
            return f"{verb} {match.group(1)}"
    return sql.split(None, 1)[0]


_TABLES = [
    (verb, re.compile(rf'{keyword} "(\w+)"'))
    for verb, keyword in (("UPDATE", "UPDATE"), ("INSERT", "INTO"), ("SELECT", "FROM"))
]


def _in_process(tenant: Tenant, redis_url: str) -> dict[str, Any]:
    """The same two requests without HTTP (Django's test client), and memory_recall alone.

    This process has its own cache (not the server's Redis), so it opens its own key
    session, for a browser session of its own as the frame does; the work is otherwise the
    same.
    """
    key_session = key_session_open(
        workspace=tenant.workspace,
        user=tenant.member,
        browser_session_key=_signed_in(tenant.member),
    )
    admission = _admit(tenant, key_session.pk, "in-process")
    credential = delivery_credential_mint(admission)
    admission.refresh_from_db()  # the service compares the digest it is handed
    _token, pinger_pat = api_token_create(
        user=tenant.pinger, team=tenant.workspace.team, name="bench ping in-process"
    )
    client = Client(HTTP_HOST="127.0.0.1")
    recall_path = RECALL_PATH.format(workspace_id=tenant.workspace.pk)

    def recall_request() -> None:
        response = client.get(recall_path, HTTP_AUTHORIZATION=f"Delivery {credential}")
        if response.status_code != 200 or response.json()["status"] != "provided":
            raise RuntimeError(f"{NAME}: in-process recall answered {response.content[:300]!r}")

    def ping_request() -> None:
        response = client.get(PING_PATH, HTTP_AUTHORIZATION=f"Bearer {pinger_pat}")
        if response.status_code != 200:
            raise RuntimeError(f"{NAME}: in-process ping answered {response.content[:300]!r}")

    def recall_service() -> None:
        if memory_recall(admission=admission).status != "provided":
            raise RuntimeError(f"{NAME}: in-process memory_recall did not provide memory")

    revision = file_current_version(workspace=tenant.workspace, path=MEMORY_PATH)
    assert revision is not None
    data_key = workspace_key_ensure(workspace=tenant.workspace)

    def decrypt() -> None:
        file_version_plaintext(version=revision, workspace=tenant.workspace, data_key=data_key)

    provided = memory_recall(admission=admission)

    def render() -> None:
        # As the view renders it: the Recall's own fields.
        JSONRenderer().render(dataclasses.asdict(provided))

    redis_client = redis.Redis.from_url(redis_url)

    def redis_round_trip() -> None:
        redis_client.ping()

    try:
        medians = _timed_median(
            {
                "recall": recall_request,
                "ping": ping_request,
                "service": recall_service,
                "render": render,
                "decrypt": decrypt,
                "redis": redis_round_trip,
            },
            warmup=INPROCESS_WARMUP,
            measured=INPROCESS_REQUESTS,
            block=INPROCESS_BLOCK,
        )
    finally:
        redis_client.close()

    # Each statement of the service, timed from send to result (psycopg and PostgreSQL).
    statement_ms: list[float] = []
    statement_sql: list[str] = []

    def timer(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        begun = time.perf_counter_ns()
        try:
            return execute(sql, params, many, context)
        finally:
            statement_ms.append((time.perf_counter_ns() - begun) / 1e6)
            statement_sql.append(sql)

    calls: list[list[float]] = []
    totals: list[float] = []
    with connection.execute_wrapper(timer):
        for _ in range(INPROCESS_WARMUP):
            recall_service()
        for _ in range(INPROCESS_REQUESTS):
            statement_ms.clear()
            statement_sql.clear()
            begun = time.perf_counter_ns()
            recall_service()
            totals.append((time.perf_counter_ns() - begun) / 1e6)
            calls.append(list(statement_ms))
    if len({len(times) for times in calls}) != 1:
        raise RuntimeError(f"{NAME}: memory_recall issued a varying number of statements")
    statements = [
        (_table(sql), statistics.median(times[index] for times in calls))
        for index, sql in enumerate(statement_sql)
    ]
    if "UPDATE" not in statements[-1][0]:
        raise RuntimeError(f"{NAME}: memory_recall no longer ends with the receipt UPDATE")
    with CaptureQueriesContext(connection) as recall_captured:
        recall_request()
    with CaptureQueriesContext(connection) as ping_captured:
        ping_request()
    return {
        **medians,
        "statements": statements,
        "service_timed": statistics.median(totals),
        "sql": statistics.median(sum(times) for times in calls),
        "python": statistics.median(
            total - sum(times) for total, times in zip(totals, calls, strict=True)
        ),
        "recall_statements": len(recall_captured.captured_queries),
        "ping_statements": len(ping_captured.captured_queries),
    }


def run() -> list[dict[str, Any]]:
    tenant = _tenant()
    with redis_server() as redis_url:
        measured = _over_http(tenant, redis_url)
        local = _in_process(tenant, redis_url)
    recall: Side = measured["recall"]
    ping: Side = measured["ping"]
    bare: Side = measured["bare"]
    statements = ", ".join(f"{label} {ms:.2f}" for label, ms in local["statements"])
    extra = local["recall"] - local["ping"]
    cache_backend = str(settings.CACHES["default"]["BACKEND"]).rsplit(".", 1)[-1]

    recall_p50, ping_p50 = statistics.median(recall.samples), statistics.median(ping.samples)
    recall_p99, ping_p99 = _p99(recall.samples), _p99(ping.samples)
    ratio = recall_p50 / ping_p50
    bare_p50 = statistics.median(bare.samples)
    ping_ratio = ping_p50 / bare_p50
    notes = (
        f"one gunicorn (1 worker, gunicorn_conf's threads, its own Redis), one keep-alive "
        f"connection "
        f"per side; {len(recall.samples)} requests per side after {WARMUP_REQUESTS} warm-up, "
        f"interleaved in blocks of {BLOCK}; p99 recall {recall_p99:.3f} ms, ping "
        f"{ping_p99:.3f} ms, p99 ratio {recall_p99 / ping_p99:.3f}; recall costs "
        f"{recall_p50 - ping_p50:.3f} ms more than the ping (p50); "
        f"status codes recall {dict(recall.statuses)}, ping {dict(ping.statuses)} "
        f"(all 200, every answer identical to the checked one: recall 'provided', "
        f"{MEMORY_BYTES} bytes at version {tenant.version}); {measured['receipts']} recall "
        f"receipts written (one UPDATE per recall, measured); reconnects recall "
        f"{recall.reconnects}, ping {ping.reconnects}. "
        f"In process, without HTTP (medians of {INPROCESS_REQUESTS}, interleaved, this "
        f"process's {cache_backend}): test-client recall {local['recall']:.3f} ms "
        f"({local['recall_statements']} statements) vs ping {local['ping']:.3f} ms "
        f"({local['ping_statements']} statement), ratio {local['recall'] / local['ping']:.3f}; "
        f"recall costs {extra:.3f} ms more than ping, and memory_recall alone takes "
        f"{local['service']:.3f} ms, reading the live facts itself as the in-process runtime "
        f"does (the route reads them with its credential, in the lookup's statement), "
        f"leaving {extra - local['service']:+.3f} ms for the rest of the view (the "
        f"delivery-credential lookup instead of the token's; rendering the 8 KiB answer "
        f"takes {local['render']:.3f} ms). "
        f"memory_recall, its statements timed ({INPROCESS_REQUESTS} calls): "
        f"{local['service_timed']:.3f} ms = {local['sql']:.3f} ms waiting on "
        f"{len(local['statements'])} statements ({statements}) + {local['python']:.3f} ms "
        f"in Python (ORM query building and model loading; AES-GCM opening of the 8 KiB is "
        f"{local['decrypt']:.3f} ms); a Redis round trip is {local['redis']:.3f} ms (the "
        f"server's recall makes one the ping does not: the key session's read-and-touch)"
    )
    return [
        {
            "name": PING_NAME,
            "unit": "ms per request (p50)",
            "baseline": round(bare_p50, 4),
            "figure": round(ping_p50, 4),
            "ratio": round(ping_ratio, 4),
            "target": f"<= {PING_TARGET_RATIO}",
            "meets_target": ping_ratio <= PING_TARGET_RATIO,
            "notes": (
                f"the same server and run as {NAME}, the three sides interleaved; the ping "
                f"costs {ping_p50 - bare_p50:.3f} ms more than a bare Django view behind the "
                f"same middleware (bench/server_urls.py; authentication, DRF, throttling and "
                f"its serializer); p99 ping {ping_p99:.3f} ms, bare {_p99(bare.samples):.3f} "
                f"ms; status codes bare {dict(bare.statuses)}, reconnects {bare.reconnects}"
            ),
        },
        {
            "name": NAME,
            "unit": "ms per request (p50)",
            "baseline": round(ping_p50, 4),
            "figure": round(recall_p50, 4),
            "ratio": round(ratio, 4),
            "target": f"<= {TARGET_RATIO}",
            "meets_target": ratio <= TARGET_RATIO,
            "notes": notes,
        },
    ]
