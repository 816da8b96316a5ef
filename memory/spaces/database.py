"""The database adapter of the `MemoryStore` seam: spaces as rows, bodies sealed.

Every body (and its checksum) is sealed with AES-256-GCM under the tenant's space key (the
global space has its own), with associated data naming the space, the path and the
revision, so a ciphertext copied to any other row or revision fails to open.

A write or delete is one transaction that locks, in this order: the space row, then the
document row, then the tenant's counter row. Every change of a space takes the space row
first, so two writers of one space queue there and never cross; the tenant counter is
always the last lock, so writers of two spaces of one tenant cannot deadlock on it.
Counters move by conditional UPDATEs (`used + delta <= quota`) in that same transaction:
a refused or rolled-back write leaves every counter as it was.

The deadline becomes PostgreSQL's `lock_timeout` for the transaction: a lock not granted
in time is StoreBusy; any other operational failure (the server gone, the connection
dropped) is StoreUnavailable. On SQLite the IMMEDIATE transaction's busy wait plays the
lock's part.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import NamedTuple, Protocol

from django.conf import settings
from django.db import (
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)
from django.db.models import Count, Q, Sum
from django.utils import timezone
from psycopg import sql as psycopg_sql

from memory.errors import SpaceQuotaExceeded, StoreBusy, StoreUnavailable
from memory.models import MemorySpace, SpaceDocument, SpaceKey, TenantSpaceUsage
from memory.spaces import store
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.store import (
    CounterDrift,
    CurrentDocument,
    DocumentMeta,
    DocumentWrite,
    ExpiredSpace,
    PendingWrite,
    SpaceUsage,
    StoredDocument,
    WriteBatch,
)
from workspaces.counters import counter_move, tenant_counter_charge
from workspaces.crypto import (
    CiphertextRejected,
    Sealer,
    data_key_generate,
    data_key_unwrap,
    deployment_key_id,
)
from workspaces.errors import DocumentUnreadable, NotFound, VersionConflict
from workspaces.services import org_active_hold
from workspaces.sql import columns, fetch_one, instance, starts_with, table, values_binary
from workspaces.violations import violation_raises

# The columns of a space row that are its handle's fields of the same name.
_HANDLE_AXES = ("name", "tenant_id", "project", "bot", "user_id", "run")
# Rows per statement of a batch (an archive import): one IN list, one multi-row INSERT.
_BATCH_ROWS = 500
# PostgreSQL's SQLSTATE for a lock not granted within lock_timeout.
_LOCK_NOT_AVAILABLE = "55P03"


def space_data_key(*, tenant_id: int | None) -> bytes | None:
    """The tenant's unwrapped space key (None: the global space's), or None before its
    first write."""
    # SQL because it was measured: it runs on every read and write of a space, and the
    # ORM's query (and the whole key row it loaded) cost more than the statement itself.
    tenant = "tenant_id IS NULL" if tenant_id is None else "tenant_id = %s"
    row = fetch_one(
        f"SELECT wrapped_key FROM {table(SpaceKey)} WHERE {tenant}",
        [] if tenant_id is None else [tenant_id],
    )
    return None if row is None else data_key_unwrap(bytes(row[0]))


def space_data_key_ensure(*, tenant_id: int | None) -> bytes:
    """The tenant's space key, created on first use. Two first writers may race: the
    loser's insert is ignored by the uniqueness of the tenant and it reads the winner's.
    A team's key is created only while its org is active (`org_active_hold`), as a
    workspace's is: the purge destroys the keys first."""
    existing = space_data_key(tenant_id=tenant_id)
    if existing is not None:
        return existing
    with transaction.atomic():
        if tenant_id is not None:
            org_active_hold(team_id=tenant_id)
        SpaceKey.objects.bulk_create(
            [
                SpaceKey(
                    tenant_id=tenant_id,
                    wrapped_key=data_key_generate(),
                    wrapping_key_id=deployment_key_id(settings.DEPLOYMENT_KEY),
                )
            ],
            ignore_conflicts=True,
        )
    created = space_data_key(tenant_id=tenant_id)
    assert created is not None  # inserted above, or by the writer it raced
    return created


