"""The one seam every writer of a memory space meets: the `MemoryStore` protocol.

Two adapters implement it, `database.DatabaseStore` (the default) and
`filesystem.FilesystemStore` (under `DATA_DIR/spaces/`), and one contract suite
(`memory/tests/spaces/test_store_contract.py`) runs every behaviour against both: a
difference between them is a defect.

The store trusts its caller for tenancy, the global write gate, the path rule, the
document ceiling and the secret scan (`memory.spaces.services` applies them, for every
writer, before it calls the store). The store owns what must be atomic with the bytes: the
revision compare-and-set and the two byte counters, checked against the quotas the caller
resolved at write time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from memory.errors import SpaceQuotaExceeded
from memory.spaces.handle import SpaceHandle
from workspaces.errors import InvalidDocumentPath, TenantQuotaExceeded, VersionConflict


@dataclass(frozen=True)
class Quotas:
    """The caps a write is checked against, resolved when it happens (0: no cap).
    `tenant_bytes` is ignored for a space with no tenant (global)."""

    space_bytes: int
    tenant_bytes: int


@dataclass(frozen=True)
class DocumentWrite:
    """One write as the store takes it, built once by `memory.spaces.services` (or a test).

    `deadline` is a time.monotonic() value; `MemoryStore.write` says what every field
    means to the store."""

    path: str
    body: bytes
    expected_revision: int | None
    updated_by: str
    quotas: Quotas
    deadline: float


@dataclass(frozen=True)
class DocumentMeta:
    path: str
    size: int  # bytes of the body
    checksum: str  # "sha256:<hex>" of the body
    # +1 on every write. A create starts one above the highest revision a deleted document
    # of the space had (1 in a space that has deleted none): a revision the store answered
    # once never names another text of that path, so a writer holding it is refused.
    revision: int
    updated_by: str  # "user:<id>", "bot:<id>", "import:<user id>", "mirror:<bot id>"
    updated_at: datetime


@dataclass(frozen=True)
class StoredDocument:
    meta: DocumentMeta
    body: bytes


@dataclass(frozen=True)
class SpaceUsage:
    used_bytes: int
    tenant_used_bytes: int  # 0 for a space with no tenant


@dataclass(frozen=True)
class CounterDrift:
    """One counter as `reconcile` found it: `scope` is a space id or `tenant:<id>`."""

    scope: str
    recorded: int
    actual: int

    @property
    def drift(self) -> int:
        return self.recorded - self.actual


@dataclass(frozen=True)
class ExpiredSpace:
    """A `private` space `MemoryStore.private_spaces_expire` removed, and what it held."""

    handle: SpaceHandle
    documents: int
    freed_bytes: int


def body_checksum(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def path_conflict_check(path: str, near: Sequence[str]) -> None:
    """Refuse a new document that would be both a file and a directory of the space's tree:
    `near` are the documents at an ancestor of `path` or below it. Both stores refuse it,
    so that every space can be laid out as files (the filesystem store, an export)."""
    if near:
        raise InvalidDocumentPath(
            "A document of this space is in the way of this path; nothing was written.",
            reason="path_conflict",
            conflictsWith=near[0],
        )


@dataclass(frozen=True)
class PendingWrite:
    """One document of a batch (`MemoryStore.write_many`); `expected_revision` as `write`'s.
    `checksum` is the body's `body_checksum` when the caller has already computed it (an
    import, which verified it against the archive's), so a batch hashes each body once."""

    path: str
    body: bytes
    expected_revision: int | None
    checksum: str | None = None


@dataclass(frozen=True)
class WriteBatch:
    """Documents `MemoryStore.write_many` writes together, and how."""

    writes: Sequence[PendingWrite]
    updated_by: str
    quotas: Quotas
    deadline: float  # as `write`'s
    check_only: bool = False  # judge the batch and answer its metadata, write nothing


class BatchReader(Protocol):
    """The writes of a batch that is still being read (an archive import), for
    `MemoryStore.write_many_as_read`: `read` reads them, handing each new document to `offer`
    as soon as it has it, then `writes` answers the whole batch once every one of the
    caller's refusals has passed. Either may raise: the batch is then refused whole. Both
    may run while the store is writing (inside its COPY): neither may use the database."""

    def read(self, offer: Callable[[PendingWrite], None]) -> None: ...

    def writes(self) -> Sequence[PendingWrite]: ...


