"""Human Save of a 4 KiB document: the service function vs the same SQL in raw psycopg,
and the process CPU of a refused (stale) Save against that of a successful one.

The service side calls `memory.services.memory_save`, which reads the file row (its id,
version and last size, and the wrapped workspace data key) in autocommit, unwraps the key
(cached per process), seals the text with AES-GCM, then bumps the version by
compare-and-set and inserts the revision in one statement, atomic by itself: every Save here
keeps the document's size, so there is no storage to charge and no BEGIN or COMMIT.

The raw side sends the same statements (their SQL text recorded from the service with an
execute wrapper) on its own autocommit psycopg connection, each in autocommit as the
service sends them, against the file of a second workspace.
It skips the ORM and the encryption: the revision gets 4096 + 28 random bytes (AES-GCM
adds a 12-byte nonce and a 16-byte tag) and their SHA-256. The ratio is therefore what
the ORM and the cryptography cost.

The two sides run interleaved in blocks so machine noise falls on both alike.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import figures
import psycopg
from django.db import connection
from django.test.utils import CaptureQueriesContext
from figures import p90

from memory.models import MEMORY_PATH
from memory.services import memory_save
from workspaces.errors import VersionConflict
from workspaces.models import File, FileVersion, Org, Team, User, Workspace
from workspaces.services import workspace_create

NAME = "memory_save_4k_service_vs_raw_psycopg"
DOCUMENT_BYTES = 4096
# AES-GCM as sealed by workspaces.crypto.seal: 12-byte nonce + 16-byte tag.
SEAL_OVERHEAD_BYTES = 28
WARMUP_SAVES = 30
MEASURED_SAVES = 400
BLOCK = 20

CONFLICT_NAME = "memory_save_409_cpu_vs_save_cpu"
CONFLICT_SAVES = 400
# The target: a refused Save costs the process at most half the CPU of a successful one.
CONFLICT_CPU_TARGET = 2.0
SAVE_TARGET = 0.85

_PARAGRAPHS = (
    "- Prefers **short** answers; cite `docs/errors.md` when an error code comes up.\n",
    "- The team ships on Thursdays (UTC); freeze starts Wednesday 18:00.\n",
    "> Decision 2024-03: keep revisions encrypted at rest, one data key per workspace.\n",
    "1. Run `make test` before review.\n2. Link the ticket, e.g. [WM-142](#wm-142).\n",
    "| area | owner | status |\n|------|-------|--------|\n| memory | ana | ok |\n",
    "```python\nresult = memory_save(workspace=ws, author=me, base_version=v, content=t)\n```\n",
)


def document(counter: int) -> str:
    """4096 bytes of mixed-ASCII Markdown, different for every `counter`."""
    parts = [f"# Workspace memory (save {counter:09d})\n\n"]
    size = len(parts[0])
    index = 0
    while size < DOCUMENT_BYTES:
        heading = f"## Note {index} of save {counter}\n"
        text = heading + _PARAGRAPHS[(counter + index) % len(_PARAGRAPHS)] + "\n"
        parts.append(text)
        size += len(text)
        index += 1
    text = "".join(parts)[:DOCUMENT_BYTES]
    assert len(text.encode()) == DOCUMENT_BYTES
    return text


# Recorded statement prefix -> step the raw side replays; both in autocommit, as the
# service sends them (`run` checks that it sent no BEGIN), so both sides make the same two
# round trips.
_STEPS = (
    ("SELECT f.id, f.current_version", "read"),
    ("WITH bumped AS", "write"),
)


@dataclass(frozen=True)
class Step:
    step: str
    sql: str


def plan_from_record(recorded: list[tuple[str, list[Any]]]) -> list[Step]:
    """The raw side's steps for the statements a save sent, in their order."""
    plan: list[Step] = []
    for sql, _params in recorded:
        text = sql.strip()
        step = next((step for prefix, step in _STEPS if text.startswith(prefix)), None)
        if step is None:
            raise RuntimeError(
                f"{NAME}: memory_save issues a statement the raw baseline does not mirror; "
                f"update bench/bench_memory_save.py: {text[:200]}"
            )
        plan.append(Step(step=step, sql=sql))
    steps = [item.step for item in plan]
    if steps != ["read", "write"]:
        raise RuntimeError(f"{NAME}: unexpected statements per save {steps}")
    return plan


class ServiceSide:
    def __init__(self, *, workspace: Workspace, author: User) -> None:
        self.workspace = workspace
        self.author = author
        self.version = 0

    def save(self, counter: int) -> None:
        revision: FileVersion = memory_save(
            workspace=self.workspace,
            author=self.author,
            base_version=self.version,
            content=document(counter),
        )
        self.version = revision.version


class RawSide:
    """The service's statements on a separate autocommit psycopg connection: the read, then
    the write, each its own transaction."""

    def __init__(
        self,
        *,
        conn: psycopg.Connection[Any],
        workspace: Workspace,
        author: User,
        plan: list[Step],
    ) -> None:
        self.conn = conn
        self.workspace_id = workspace.pk
        self.team_id = workspace.team_id
        self.author_id = author.pk
        self.plan = plan
        file = File.objects.get(workspace=workspace, path=MEMORY_PATH)
        self.version = file.current_version

    def save(self, counter: int) -> None:
        encoded = document(counter).encode()
        now = datetime.now(UTC)
        read, write = self.plan
        with self.conn.cursor() as cur:
            cur.execute(read.sql, (self.workspace_id, self.workspace_id, MEMORY_PATH))
            target = cur.fetchone()
            if target is None or target[1] != self.version:
                raise RuntimeError(f"raw side: version {self.version} is not current")
            file_id, version = target[0], self.version + 1
            ciphertext = os.urandom(len(encoded) + SEAL_OVERHEAD_BYTES)
            cur.execute(
                write.sql,
                (
                    now,
                    file_id,
                    MEMORY_PATH,
                    self.version,
                    # The org's hold (the write requires it active).
                    self.team_id,
                    Org.Status.ACTIVE.value,
                    file_id,
                    version,
                    ciphertext,
                    hashlib.sha256(ciphertext).hexdigest(),
                    len(encoded),
                    self.author_id,
                    FileVersion.AuthorKind.HUMAN.value,
                    FileVersion.ChangeKind.SAVE.value,
                    now,
                ),
            )
            if cur.fetchone() is None:
                raise RuntimeError(f"raw side: version {self.version} is not current")
        self.version = version


