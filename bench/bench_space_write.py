"""Memory space writes: one 4 KiB document through the one write path vs the same
statements by raw psycopg; and 16 concurrent writers of one space vs one writer.

Service vs raw. The service side calls `memory.spaces.services.space_document_write`
(tenancy, path, ceiling, UTF-8, the secret scan, the quotas, then the database store:
space row lock, document lock, the path-conflict probe, both counters by conditional
UPDATE, the sealed insert). The raw side replays the statements one such write issued,
captured with their parameters from the service (`connection.execute_wrapper`), on its own
psycopg connection in one transaction per write, against a second space, with only the
document's path changed. It skips Python's checks, the ORM and the encryption (it stores
the captured ciphertext again), so the ratio is what they cost. Each write creates a new
document, so every write of both sides does the same work.

Concurrency. 16 threads, each with its own database connection, write different paths of
one space, started together by a barrier; then one thread writes as many documents to
another space. Writers of one space queue on its row (the store's first lock), so the
ratio says how much of a write happens outside that lock. Afterwards `reconcile`
recomputes every counter from the documents: its drift must be 0.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from bench_memory_save import document as memory_document
from django.db import connection
from figures import interleaved_samples, p90, service_vs_raw_result

from memory.models import SpaceDocument
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, space_document_write
from workspaces.models import Org, Team, User

WARMUP_WRITES = 30
MEASURED_WRITES = 400
BLOCK = 20
TARGET_RATIO = 0.5
WRITERS = 16
WRITES_PER_WRITER = 25
TARGET_THROUGHPUT_RATIO = 0.8
TEMPLATE_PATH = "template-000000.md"


def document(counter: int) -> bytes:
    """4096 bytes of Markdown, different for every `counter` (the memory Save's document)."""
    return memory_document(counter).encode()


def path_of(counter: int) -> str:
    return f"note-{counter:06d}.md"


Statement = tuple[str, Sequence[Any] | None]


def capture(write: Callable[[], object]) -> list[Statement]:
    """Every statement `write` sends, with its parameters."""
    statements: list[Statement] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if many:
            raise RuntimeError("bench_space_write: the write path issued an executemany")
        statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        write()
    return statements


class RawSide:
    """The captured statements on a separate psycopg connection, one transaction per
    write, with the template's path replaced by each write's own."""

    def __init__(self, *, conn: psycopg.Connection[Any], statements: list[Statement]) -> None:
        self.conn = conn
        self.statements = statements

    def write(self, counter: int) -> None:
        path = path_of(counter)
        with self.conn.cursor() as cursor:
            for sql, params in self.statements:
                cursor.execute(sql, _with_path(params, path))
        self.conn.commit()


def _with_path(params: Sequence[Any] | None, path: str) -> Sequence[Any] | None:
    if params is None:
        return None
    return [
        value.replace(TEMPLATE_PATH, path) if isinstance(value, str) else value for value in params
    ]


def _service_vs_raw(team: Team, writer: SpaceWriter) -> dict[str, Any]:
    service_space = SpaceHandle(visibility=Visibility.ORG, name="service", tenant_id=team.pk)
    raw_space = SpaceHandle(visibility=Visibility.ORG, name="raw", tenant_id=team.pk)

    def service_write(counter: int) -> None:
        space_document_write(
            handle=service_space,
            path=path_of(counter),
            body=document(counter),
            expected_revision=0,
            writer=writer,
        )

    # The raw side's space, key and counters exist after a first write through the
    # service; the second, captured, is a create like every measured one.
    space_document_write(
        handle=raw_space, path="first.md", body=document(0), expected_revision=0, writer=writer
    )
    statements = capture(
        lambda: space_document_write(
            handle=raw_space,
            path=TEMPLATE_PATH,
            body=document(0),
            expected_revision=0,
            writer=writer,
        )
    )
    service_write(0)
    # Client-side binding, as Django's backend binds: the captured statements run as sent.
    with psycopg.connect(
        os.environ["DATABASE_URL"], autocommit=False, cursor_factory=psycopg.ClientCursor
    ) as conn:
        raw = RawSide(conn=conn, statements=statements)
        service_ms, raw_ms = interleaved_samples(
            service_write, raw.write, warmup=WARMUP_WRITES, measured=MEASURED_WRITES, block=BLOCK
        )

    # Counted, not listed: the raw side's rows hold the template's ciphertext, sealed for
    # another path, so they would not open.
    # Each side made one untimed document first (the raw side's space two: its first and
    # the captured template).
    expected = (1 + WARMUP_WRITES + MEASURED_WRITES, 2 + WARMUP_WRITES + MEASURED_WRITES)
    counts = (
        SpaceDocument.objects.filter(space__handle_id=service_space.id).count(),
        SpaceDocument.objects.filter(space__handle_id=raw_space.id).count(),
    )
    if counts != expected:
        raise RuntimeError(f"bench_space_write: expected {expected} documents, got {counts}")
    return service_vs_raw_result(
        name="space_write_4k_service_vs_raw_psycopg",
        per="write",
        service_ms=service_ms,
        raw_ms=raw_ms,
        notes=(
            f"{MEASURED_WRITES} creates per side after {WARMUP_WRITES} warm-up, interleaved in "
            f"blocks of {BLOCK}; p90 service {p90(service_ms):.3f} ms, raw "
            f"{p90(raw_ms):.3f} ms; both sides send {len(statements)} statements per write; "
            "raw side skips the checks, the secret scan, the ORM and AES-GCM sealing"
        ),
        target=TARGET_RATIO,
    )


def _writers_run(handle: SpaceHandle, writer: SpaceWriter, threads: int, each: int) -> float:
    """Seconds for `threads` writers to write `each` documents apiece into `handle`."""
    barrier = threading.Barrier(threads + 1)
    failures: list[BaseException] = []

    def work(index: int) -> None:
        try:
            barrier.wait()
            for number in range(each):
                space_document_write(
                    handle=handle,
                    path=f"writer-{index:02d}/{number:04d}.md",
                    body=document(index * each + number),
                    expected_revision=0,
                    writer=writer,
                )
        except BaseException as failure:
            failures.append(failure)
        finally:
            connection.close()

    workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    begun = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - begun
    if failures:
        raise RuntimeError(f"bench_space_write: a writer failed: {failures[0]!r}")
    return elapsed


def _concurrent_vs_single(team: Team, writer: SpaceWriter) -> dict[str, Any]:
    total = WRITERS * WRITES_PER_WRITER
    single_space = SpaceHandle(visibility=Visibility.ORG, name="single", tenant_id=team.pk)
    shared_space = SpaceHandle(visibility=Visibility.ORG, name="shared", tenant_id=team.pk)
    single_seconds = _writers_run(single_space, writer, 1, total)
    shared_seconds = _writers_run(shared_space, writer, WRITERS, WRITES_PER_WRITER)
    single_rate, shared_rate = total / single_seconds, total / shared_seconds
    ratio = shared_rate / single_rate

    store = store_get()
    drift = sum(abs(counter.drift) for counter in store.reconcile())
    documents = store.list(shared_space)
    used = store.usage(shared_space).used_bytes
    if len(documents) != total or used != sum(meta.size for meta in documents):
        raise RuntimeError(
            f"bench_space_write: {len(documents)} documents of {total}, {used} bytes counted"
        )
    return {
        "name": "space_write_16_writers_vs_1_throughput",
        "unit": "writes per second",
        "baseline": round(single_rate, 2),
        "figure": round(shared_rate, 2),
        "ratio": round(ratio, 4),
        "target": f">= {TARGET_THROUGHPUT_RATIO} and drift 0",
        "meets_target": ratio >= TARGET_THROUGHPUT_RATIO and drift == 0,
        "notes": (
            f"{total} 4 KiB creates by {WRITERS} threads ({WRITES_PER_WRITER} each, own "
            f"connections, one space) vs by 1 thread in another space; reconcile drift "
            f"{drift} bytes over every counter; usage equals the sum of the documents"
        ),
    }


def run() -> list[dict[str, Any]]:
    org = Org.objects.create(name="bench spaces org")
    team = Team.objects.create(org=org, name="bench spaces team")
    user = User.objects.create_user(username="bench-spaces", password="bench-password-unused")
    writer = SpaceWriter.of_user(user, tenant_id=team.pk)
    return [_service_vs_raw(team, writer), _concurrent_vs_single(team, writer)]