def space_associated_data(*, space_id: str, path: str, revision: int, part: str) -> bytes:
    # The path comes last: it may hold `/`, which neither the space id nor a revision can.
    return f"memory-space/v1/{part}/{space_id}/{revision}/{path}".encode()


@dataclass(frozen=True)
class _Current(CurrentDocument):
    pk: int


class DatabaseStore:
    def describe(self, handle: SpaceHandle) -> str:
        return f"database: table {SpaceDocument._meta.db_table}, space {handle.id}"

    def list(self, handle: SpaceHandle, *, prefix: str = "") -> Sequence[DocumentMeta]:
        rows = SpaceDocument.objects.filter(space__handle_id=handle.id).defer("body_ciphertext")
        if prefix:
            rows = rows.filter(starts_with("path", prefix.rstrip("/") + "/"))
        with _store_errors():
            documents = list(rows)
            sealer = _sealer(handle) if documents else None
        # Sorted here, by code point, not by the database's collation: both stores list in
        # the same order whatever the deployment's locale.
        space_id = handle.id
        return sorted(
            (_meta(space_id, document, sealer) for document in documents),
            key=lambda meta: meta.path,
        )

    def read_all(self, handle: SpaceHandle) -> Iterator[StoredDocument]:
        with _store_errors():
            sealer = _sealer(handle)
        # Named rows, not model instances: building a model was most of the per-row cost of
        # an export, and the reader needs only these columns. Pages by path, each read whole,
        # rather than one server-side cursor: a reader that stops early (an export refusing
        # a credential) would leave that cursor to be closed whenever the generator is
        # collected, inside whatever transaction the connection is in by then.
        rows = (
            SpaceDocument.objects.filter(space__handle_id=handle.id)
            .order_by("path")
            .values_list(*_ROW_FIELDS)
        )
        space_id = handle.id
        after: str | None = None
        while True:
            with _store_errors():
                page = values_binary(
                    (rows if after is None else rows.filter(path__gt=after))[:_BATCH_ROWS]
                )
            for row in page:
                yield _stored(space_id, _RowValues._make(row), sealer)
            if len(page) < _BATCH_ROWS:
                return
            after = page[-1][0]

    def read(self, handle: SpaceHandle, path: str) -> StoredDocument | None:
        with _store_errors():
            document = SpaceDocument.objects.filter(space__handle_id=handle.id, path=path).first()
            if document is None:
                return None
            sealer = _sealer(handle)
        return _stored(handle.id, document, sealer)

    def write(self, handle: SpaceHandle, request: DocumentWrite) -> DocumentMeta:
        path, body, expected_revision = request.path, request.body, request.expected_revision
        checksum = store.body_checksum(body)
        now = timezone.now()
        with _store_errors():
            sealer = Sealer(space_data_key_ensure(tenant_id=handle.tenant_id))
            with _locking_transaction(request.deadline):
                space = _space_lock(handle, create=True)
                assert space is not None
                current = _document_lock(space, path)
                if current is None:
                    store.path_conflict_check(path, _paths_near(space, path))
                delta = len(body) - (current.size if current else 0)
                if handle.tenant_id is not None:
                    _tenant_charge(handle.tenant_id, delta, request.quotas.tenant_bytes)
                _space_charge(space, delta, request.quotas.space_bytes)
                current_revision = current.revision if current else 0
                base = current_revision if expected_revision is None else expected_revision
                meta = DocumentMeta(
                    path=path,
                    size=len(body),
                    checksum=checksum,
                    revision=base + 1 if base else space.deleted_revision_max + 1,
                    updated_by=request.updated_by,
                    updated_at=now,
                )
                fields = _sealed_fields(handle.id, sealer, meta, body)
                if base == 0:
                    _document_create(space, path, fields, current_revision)
                else:
                    # The compare-and-set: applies only while the row still holds `base`.
                    updated = SpaceDocument.objects.filter(
                        space=space, path=path, revision=base
                    ).update(**fields)
                    if updated != 1:
                        raise VersionConflict(currentVersion=current_revision)
        return meta

    def write_many(self, handle: SpaceHandle, batch: WriteBatch) -> Sequence[DocumentMeta]:
        """One transaction, in the writers' lock order: the space's row, every document row
        of the batch, then the tenant's counter row. The batch is judged whole (revisions,
        path conflicts) and its one delta checked against the quotas before anything is
        written; then the new documents go in as one INSERT, each replaced one by its own
        UPDATE, and each counter moves once."""
        store.batch_conflict_check([write.path for write in batch.writes])
        now = timezone.now()
        with _store_errors():
            sealer = (
                None
                if batch.check_only
                else Sealer(space_data_key_ensure(tenant_id=handle.tenant_id))
            )
            with _locking_transaction(batch.deadline):
                space = _space_lock(handle, create=not batch.check_only)
                near = {} if space is None else _tree_index(space)
                return _batch_write(handle, batch, space, near, sealer, now, sent={})

    def write_many_as_read(
        self, handle: SpaceHandle, batch: WriteBatch, reader: store.BatchReader
    ) -> Sequence[DocumentMeta]:
        """The new documents `reader` offers go into one binary COPY as they are read, so the
        server stores them while the rest is read and checked (an import's Python work and
        the server's ran one after the other); the batch is then judged and written as
        `write_many` does, in the same transaction, and any refusal rolls the COPY back.
        The space's row is locked for the whole reading: its writers wait, as for any
        batch. Read whole first instead when that gains nothing or would be wrong: a dry
        run; a tenant without a space key yet (its creation is committed on its own, and a
        refused import must leave nothing behind); SQLite, whose transaction holds the
        database's one write lock."""
        data_key = space_data_key(tenant_id=handle.tenant_id)
        if batch.check_only or data_key is None or connection.vendor != "postgresql":
            return self.write_many(handle, store.batch_read(batch, reader))
        sealer = Sealer(data_key)
        now = timezone.now()
        space_id = handle.id
        sent: dict[str, tuple[bytes, str]] = {}  # path: the body and checksum written
        with _store_errors(), _locking_transaction(batch.deadline):
            space = _space_lock(handle, create=True)
            assert space is not None  # created above if it was not there
            near = _tree_index(space)
            with _documents_copy(space) as send:

                def offer(write: PendingWrite) -> None:
                    path = write.path
                    # Not new, or not new any more: left for the batch's judgement.
                    if write.expected_revision != 0 or near.get(path) == path or path in sent:
                        return
                    meta = DocumentMeta(
                        path=path,
                        size=len(write.body),
                        checksum=write.checksum or store.body_checksum(write.body),
                        revision=space.deleted_revision_max + 1,
                        updated_by=batch.updated_by,
                        updated_at=now,
                    )
                    send(_new_row(space_id, sealer, meta, write.body))
                    sent[path] = (write.body, meta.checksum)

                reader.read(offer)
                # The reader's own checks while the server is still storing the last rows.
                batch = replace(batch, writes=reader.writes())
            store.batch_conflict_check([write.path for write in batch.writes])
            return _batch_write(handle, batch, space, near, sealer, now, sent=sent)

    def delete(
        self, handle: SpaceHandle, path: str, *, expected_revision: int | None, deadline: float
    ) -> None:
        with _store_errors(), _locking_transaction(deadline):
            space = _space_lock(handle, create=False)
            current = None if space is None else _document_lock(space, path)
            if space is None or current is None:
                raise NotFound("No such document in this memory space.")
            if expected_revision is not None and expected_revision != current.revision:
                raise VersionConflict(currentVersion=current.revision)
            SpaceDocument.objects.filter(pk=current.pk).delete()
            # The size was read under the document's row lock: a racing write cannot make
            # the credit stale.
            if handle.tenant_id is not None:
                _tenant_charge(handle.tenant_id, -current.size, 0)
            _space_charge(space, -current.size, 0, deleted_revision=current.revision)

    def usage(self, handle: SpaceHandle) -> SpaceUsage:
        with _store_errors():
            used = (
                MemorySpace.objects.filter(handle_id=handle.id)
                .values_list("used_bytes", flat=True)
                .first()
            )
            tenant_used = None
            if handle.tenant_id is not None:
                tenant_used = (
                    TenantSpaceUsage.objects.filter(team_id=handle.tenant_id)
                    .values_list("used_bytes", flat=True)
                    .first()
                )
        return SpaceUsage(used_bytes=used or 0, tenant_used_bytes=tenant_used or 0)

    def spaces(self, tenant_id: int) -> Sequence[SpaceHandle]:
        with _store_errors():
            rows = list(
                MemorySpace.objects.filter(tenant_id=tenant_id, documents__isnull=False)
                .distinct()
                .order_by("handle_id")
            )
        return [_row_handle(row) for row in rows]

    def purge_tenants(self, tenant_ids: Sequence[int]) -> int:
        with _store_errors(), transaction.atomic():
            documents, _ = SpaceDocument.objects.filter(space__tenant_id__in=tenant_ids).delete()
            MemorySpace.objects.filter(tenant_id__in=tenant_ids).delete()
            TenantSpaceUsage.objects.filter(team_id__in=tenant_ids).delete()
            SpaceKey.objects.filter(tenant_id__in=tenant_ids).delete()
        return documents

    def private_spaces_expire(self, *, written_before: datetime) -> Sequence[ExpiredSpace]:
        candidates = MemorySpace.objects.filter(
            visibility=Visibility.PRIVATE.value, last_written_at__lt=written_before
        ).order_by("pk")
        expired = []
        for pk in candidates.values_list("pk", flat=True):
            try:
                removed = _private_space_expire(pk, written_before)
            except StoreBusy:
                continue  # a writer holds it: judged again at the next run
            if removed is not None:
                expired.append(removed)
        return sorted(expired, key=lambda each: each.handle.id)

    def reconcile(self) -> Sequence[CounterDrift]:
        drifts: list[CounterDrift] = []
        tenant_ids = set(MemorySpace.objects.values_list("tenant_id", flat=True).distinct())
        tenant_ids |= set(TenantSpaceUsage.objects.values_list("team_id", flat=True))
        for tenant_id in sorted(tenant_ids, key=lambda value: (value is not None, value or 0)):
            with _store_errors(), transaction.atomic():
                drifts.extend(_tenant_reconcile(tenant_id))
        return drifts