def conflict_cpu_result(service: ServiceSide) -> dict[str, Any]:
    """Process CPU per Save: `CONFLICT_SAVES` stale Saves (each refused with a 409's
    VersionConflict) against as many successful ones, alternating in blocks."""
    conflict_cpu: list[float] = []
    save_cpu: list[float] = []
    stale = service.version - 1
    counter = 1_000_000
    for block in range(CONFLICT_SAVES // BLOCK):
        order = ["save", "conflict"] if block % 2 else ["conflict", "save"]
        for kind in order:
            begun = time.process_time_ns()
            for _ in range(BLOCK):
                counter += 1
                if kind == "save":
                    service.save(counter)
                    continue
                try:
                    memory_save(
                        workspace=service.workspace,
                        author=service.author,
                        base_version=stale,
                        content=document(counter),
                    )
                except VersionConflict as conflict:
                    if conflict.detail.get("currentVersion") != service.version:
                        raise RuntimeError(
                            f"{CONFLICT_NAME}: wrong version in {conflict}"
                        ) from None
                else:
                    raise RuntimeError(f"{CONFLICT_NAME}: a stale save was accepted")
            spent = (time.process_time_ns() - begun) / 1e6 / BLOCK
            (save_cpu if kind == "save" else conflict_cpu).append(spent)
    save_ms = statistics.median(save_cpu)
    conflict_ms = statistics.median(conflict_cpu)
    ratio = save_ms / conflict_ms
    return {
        "name": CONFLICT_NAME,
        "unit": "ms of process CPU per save (median of blocks)",
        "baseline": round(save_ms, 4),
        "figure": round(conflict_ms, 4),
        "ratio": round(ratio, 4),
        "target": f">= {CONFLICT_CPU_TARGET}",
        "meets_target": ratio >= CONFLICT_CPU_TARGET,
        "notes": (
            f"{CONFLICT_SAVES} refused and {CONFLICT_SAVES} successful 4 KiB saves in blocks "
            f"of {BLOCK}, CPU time of this process only (not PostgreSQL's); ratio = CPU of a "
            f"successful save / CPU of a refused one; difference "
            f"{save_ms - conflict_ms:.3f} ms"
        ),
    }


def run() -> list[dict[str, Any]]:
    org = Org.objects.create(name="bench org")
    team = Team.objects.create(org=org, name="bench team")
    author = User.objects.create_user(username="bench", password="bench-password-unused")
    service_ws = workspace_create(team=team, name="bench service", admin=author)
    raw_ws = workspace_create(team=team, name="bench raw", admin=author)

    service = ServiceSide(workspace=service_ws, author=author)
    service.save(0)  # creates the document (version 1)
    # One untimed save to the existing document, captured: the raw side mirrors it.
    recorded: list[tuple[str, list[Any]]] = []
    with CaptureQueriesContext(connection) as logged, figures.statements_recorded(recorded):
        service.save(0)
    if any(query["sql"] in ("BEGIN", "COMMIT") for query in logged.captured_queries):
        raise RuntimeError(
            f"{NAME}: memory_save now opens a transaction; the raw side sends its statements "
            "in autocommit; update bench/bench_memory_save.py"
        )
    plan = plan_from_record(recorded)
    # The raw side's workspace key and file row come from a first save through the
    # service; every later raw save updates that existing document.
    memory_save(workspace=raw_ws, author=author, base_version=0, content=document(0))

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        raw = RawSide(conn=conn, workspace=raw_ws, author=author, plan=plan)
        service_ms, raw_ms = figures.interleaved_samples(
            service.save, raw.save, warmup=WARMUP_SAVES, measured=MEASURED_SAVES, block=BLOCK
        )

    # Version 1 is each document's creation; the service also made the captured save.
    expected_raw = 1 + WARMUP_SAVES + MEASURED_SAVES
    if service.version != expected_raw + 1 or raw.version != expected_raw:
        raise RuntimeError(
            f"unexpected versions: service {service.version} (expected {expected_raw + 1}), "
            f"raw {raw.version} (expected {expected_raw})"
        )

    notes = (
        f"{MEASURED_SAVES} saves per side after {WARMUP_SAVES} warm-up, interleaved in blocks "
        f"of {BLOCK}; p90 service {p90(service_ms):.3f} ms, raw {p90(raw_ms):.3f} ms; "
        "both sides send the read, then the write, each in autocommit (two round trips); "
        "raw side skips the ORM, key unwrapping and AES-GCM sealing"
    )
    return [
        figures.service_vs_raw_result(
            name=NAME,
            per="save",
            service_ms=service_ms,
            raw_ms=raw_ms,
            notes=notes,
            target=SAVE_TARGET,
        ),
        conflict_cpu_result(service),
    ]