def batch_read(batch: WriteBatch, reader: BatchReader) -> WriteBatch:
    """`batch` with the writes `reader` answers, read whole first: for a store (or a
    case) that writes nothing while the batch is still being read."""
    reader.read(lambda write: None)
    return replace(batch, writes=reader.writes())


@dataclass(frozen=True)
class CurrentDocument:
    """What a store holds at a path when a batch is judged."""

    revision: int
    size: int


def batch_judge(
    batch: WriteBatch,
    *,
    current: Callable[[str], CurrentDocument | None],
    near: Callable[[str], Sequence[str]],
    now: datetime,
    first_revision: int,
) -> tuple[list[DocumentMeta], int]:
    """Judge each write of `batch` as `MemoryStore.write` would, against the document now
    at its path (`current`) and, for a new one, the documents in its way (`near`, as for
    `path_conflict_check`); answer the metadata each would get and the batch's one delta.
    A new document gets `first_revision` (`DocumentMeta.revision`). Call under the locks
    the store writes under."""
    delta = 0
    metas = []
    for write in batch.writes:
        found = current(write.path)
        revision = found.revision if found else 0
        if write.expected_revision not in (None, revision):
            raise VersionConflict(currentVersion=revision, path=write.path)
        if found is None:
            path_conflict_check(write.path, near(write.path))
        delta += len(write.body) - (found.size if found else 0)
        metas.append(
            DocumentMeta(
                path=write.path,
                size=len(write.body),
                checksum=write.checksum or body_checksum(write.body),
                revision=revision + 1 if found else first_revision,
                updated_by=batch.updated_by,
                updated_at=now,
            )
        )
    return metas, delta


def batch_conflict_check(paths: Sequence[str]) -> None:
    """Refuse a batch that names one path twice, or that would make one of its documents a
    directory of another (`a.md` and `a.md/b.md`): as `path_conflict_check`, within it."""
    seen = set(paths)
    if len(seen) != len(paths):
        duplicate = next(path for path in paths if paths.count(path) > 1)
        raise InvalidDocumentPath(
            "The batch names this path twice; nothing was written.",
            reason="path_conflict",
            conflictsWith=duplicate,
        )
    if seen.isdisjoint(_directories(seen)):
        return  # no path of the batch is a directory of another (most batches)
    for path in sorted(seen):
        segments = path.split("/")
        ancestors = ("/".join(segments[:end]) for end in range(1, len(segments)))
        path_conflict_check(path, [ancestor for ancestor in ancestors if ancestor in seen])


def _directories(paths: Iterable[str]) -> set[str]:
    """Every directory of `paths` (`a` and `a/b` for `a/b/c.md`). A directory met before
    ends the walk up: its own are in already, so a batch of thousands of documents in a
    few folders costs one look-up per document."""
    directories: set[str] = set()
    for path in paths:
        end = path.rfind("/")
        while end > 0 and (directory := path[:end]) not in directories:
            directories.add(directory)
            end = path.rfind("/", 0, end)
    return directories


def quotas_require(
    *, handle: SpaceHandle, delta: int, space_used: int, tenant_used: int, quotas: Quotas
) -> None:
    """Refuse a write (or a batch, with its one total `delta`) that would take the tenant
    (answered first) or the space past its quota. Call with counters read under the locks."""
    if handle.tenant_id is not None and _exceeds(tenant_used, delta, quotas.tenant_bytes):
        raise TenantQuotaExceeded(
            usedBytes=tenant_used, deltaBytes=delta, quotaBytes=quotas.tenant_bytes
        )
    if _exceeds(space_used, delta, quotas.space_bytes):
        raise SpaceQuotaExceeded(
            usedBytes=space_used, deltaBytes=delta, quotaBytes=quotas.space_bytes
        )


def _exceeds(used: int, delta: int, quota: int) -> bool:
    return delta > 0 and quota != 0 and used + delta > quota