def _batch_write(
    handle: SpaceHandle,
    batch: WriteBatch,
    space: MemorySpace | None,
    near: dict[str, str],
    sealer: Sealer | None,
    now: datetime,
    *,
    sent: dict[str, tuple[bytes, str]],
) -> Sequence[DocumentMeta]:
    """Judge and write `batch` under the space's row lock (`space`, None only for a check of
    a space never written; `near` its `_tree_index`), then the rows of the documents it
    replaces, then the tenant's counter. `sent` are the new documents already copied in
    this transaction (`write_many_as_read`), each with the body and checksum it was sent
    with: each must be a new document of the batch, with those."""
    paths = [write.path for write in batch.writes]
    # Under the space's row lock no writer adds or removes a document of the space: only the
    # rows the index holds can exist, and only those are locked (none, for an import into a
    # new space).
    stored = [path for path in paths if near.get(path) == path]
    current = {} if space is None else _documents_lock(space, stored)
    first_revision = (0 if space is None else space.deleted_revision_max) + 1
    metas, delta = store.batch_judge(
        batch,
        current=current.get,
        near=lambda path: _near_in(near, path),
        now=now,
        first_revision=first_revision,
    )
    tenant_used = 0
    if handle.tenant_id is not None:
        tenant_used = _tenant_used_lock(handle.tenant_id, create=not batch.check_only)
    store.quotas_require(
        handle=handle,
        delta=delta,
        space_used=0 if space is None else space.used_bytes,
        tenant_used=tenant_used,
        quotas=batch.quotas,
    )
    if batch.check_only:
        return metas
    assert space is not None
    assert sealer is not None
    created = []
    space_id = handle.id
    unsent = dict(sent)
    for write, meta in zip(batch.writes, metas, strict=True):
        if (found := current.get(write.path)) is not None:
            fields = _sealed_fields(space_id, sealer, meta, write.body)
            SpaceDocument.objects.filter(pk=found.pk).update(**fields)
        elif (copied := unsent.pop(write.path, None)) is None:
            created.append((meta, write.body))
        elif copied != (write.body, meta.checksum) or meta.revision != first_revision:
            raise ValueError(f"{write.path!r} was offered unlike the batch writes it")
    if unsent:
        raise ValueError(f"{min(unsent)!r} was offered but is not in the batch")
    if created:
        with _documents_copy(space) as send:
            # Sealed as they are sent: the server stores the first rows while the next are
            # sealed.
            for meta, body in created:
                send(_new_row(space_id, sealer, meta, body))
    # Within the quotas, checked above under these same locks.
    if handle.tenant_id is not None:
        _tenant_charge(handle.tenant_id, delta, 0)
    _space_charge(space, delta, 0)
    return metas


def _row_handle(row: MemorySpace) -> SpaceHandle:
    return SpaceHandle(
        visibility=Visibility(row.visibility),
        **{axis: getattr(row, axis) for axis in _HANDLE_AXES},
    )


def _private_space_expire(pk: int, written_before: datetime) -> ExpiredSpace | None:
    """Remove one private space if it is still unwritten since `written_before`, in the
    writers' lock order (its row, then the tenant's counter); None if it was written or
    removed meanwhile."""
    deadline = time.monotonic() + settings.MEMORY_STORE_WAIT_SECONDS
    with _store_errors(), _locking_transaction(deadline):
        space = (
            MemorySpace.objects.select_for_update()
            .filter(pk=pk, last_written_at__lt=written_before)
            .first()
        )
        if space is None:
            return None
        # Every writer of the space takes its row first: holding it, the documents cannot
        # change under the count.
        documents = space.documents.all()
        held = documents.aggregate(count=Count("pk"), total=Sum("size"))
        freed = held["total"] or 0
        documents.delete()
        if space.tenant_id is not None and freed:
            _tenant_charge(space.tenant_id, -freed, 0)
        MemorySpace.objects.filter(pk=pk).delete()
    return ExpiredSpace(handle=_row_handle(space), documents=held["count"], freed_bytes=freed)