class MemoryStore(Protocol):
    def describe(self, handle: SpaceHandle) -> str:
        """Where the space lives, for people (a table and key, or a directory)."""

    def list(self, handle: SpaceHandle, *, prefix: str = "") -> Sequence[DocumentMeta]:
        """Every document under `prefix` (a canonical directory, "" for all), recursively,
        sorted by path. A space never written lists nothing."""

    def read_all(self, handle: SpaceHandle) -> Iterator[StoredDocument]:
        """Every document of the space with its body, one at a time, in no set order (an
        export): as `read` of each, without a round trip per document."""

    def read(self, handle: SpaceHandle, path: str) -> StoredDocument | None:
        """The current body and metadata, or None when the document does not exist."""

    def write(self, handle: SpaceHandle, request: DocumentWrite) -> DocumentMeta:
        """Create or replace one document (`request`), atomically with its counters.

        `expected_revision` 0 creates only; N replaces revision N only; None replaces
        whatever is current (import and the mirror, after their own checks). A stale one
        raises VersionConflict(currentVersion=...). Overwriting charges the difference in
        size; growth past either quota raises SpaceQuotaExceeded or TenantQuotaExceeded
        (the tenant one when both would fail) with usedBytes, deltaBytes, quotaBytes.
        `deadline` is a time.monotonic() value: a write that cannot take its locks by then
        raises StoreBusy. A new document that would be both a file and a directory of the
        space's tree (`a.md` beside `a.md/b.md`) is InvalidDocumentPath (`path_conflict`).
        A refused write changes nothing, counters included.
        """

    def write_many(self, handle: SpaceHandle, batch: WriteBatch) -> Sequence[DocumentMeta]:
        """Create or replace every document of `writes` (an archive import), all or none:
        one transaction (database) or staged then swapped (filesystem). Each is judged as
        `write` judges it (revision, path conflict, within the batch too), and the quotas
        are charged with the batch's one total delta. Answers the metadata in `writes`'
        order. With `check_only`, judges the batch and answers the same without writing.
        """

    def write_many_as_read(
        self, handle: SpaceHandle, batch: WriteBatch, reader: BatchReader
    ) -> Sequence[DocumentMeta]:
        """`write_many` of the writes `reader` answers (`batch.writes` is not read). The store
        may start writing the new documents `reader.read` offers (`expected_revision` 0)
        while the rest is still being read, inside the batch's one transaction, so that the
        database's work runs beside the reading; the batch is then judged whole as
        `write_many` judges it, and any refusal, the reader's included, leaves nothing
        written. Every write offered must be in the batch, with the same body."""

    def delete(
        self, handle: SpaceHandle, path: str, *, expected_revision: int | None, deadline: float
    ) -> None:
        """Remove one document and free its bytes; NotFound when absent, VersionConflict
        when `expected_revision` is stale, StoreBusy past the deadline."""

    def usage(self, handle: SpaceHandle) -> SpaceUsage:
        """The space's and its tenant's used bytes; 0 for a space never written."""

    def spaces(self, tenant_id: int) -> Sequence[SpaceHandle]:
        """Every space of the tenant that holds a document, sorted by handle id (for
        `manage.py memory du --team`)."""

    def purge_tenants(self, tenant_ids: Sequence[int]) -> int:
        """Remove every space, document and counter of these tenants; return the count of
        documents removed. Used by the nightly org purge."""

    def private_spaces_expire(self, *, written_before: datetime) -> Sequence[ExpiredSpace]:
        """Remove every `private` space last written before `written_before` (every write
        and delete of a space records when it happened; a space nothing changed since its
        creation counts from then), with its documents, and free their bytes from the
        tenant's counter; answer what was removed, sorted by handle id. Each space is
        judged again under its writers' locks, so one written meanwhile is kept; one whose
        locks are not free within MEMORY_STORE_WAIT_SECONDS is left for the next run. A
        write after the removal starts the space again from nothing."""

    def reconcile(self) -> Sequence[CounterDrift]:
        """Recompute every space's and tenant's counter from the documents, under the
        writers' locks, fix any that differ, and return every counter as found."""