def _tenant_reconcile(tenant_id: int | None) -> list[CounterDrift]:
    """Recompute the counters of one tenant's spaces (or of the global space) and of the
    tenant from the documents. Call inside a transaction: it takes the writers' lock order,
    every space row of the tenant (in primary-key order), then the tenant's counter."""
    drifts = []
    total = 0
    spaces = MemorySpace.objects.select_for_update().filter(tenant_id=tenant_id).order_by("pk")
    for space in spaces:
        actual = space.documents.aggregate(total=Sum("size"))["total"] or 0
        total += actual
        drifts.append(CounterDrift(scope=space.handle_id, recorded=space.used_bytes, actual=actual))
        if space.used_bytes != actual:
            MemorySpace.objects.filter(pk=space.pk).update(used_bytes=actual)
    if tenant_id is not None:
        recorded = _tenant_used_lock(tenant_id, create=True)
        drifts.append(CounterDrift(scope=f"tenant:{tenant_id}", recorded=recorded, actual=total))
        if recorded != total:
            TenantSpaceUsage.objects.filter(pk=tenant_id).update(used_bytes=total)
    return drifts


@contextmanager
def _store_errors() -> Iterator[None]:
    """Answer a failure of the database as the store's refusal: a lock not granted in time
    is StoreBusy, anything else operational (server gone, connection dropped) is
    StoreUnavailable."""
    try:
        yield
    except (OperationalError, InterfaceError) as error:
        sqlstate = getattr(error.__cause__, "sqlstate", None)
        if sqlstate == _LOCK_NOT_AVAILABLE or "database is locked" in str(error):
            raise StoreBusy() from error
        raise StoreUnavailable() from error


@contextmanager
def _locking_transaction(deadline: float) -> Iterator[None]:
    """A transaction whose lock waits end at `deadline` (a time.monotonic() value)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise StoreBusy()
    is_nested = connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor != "postgresql":
            yield
            return
        with connection.cursor() as cursor:
            # lock_timeout 0 would mean "wait for ever": never less than 1 ms.
            cursor.execute(
                "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
                [f"{max(1, int(remaining * 1000))}ms"],
            )
            previous = cursor.fetchone()[0]
        yield
        if is_nested:
            # The caller's transaction goes on after this one: give it its own wait back.
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous])


def _space_lock(handle: SpaceHandle, *, create: bool) -> MemorySpace | None:
    """Lock the space's row, the first lock of every change; create it first if asked.
    Two first writers may race to create it: the loser's insert is ignored and it waits on
    the winner's row lock."""
    space = _space_row_lock(handle)
    if space is not None or not create:
        return space
    MemorySpace.objects.bulk_create(
        [
            MemorySpace(
                handle_id=handle.id,
                visibility=handle.visibility.value,
                name=handle.name,
                tenant_id=handle.tenant_id,
                project=handle.project,
                bot=handle.bot,
                user_id=handle.user_id,
                run=handle.run,
            )
        ],
        ignore_conflicts=True,
    )
    created = _space_row_lock(handle)
    assert created is not None  # inserted above, or by the writer it raced
    return created


# SQL for the row locks every write takes, because it was measured: building and compiling
# these ORM queries cost a space write more than running them.


def _space_row_lock(handle: SpaceHandle) -> MemorySpace | None:
    row = fetch_one(
        f"SELECT {columns(MemorySpace, 's')} FROM {table(MemorySpace)} s "
        f"WHERE s.handle_id = %s{_for_update()}",
        [handle.id],
    )
    return None if row is None else instance(MemorySpace, row, 0)


def _document_lock(space: MemorySpace, path: str) -> _Current | None:
    row = fetch_one(
        f"SELECT id, revision, size FROM {table(SpaceDocument)} "
        f"WHERE space_id = %s AND path = %s{_for_update()}",
        [space.pk, path],
    )
    return None if row is None else _Current(pk=row[0], revision=row[1], size=row[2])


def _for_update() -> str:
    """FOR UPDATE where the database has it; SQLite's IMMEDIATE transaction already holds
    the write lock (as the ORM's `select_for_update()` there adds nothing either)."""
    return " FOR UPDATE" if connection.features.has_select_for_update else ""


def _documents_lock(space: MemorySpace, paths: Sequence[str]) -> dict[str, _Current]:
    """Lock the rows of those of `paths` that exist; answer them by path."""
    found: dict[str, _Current] = {}
    for start in range(0, len(paths), _BATCH_ROWS):
        rows = (
            SpaceDocument.objects.select_for_update()
            .filter(space=space, path__in=paths[start : start + _BATCH_ROWS])
            .values("pk", "path", "revision", "size")
        )
        for row in rows:
            found[row["path"]] = _Current(revision=row["revision"], size=row["size"], pk=row["pk"])
    return found


# The columns of a new document as `_documents_copy` sends them, with their types for
# PostgreSQL's binary COPY.
_INSERT_COLUMNS = (
    ("space_id", "int8"),
    ("path", "text"),
    ("revision", "int8"),
    ("size", "int8"),
    ("body_ciphertext", "bytea"),
    ("checksum_ciphertext", "bytea"),
    ("updated_by", "text"),
    ("updated_at", "timestamptz"),
)


@contextmanager
def _documents_copy(space: MemorySpace) -> Iterator[Callable[[tuple[object, ...]], None]]:
    """What inserts new documents of `space`, each the values of `_INSERT_COLUMNS` after the
    space's, as they come. On PostgreSQL one binary COPY for all of them: a multi-row INSERT
    of thousands of sealed bodies spent most of an import's time in the client, spelling
    every parameter into the statement. The table's constraints hold for COPY as for
    INSERT. An exception inside ends the COPY without a row of it stored."""
    names = [name for name, _ in _INSERT_COLUMNS[1:]]
    if connection.vendor != "postgresql":
        documents: list[SpaceDocument] = []
        yield lambda row: documents.append(
            SpaceDocument(space=space, **dict(zip(names, row, strict=True)))
        )
        SpaceDocument.objects.bulk_create(documents, batch_size=_BATCH_ROWS)
        return
    statement = psycopg_sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        psycopg_sql.Identifier(SpaceDocument._meta.db_table),
        psycopg_sql.SQL(", ").join(psycopg_sql.Identifier(name) for name, _ in _INSERT_COLUMNS),
    )
    # Errors the raw cursor raises become Django's (IntegrityError, OperationalError, ...),
    # as for any other statement of the store.
    with (
        connection.wrap_database_errors,
        connection.cursor() as cursor,
        cursor.cursor.copy(statement) as copy,
    ):
        copy.set_types([kind for _, kind in _INSERT_COLUMNS])
        space_pk = space.pk
        yield lambda row: copy.write_row((space_pk, *row))


def _new_row(space_id: str, sealer: Sealer, meta: DocumentMeta, body: bytes) -> tuple[object, ...]:
    """A new document's values for `_documents_copy`, its parts sealed."""
    return (
        meta.path,
        meta.revision,
        meta.size,
        *_sealed_parts(space_id, sealer, meta, body),
        meta.updated_by,
        meta.updated_at,
    )


def _tree_index(space: MemorySpace) -> dict[str, str]:
    """Every document path of the space, and every directory of its tree with one document
    below it: what `_near_in` asks, in one query whatever the size of a batch."""
    index: dict[str, str] = {}
    for path in SpaceDocument.objects.filter(space=space).values_list("path", flat=True):
        index[path] = path
        segments = path.split("/")
        for end in range(1, len(segments)):
            index.setdefault("/".join(segments[:end]) + "/", path)
    return index


def _near_in(index: dict[str, str], path: str) -> list[str]:
    """As `_paths_near`, from a `_tree_index`: a document at an ancestor of `path`, or one
    below it."""
    if not index:
        return []  # an empty space (an import into a new one): nothing is in the way
    segments = path.split("/")
    ancestors = ("/".join(segments[:end]) for end in range(1, len(segments)))
    near = [ancestor for ancestor in ancestors if index.get(ancestor) == ancestor]
    below = index.get(path + "/")
    return near + ([below] if below else [])


def _sealer(handle: SpaceHandle) -> Sealer | None:
    """The space key's cipher, set up once for every document a call reads (None before the
    tenant's first write)."""
    data_key = space_data_key(tenant_id=handle.tenant_id)
    return None if data_key is None else Sealer(data_key)


def _sealed_fields(
    space_id: str, sealer: Sealer, meta: DocumentMeta, body: bytes
) -> dict[str, object]:
    """The stored fields of a document at `meta`'s revision, its parts sealed."""
    body_ciphertext, checksum_ciphertext = _sealed_parts(space_id, sealer, meta, body)
    return {
        "revision": meta.revision,
        "size": meta.size,
        "body_ciphertext": body_ciphertext,
        "checksum_ciphertext": checksum_ciphertext,
        "updated_by": meta.updated_by,
        "updated_at": meta.updated_at,
    }


def _sealed_parts(
    space_id: str, sealer: Sealer, meta: DocumentMeta, body: bytes
) -> tuple[bytes, bytes]:
    """A document's body and checksum at `meta`'s revision, sealed under the space key,
    each bound to the space, the path and that revision."""

    def sealed(plaintext: bytes, part: str) -> bytes:
        associated_data = space_associated_data(
            space_id=space_id, path=meta.path, revision=meta.revision, part=part
        )
        return sealer.seal(plaintext, associated_data)

    return sealed(body, "body"), sealed(meta.checksum.encode(), "checksum")


def _paths_near(space: MemorySpace, path: str) -> list[str]:
    """The space's documents a new document at `path` could collide with as a file tree:
    one at an ancestor directory of it, or one below it."""
    segments = path.split("/")
    ancestors = ["/".join(segments[:end]) for end in range(1, len(segments))]
    rows = SpaceDocument.objects.filter(space=space)
    return list(
        rows.filter(Q(path__in=ancestors) | starts_with("path", path + "/")).values_list(
            "path", flat=True
        )[:1]
    )


def _document_create(
    space: MemorySpace, path: str, fields: dict[str, object], current_revision: int
) -> None:
    # A taken path: to a create-only write that is a stale view of the space.
    with violation_raises(VersionConflict, currentVersion=current_revision):
        SpaceDocument.objects.create(space=space, path=path, **fields)


def _tenant_used_lock(tenant_id: int, *, create: bool) -> int:
    """Lock the tenant's counter row, the last lock of a change, and answer its bytes; create
    the row first if asked. A tenant that has never written has none: with nothing to lock,
    the first batches of its spaces each read 0 and passed its quota together. A dry run
    creates nothing: it writes nothing, so a first write it races only dates its answer, as
    a dry run's answer always may be."""
    if create:
        TenantSpaceUsage.objects.bulk_create(
            [TenantSpaceUsage(team_id=tenant_id)], ignore_conflicts=True
        )
    used = (
        TenantSpaceUsage.objects.select_for_update()
        .filter(team_id=tenant_id)
        .values_list("used_bytes", flat=True)
        .first()
    )
    return used or 0


def _tenant_charge(tenant_id: int, delta: int, quota: int) -> None:
    """Move the tenant's counter by `delta`. Checked before the space's, so that when both
    quotas would refuse, the tenant's refusal is the one answered."""
    tenant_counter_charge(
        rows=TenantSpaceUsage.objects.filter(team_id=tenant_id),
        new_row=TenantSpaceUsage(team_id=tenant_id),
        delta=delta,
        quota=quota,
    )


def _space_charge(space: MemorySpace, delta: int, quota: int, deleted_revision: int = 0) -> None:
    """Move the space's counter by `delta` and record the change's time (what a private
    space's lifetime counts from), and a delete's `deleted_revision` (which a create then
    starts above). Every write and delete of a space ends here."""
    rows = MemorySpace.objects.filter(pk=space.pk)
    also: dict[str, object] = {"last_written_at": timezone.now()}
    if deleted_revision > space.deleted_revision_max:  # the row was read under its lock
        also["deleted_revision_max"] = deleted_revision
    if not counter_move(rows, delta=delta, quota=quota, also=also):
        raise SpaceQuotaExceeded(usedBytes=space.used_bytes, deltaBytes=delta, quotaBytes=quota)


class _Row(Protocol):
    """A stored document as the readers need it: a SpaceDocument or a `_RowValues`."""

    @property
    def path(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def revision(self) -> int: ...
    @property
    def updated_by(self) -> str: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def body_ciphertext(self) -> bytes | memoryview: ...
    @property
    def checksum_ciphertext(self) -> bytes | memoryview: ...


class _RowValues(NamedTuple):
    """A stored document as `read_all` fetches it (the columns of `_ROW_FIELDS`)."""

    path: str
    size: int
    revision: int
    updated_by: str
    updated_at: datetime
    body_ciphertext: bytes
    checksum_ciphertext: bytes


_ROW_FIELDS = _RowValues._fields


def _stored(space_id: str, document: _Row, sealer: Sealer | None) -> StoredDocument:
    body = _open_part(space_id, document, sealer, "body")
    return StoredDocument(meta=_meta(space_id, document, sealer), body=body)


def _open_part(space_id: str, document: _Row, sealer: Sealer | None, part: str) -> bytes:
    """The document's sealed `part` ("body" or "checksum"), opened whole."""
    return _open(
        sealer,
        bytes(getattr(document, f"{part}_ciphertext")),
        space_associated_data(
            space_id=space_id, path=document.path, revision=document.revision, part=part
        ),
        path=document.path,
        revision=document.revision,
    )


def _meta(space_id: str, document: _Row, sealer: Sealer | None) -> DocumentMeta:
    checksum = _open_part(space_id, document, sealer, "checksum")
    return DocumentMeta(
        path=document.path,
        size=document.size,
        checksum=checksum.decode(),
        revision=document.revision,
        updated_by=document.updated_by,
        updated_at=document.updated_at,
    )


def _open(
    sealer: Sealer | None, ciphertext: bytes, associated_data: bytes, *, path: str, revision: int
) -> bytes:
    """Open a sealed part whole, or refuse with DocumentUnreadable: no partial text."""
    if sealer is None:
        raise DocumentUnreadable(path=path, revision=revision)
    try:
        return sealer.unseal(ciphertext, associated_data)
    except CiphertextRejected:
        raise DocumentUnreadable(path=path, revision=revision) from None
