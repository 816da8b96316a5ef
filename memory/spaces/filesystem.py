"""The filesystem adapter of the `MemoryStore` seam, under `DATA_DIR/spaces/`.

Layout (every visibility has a home, `private` included):

    spaces/tenants/<team id>/usage.json        the tenant's counter
    spaces/tenants/<team id>/tenant.lock       the tenant's lock
    spaces/tenants/<team id>/tmp/              where its counter is written before its rename
    spaces/tenants/<team id>/<space>/          one space (<space>: SHA-256 of the handle id)
    spaces/global/<space>/                     the global space: no tenant, no tenant counter
    <space>/tree/<path>                        the bodies, as the space's tree of files
    <space>/meta/<SHA-256 of path>.json        each document's revision, size, checksum,
                                               updatedBy, updatedAt (beside the tree, not in it)
    <space>/space.json                         the handle's axes, the space's counter,
                                               when it was last written (lastWrittenAt) and
                                               the highest revision deleted
                                               (deletedRevisionMax)
    <space>/space.lock                         the space's lock
    <space>/tmp/                               where a file is written before its rename

Every file is written to `tmp/`, fsynced, renamed into place and its directory fsynced, so a
reader sees the old file or the new one, never a part. A change takes the space's lock,
then the tenant's (the database store's order), each with `flock` and a bounded wait that
ends at the deadline in StoreBusy; readers take the space's lock shared. Any OSError that
reaches the store is StoreUnavailable. The body is renamed in first, then its metadata,
then the counters: a crash between them leaves counters that `reconcile` recomputes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone

from memory.errors import StoreBusy, StoreUnavailable
from memory.spaces import store
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.store import (
    CounterDrift,
    CurrentDocument,
    DocumentMeta,
    DocumentWrite,
    ExpiredSpace,
    Quotas,
    SpaceUsage,
    StoredDocument,
    WriteBatch,
)
from workspaces.errors import NotFound, VersionConflict

# The longest pause between two tries of a busy lock: short against the deadline, long
# enough not to spin.
_LOCK_POLL_MAX_SECONDS = 0.05
# Bytes asked of the system at a time when reading a file whole.
_READ_CHUNK = 64 * 1024
# Makes every temporary file name of this process unique, however fast they are made.
_temporary_numbers = itertools.count()
# Where a space (or a tenant's counter) stages a file before its rename: in a tenant's
# directory it stands beside the spaces, and is none of them.
_STAGING = "tmp"
# Linux's syncfs(2), which the os module does not offer; None where the C library lacks it.
_syncfs = getattr(ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True), "syncfs", None)

Result = TypeVar("Result")


class FilesystemStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def describe(self, handle: SpaceHandle) -> str:
        return f"filesystem: {self._space_dir(handle) / 'tree'}"

    def list(self, handle: SpaceHandle, *, prefix: str = "") -> Sequence[DocumentMeta]:
        directory = prefix.rstrip("/") + "/" if prefix else ""

        def collect() -> list[DocumentMeta]:
            meta_dir = self._space_dir(handle) / "meta"
            if not meta_dir.is_dir():
                return []
            found = (_meta_read(entry) for entry in meta_dir.iterdir())
            return sorted(
                (meta for meta in found if meta.path.startswith(directory)),
                key=lambda meta: meta.path,
            )

        return self._shared(handle, collect)

    def read_all(self, handle: SpaceHandle) -> Iterator[StoredDocument]:
        # One shared lock over the whole read (a consistent export), and each metadata file
        # read once; the bodies one at a time.
        space_dir = self._space_dir(handle)
        meta_dir, tree = space_dir / "meta", str(space_dir / "tree")
        lock_file = space_dir / "space.lock"
        with _store_errors():
            if not lock_file.exists():
                return  # a space never written
            with _flock(lock_file, deadline=None, shared=True):
                for entry in os.scandir(meta_dir) if meta_dir.is_dir() else ():
                    meta = _meta_read(entry.path)
                    body = _file_read(os.path.join(tree, meta.path))
                    yield StoredDocument(meta=meta, body=body)

    def read(self, handle: SpaceHandle, path: str) -> StoredDocument | None:
        def fetch() -> StoredDocument | None:
            meta_file = self._meta_file(handle, path)
            if not meta_file.exists():
                return None
            body = (self._space_dir(handle) / "tree" / path).read_bytes()
            return StoredDocument(meta=_meta_read(meta_file), body=body)

        return self._shared(handle, fetch)

    def write(self, handle: SpaceHandle, request: DocumentWrite) -> DocumentMeta:
        path, body, quotas = request.path, request.body, request.quotas
        space_dir = self._space_dir(handle)
        with _store_errors(), self._locked(handle, request.deadline):
            meta_file = self._meta_file(handle, path)
            current = _meta_read(meta_file) if meta_file.exists() else None
            if current is None:
                store.path_conflict_check(path, _paths_near(space_dir / "tree", path))
            delta = len(body) - (current.size if current else 0)
            # The same order of refusals as the database store: the tenant's quota, the
            # space's, then the revision.
            space_used, tenant_used = self._quotas_require(handle, delta, quotas)
            current_revision = current.revision if current else 0
            if request.expected_revision not in (None, current_revision):
                raise VersionConflict(currentVersion=current_revision)
            meta = DocumentMeta(
                path=path,
                size=len(body),
                checksum=store.body_checksum(body),
                revision=current.revision + 1
                if current
                else self._deleted_revision_max(handle) + 1,
                updated_by=request.updated_by,
                updated_at=timezone.now(),
            )
            body_file = space_dir / "tree" / path
            body_file.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(space_dir, body_file, body)
            _atomic_write(space_dir, meta_file, _meta_dump(meta))
            self._counters_add(handle, delta, space_used, tenant_used)
        return meta

    def write_many_as_read(
        self, handle: SpaceHandle, batch: WriteBatch, reader: store.BatchReader
    ) -> Sequence[DocumentMeta]:
        # Read whole first: staging files while reading would run in the same thread, and
        # the batch's locks would be held for the whole reading.
        return self.write_many(handle, store.batch_read(batch, reader))

    def write_many(self, handle: SpaceHandle, batch: WriteBatch) -> Sequence[DocumentMeta]:
        """Under the space's and the tenant's locks: judge the batch whole, check its one
        delta, then stage every body and metadata file and swap them in together."""
        store.batch_conflict_check([write.path for write in batch.writes])
        space_dir = self._space_dir(handle)
        tree, meta_dir = space_dir / "tree", space_dir / "meta"
        with _store_errors(), self._locked(handle, batch.deadline):
            # Listed once: a batch of thousands would otherwise ask the disk per document.
            stored = set(os.listdir(meta_dir)) if meta_dir.is_dir() else set()
            meta_names = {write.path: f"{_digest(write.path)}.json" for write in batch.writes}

            def current(path: str) -> CurrentDocument | None:
                name = meta_names[path]
                if name not in stored:
                    return None
                meta = _meta_read(meta_dir / name)
                return CurrentDocument(revision=meta.revision, size=meta.size)

            metas, delta = store.batch_judge(
                batch,
                current=current,
                near=_PathsNear(tree),
                now=timezone.now(),
                first_revision=self._deleted_revision_max(handle) + 1,
            )
            space_used, tenant_used = self._quotas_require(handle, delta, batch.quotas)
            if batch.check_only:
                return metas
            files: list[tuple[str, bytes]] = []
            for write, meta in zip(batch.writes, metas, strict=True):
                files.append((f"{tree}/{write.path}", write.body))
                files.append((f"{meta_dir}/{meta_names[write.path]}", _meta_dump(meta)))
            _swap_in(space_dir, files)
            self._counters_add(handle, delta, space_used, tenant_used)
        return metas

    def delete(
        self, handle: SpaceHandle, path: str, *, expected_revision: int | None, deadline: float
    ) -> None:
        space_dir = self._space_dir(handle)
        with _store_errors(), self._locked(handle, deadline):
            meta_file = self._meta_file(handle, path)
            if not meta_file.exists():
                raise NotFound("No such document in this memory space.")
            current = _meta_read(meta_file)
            if expected_revision is not None and expected_revision != current.revision:
                raise VersionConflict(currentVersion=current.revision)
            tree = space_dir / "tree"
            (tree / path).unlink()
            meta_file.unlink()
            _fsync_directory(meta_file.parent)
            _prune_empty_directories(tree, (tree / path).parent)
            self._counters_add(
                handle,
                -current.size,
                self._space_used(handle),
                self._tenant_used(handle),
                deleted_revision=current.revision,
            )

    def usage(self, handle: SpaceHandle) -> SpaceUsage:
        with _store_errors():
            return SpaceUsage(
                used_bytes=self._space_used(handle), tenant_used_bytes=self._tenant_used(handle)
            )

    def spaces(self, tenant_id: int) -> Sequence[SpaceHandle]:
        handles = []
        with _store_errors():
            tenant_dir = self._tenant_dir(tenant_id)
            space_dirs = sorted(tenant_dir.iterdir()) if tenant_dir.is_dir() else []
            for space_dir in space_dirs:
                if not any(space_dir.glob("meta/*.json")):
                    continue
                axes = _json_read(space_dir / "space.json", {})
                if "visibility" not in axes:
                    # Only a crash between a first write's metadata and its counters leaves
                    # a space without its axes; its handle cannot be rebuilt from a digest.
                    continue
                handles.append(_axes_handle(axes))
        return sorted(handles, key=lambda handle: handle.id)

    def purge_tenants(self, tenant_ids: Sequence[int]) -> int:
        removed = 0
        with _store_errors():
            for tenant_id in tenant_ids:
                tenant_dir = self._tenant_dir(tenant_id)
                if not tenant_dir.is_dir():
                    continue
                removed += sum(1 for _ in tenant_dir.glob("*/meta/*.json"))
                shutil.rmtree(tenant_dir)
        return removed

    def private_spaces_expire(self, *, written_before: datetime) -> Sequence[ExpiredSpace]:
        expired = []
        with _store_errors():
            for state_file in sorted(self.root.glob("tenants/*/*/space.json")):
                if not _is_expired(state_file, written_before):
                    continue
                try:
                    removed = self._private_space_expire(state_file.parent, written_before)
                except StoreBusy:
                    continue  # a writer holds it: judged again at the next run
                if removed is not None:
                    expired.append(removed)
        return sorted(expired, key=lambda each: each.handle.id)

    def _private_space_expire(
        self, space_dir: Path, written_before: datetime
    ) -> ExpiredSpace | None:
        """Remove one private space if it is still unwritten since `written_before`, under
        its lock and then its tenant's (the writers' order); None if it was written or
        removed meanwhile. A writer that was waiting on the removed lock file takes it
        again (`_flock`), so it never writes into a space it shares with no lock."""
        deadline = time.monotonic() + settings.MEMORY_STORE_WAIT_SECONDS
        tenant_dir = space_dir.parent
        with (
            _flock(space_dir / "space.lock", deadline),
            _flock(tenant_dir / "tenant.lock", deadline),
        ):
            state_file = space_dir / "space.json"
            if not state_file.exists() or not _is_expired(state_file, written_before):
                return None
            handle = _axes_handle(_json_read(state_file, {}))
            sizes = [_meta_read(entry).size for entry in space_dir.glob("meta/*.json")]
            shutil.rmtree(space_dir)
            freed = sum(sizes)
            if freed:
                used = _json_read(tenant_dir / "usage.json", {"usedBytes": 0})["usedBytes"]
                usage = {"usedBytes": max(0, used - freed)}
                _atomic_write(tenant_dir, tenant_dir / "usage.json", _json_dump(usage))
        return ExpiredSpace(handle=handle, documents=len(sizes), freed_bytes=freed)

    def reconcile(self) -> Sequence[CounterDrift]:
        drifts: list[CounterDrift] = []
        tenants = self.root / "tenants"
        owners: list[int | None] = [None]
        if tenants.is_dir():
            owners += sorted(int(entry.name) for entry in tenants.iterdir() if entry.is_dir())
        deadline = time.monotonic() + settings.MEMORY_STORE_WAIT_SECONDS
        with _store_errors():
            for tenant_id in owners:
                drifts.extend(self._tenant_reconcile(tenant_id, deadline))
        return drifts

    def _tenant_reconcile(self, tenant_id: int | None, deadline: float) -> Sequence[CounterDrift]:
        """Recompute one tenant's counters (or the global space's) under every one of its
        space locks, in name order, then the tenant's lock: the writers' order."""
        drifts = []
        total = 0
        owner_dir = self._tenant_dir(tenant_id)
        if not owner_dir.is_dir():
            return []
        space_dirs = sorted(
            entry for entry in owner_dir.iterdir() if entry.is_dir() and entry.name != _STAGING
        )
        with ExitStack() as locks:
            for space_dir in space_dirs:
                locks.enter_context(_flock(space_dir / "space.lock", deadline))
                metas = list(space_dir.glob("meta/*.json"))
                if not metas and not (space_dir / "space.json").exists():
                    # A first write refused (or failed) before it recorded anything: as in
                    # the database store, whose transaction it rolled back, no space yet.
                    continue
                # A first write cut between its metadata and its counter records 0.
                state = _json_read(space_dir / "space.json", {"usedBytes": 0})
                actual = sum(_meta_read(entry).size for entry in metas)
                total += actual
                scope = state.get("id", space_dir.name)
                drifts.append(CounterDrift(scope=scope, recorded=state["usedBytes"], actual=actual))
                if state["usedBytes"] != actual:
                    _atomic_write(
                        space_dir,
                        space_dir / "space.json",
                        _json_dump({**state, "usedBytes": actual}),
                    )
            if tenant_id is not None:
                locks.enter_context(_flock(owner_dir / "tenant.lock", deadline))
                recorded = _json_read(owner_dir / "usage.json", {"usedBytes": 0})["usedBytes"]
                drifts.append(
                    CounterDrift(scope=f"tenant:{tenant_id}", recorded=recorded, actual=total)
                )
                if recorded != total:
                    _atomic_write(
                        owner_dir, owner_dir / "usage.json", _json_dump({"usedBytes": total})
                    )
        return drifts

    def _tenant_dir(self, tenant_id: int | None) -> Path:
        return self.root / "global" if tenant_id is None else self.root / "tenants" / str(tenant_id)

    def _space_dir(self, handle: SpaceHandle) -> Path:
        return self._tenant_dir(handle.tenant_id) / _digest(handle.id)

    def _meta_file(self, handle: SpaceHandle, path: str) -> Path:
        # Named by a digest of the path, so that no path (a segment of 255 bytes, say) can
        # give its sidecar a name the filesystem refuses.
        return self._space_dir(handle) / "meta" / f"{_digest(path)}.json"

    def _space_used(self, handle: SpaceHandle) -> int:
        state = _json_read(self._space_dir(handle) / "space.json", {"usedBytes": 0})
        return int(state["usedBytes"])

    def _deleted_revision_max(self, handle: SpaceHandle) -> int:
        """As `MemorySpace.deleted_revision_max`: what a create starts above."""
        state = _json_read(self._space_dir(handle) / "space.json", {})
        return int(state.get("deletedRevisionMax", 0))

    def _tenant_used(self, handle: SpaceHandle) -> int:
        if handle.tenant_id is None:
            return 0
        usage = _json_read(self._tenant_dir(handle.tenant_id) / "usage.json", {"usedBytes": 0})
        return int(usage["usedBytes"])

    def _quotas_require(self, handle: SpaceHandle, delta: int, quotas: Quotas) -> tuple[int, int]:
        """Refuse growth by `delta` past either quota; answer the space's and the tenant's
        counters as read. Call holding the space's and the tenant's locks."""
        space_used, tenant_used = self._space_used(handle), self._tenant_used(handle)
        store.quotas_require(
            handle=handle,
            delta=delta,
            space_used=space_used,
            tenant_used=tenant_used,
            quotas=quotas,
        )
        return space_used, tenant_used

    def _counters_add(
        self,
        handle: SpaceHandle,
        delta: int,
        space_used: int,
        tenant_used: int,
        *,
        deleted_revision: int = 0,
    ) -> None:
        """Write both counters moved by `delta`, and a delete's `deleted_revision` (which a
        create then starts above). Call holding the space's and the tenant's locks, with the
        values read under them."""
        space_dir = self._space_dir(handle)
        # Written on every change, even one of no byte: it records the change's time (what
        # a private space's lifetime counts from), and a first write's axes, so that
        # `spaces` can name every space holding a document.
        state = {
            **_handle_axes(handle),
            "usedBytes": max(0, space_used + delta),
            "lastWrittenAt": timezone.now().isoformat(),
            "deletedRevisionMax": max(self._deleted_revision_max(handle), deleted_revision),
        }
        _atomic_write(space_dir, space_dir / "space.json", _json_dump(state))
        if handle.tenant_id is not None and delta != 0:
            tenant_dir = self._tenant_dir(handle.tenant_id)
            usage = {"usedBytes": max(0, tenant_used + delta)}
            _atomic_write(tenant_dir, tenant_dir / "usage.json", _json_dump(usage))

    @contextmanager
    def _locked(self, handle: SpaceHandle, deadline: float) -> Iterator[None]:
        """Hold the space's lock, then the tenant's, each waited for until `deadline`."""
        space_dir = self._space_dir(handle)
        with ExitStack() as locks:
            while True:
                (space_dir / _STAGING).mkdir(parents=True, exist_ok=True)
                try:
                    locks.enter_context(_flock(space_dir / "space.lock", deadline))
                    break
                except _LockFileGone:
                    continue  # the space expired while we waited: start it again
            if handle.tenant_id is not None:
                tenant_lock = self._tenant_dir(handle.tenant_id) / "tenant.lock"
                locks.enter_context(_flock(tenant_lock, deadline))
            yield

    def _shared(self, handle: SpaceHandle, read: Callable[[], Result]) -> Result:
        """Run `read` holding the space's lock shared, so it never sees a body without its
        metadata. A space never written has no lock file and nothing to read."""
        lock_file = self._space_dir(handle) / "space.lock"
        with _store_errors():
            if not lock_file.exists():
                return read()
            with _flock(lock_file, deadline=None, shared=True):
                return read()


@contextmanager
def _store_errors() -> Iterator[None]:
    try:
        yield
    except OSError as error:
        raise StoreUnavailable() from error


class _LockFileGone(Exception):
    """The lock file was removed (its space expired) before or while it was waited for."""


@contextmanager
def _flock(path: Path, deadline: float | None, *, shared: bool = False) -> Iterator[None]:
    """Hold `flock` on `path`, waiting until `deadline` (a time.monotonic() value; None:
    as long as it takes) and answering StoreBusy past it. `flock` has no timeout of its own,
    so the wait tries again with a growing pause. _LockFileGone when the file was removed
    (with its directory) before the lock was granted: a lock on a removed file excludes
    no one who opens the path afresh."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except FileNotFoundError:
        raise _LockFileGone() from None
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if deadline is None:
            fcntl.flock(descriptor, mode)
        else:
            pause = 0.001
            while True:
                try:
                    fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise StoreBusy() from None
                    time.sleep(min(pause, remaining))
                    pause = min(pause * 2, _LOCK_POLL_MAX_SECONDS)
        if os.fstat(descriptor).st_nlink == 0:
            raise _LockFileGone()
        yield
    finally:
        os.close(descriptor)  # closing the descriptor releases the lock


def _atomic_write(space_dir: Path, target: Path, data: bytes) -> None:
    """Write `data` to `target` whole or not at all: a temporary file in `tmp/` of the
    space (the same filesystem), fsynced, renamed over the target, its directory fsynced."""
    temporary = _stage(space_dir, data)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def _stage(space_dir: Path, data: bytes) -> Path:
    """`data` in a new fsynced file in `tmp/` of the space (the filesystem of its tree)."""
    temporary = _temporary_name(space_dir)
    temporary.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def _temporary_name(space_dir: Path) -> Path:
    return space_dir / _STAGING / f"{os.getpid()}-{time.monotonic_ns()}-{next(_temporary_numbers)}"


def _swap_in(space_dir: Path, files: Sequence[tuple[str, bytes]]) -> None:
    """Write every file of `files` (each under `space_dir`) or none: all are staged first (a
    failure there leaves the tree as it was) and made durable by one sync of their
    filesystem (an fsync each made a batch of thousands wait on the disk thousands of
    times), then moved into place. A file whose directory is there is renamed in on its
    own, the file it replaces set aside until the last rename succeeded and put back if one
    failed. A directory that is not there (a new space's tree and metadata, a new folder of
    notes) is staged whole and renamed in as one: a batch into a new space renames two
    directories, not two files per document. Paths are plain strings here: building a
    `Path` per file cost more than writing it."""
    temporary_dir = space_dir / _STAGING
    temporary_dir.mkdir(parents=True, exist_ok=True)
    prefix = f"{temporary_dir}/{os.getpid()}-{time.monotonic_ns()}-"
    # The new directories, laid out below it as they will be below `space_dir`.
    staging = f"{prefix}{next(_temporary_numbers)}"
    base = str(space_dir)
    absent = _AbsentDirectories(base)
    staged: list[tuple[str, str]] = []  # (temporary file, target): renamed in one by one
    roots: set[str] = set()  # new directories, relative to `base`: renamed in whole
    staged_directories: set[str] = set()
    swapped: list[tuple[str, str | None]] = []  # (target, the file it replaced)
    moved: list[str] = []  # the new directories renamed in so far
    try:
        for target, data in files:
            root = absent.root(_parent(target))
            if root is None:
                staged.append((f"{prefix}{next(_temporary_numbers)}", target))
                _file_write(staged[-1][0], data)
                continue
            roots.add(root)
            staged_file = f"{staging}/{target[len(base) + 1 :]}"
            directory = _parent(staged_file)
            if directory not in staged_directories:
                os.makedirs(directory, exist_ok=True)
                staged_directories.add(directory)
            _file_write(staged_file, data)
        _filesystem_sync(space_dir)
        for temporary, target in staged:
            previous = None
            if os.path.exists(target):
                previous = f"{prefix}{next(_temporary_numbers)}"
                os.replace(target, previous)
            swapped.append((target, previous))
            os.replace(temporary, target)
        for root in sorted(roots):
            os.replace(os.path.join(staging, root), os.path.join(base, root))
            moved.append(os.path.join(base, root))
    except BaseException:
        for directory in moved:
            shutil.rmtree(directory, ignore_errors=True)
        for target, previous in reversed(swapped):
            if previous is None:
                Path(target).unlink(missing_ok=True)
            else:
                os.replace(previous, target)
        for temporary, _ in staged:
            Path(temporary).unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    renamed_into = {os.path.dirname(target) for target, _ in swapped}
    renamed_into |= {os.path.dirname(directory) for directory in moved}
    for directory in sorted(renamed_into):
        _fsync_directory(Path(directory))
    for _, previous in swapped:
        if previous is not None:
            os.unlink(previous)


class _AbsentDirectories:
    """Which directories below `base` (which is there) are absent, each looked at once.
    Every directory asked about is below `base`."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.roots: dict[str, str | None] = {base: None}

    def root(self, directory: str) -> str | None:
        """None when `directory` is there; else the highest absent directory between
        `base` and it (itself, or an ancestor), relative to `base`."""
        unknown = []
        path = directory
        while path not in self.roots:
            unknown.append(path)
            path = _parent(path)
        for path in reversed(unknown):  # from the nearest to `base` down
            above = self.roots[_parent(path)]
            if above is None and not os.path.isdir(path):
                above = path[len(self.base) + 1 :]
            self.roots[path] = above
        return self.roots[directory]


def _parent(path: str) -> str:
    """The directory of a path `_swap_in` built (absolute, no doubled or trailing `/`), as
    `os.path.dirname` answers for it: asked twice per staged file, dirname's generality
    cost more than the answer."""
    return path.rpartition("/")[0]


def _file_write(path: str, data: bytes) -> None:
    """`data` in a new file at `path`, with the system's writes: a Python file object per
    file cost a batch of thousands more than the writing did."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        unwritten = memoryview(data)
        while unwritten:
            unwritten = unwritten[os.write(descriptor, unwritten) :]
    finally:
        os.close(descriptor)


def _file_read(path: str | Path) -> bytes:
    """The whole file at `path`, with the system's reads: a Python file object (and a
    `Path`) per file cost an export of thousands of documents more than the reading did."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(descriptor, _READ_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def _filesystem_sync(directory: Path) -> None:
    """Flush every written file of the filesystem holding `directory` to its disk: Linux's
    syncfs, else a sync of every filesystem."""
    if _syncfs is None:
        os.sync()
        return
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs(descriptor) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    finally:
        os.close(descriptor)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _prune_empty_directories(tree: Path, directory: Path) -> None:
    """Remove the directories a delete left empty, up to the tree, so that a later document
    may take the name one of them had."""
    while directory != tree and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent


class _PathsNear:
    """`_paths_near` over a batch: an ancestor directory shared by many of its documents is
    looked at on disk once, and below one that is absent nothing more is asked (a batch into
    a new space or a new directory costs no look-up per document)."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree
        self.kinds: dict[str, str] = {}  # a path of the tree ("": the tree itself): its kind

    def __call__(self, path: str) -> list[str]:
        segments = path.split("/")
        if self._kind("") != _DIRECTORY:
            return []
        for end in range(1, len(segments)):
            ancestor = "/".join(segments[:end])
            kind = self._kind(ancestor)
            if kind == _FILE:
                return [ancestor]
            if kind != _DIRECTORY:
                return []  # nothing can be below it
        if not os.path.isdir(os.path.join(self.tree, path)):
            return []
        return _paths_near(self.tree, path)

    def _kind(self, relative: str) -> str:
        """What the tree holds at `relative`: a regular file, a directory, or neither ("",
        absent or anything else), as `isfile` and `isdir` see it."""
        if relative not in self.kinds:
            try:
                mode = os.stat(os.path.join(self.tree, relative)).st_mode
            except (OSError, ValueError):  # as `isfile` and `isdir` answer "no"
                mode = 0
            self.kinds[relative] = (
                _FILE if stat.S_ISREG(mode) else _DIRECTORY if stat.S_ISDIR(mode) else ""
            )
        return self.kinds[relative]


_FILE, _DIRECTORY = "file", "directory"


def _paths_near(tree: Path, path: str) -> list[str]:
    """As the database store's: a document at an ancestor of `path`, or any below it."""
    segments = path.split("/")
    for end in range(1, len(segments)):
        ancestor = tree.joinpath(*segments[:end])
        if ancestor.is_file():
            return ["/".join(segments[:end])]
    below = tree / path
    if below.is_dir():
        return [str(file.relative_to(tree)) for file in sorted(below.rglob("*")) if file.is_file()][
            :1
        ]
    return []


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _axes_handle(axes: dict[str, Any]) -> SpaceHandle:
    """The handle whose axes `_handle_axes` recorded."""
    return SpaceHandle(
        visibility=Visibility(axes["visibility"]),
        name=axes["name"],
        tenant_id=axes["tenant"],
        project=axes["project"],
        bot=axes["bot"],
        user_id=axes["user"],
        run=axes["run"],
    )


def _is_expired(state_file: Path, written_before: datetime) -> bool:
    """Whether the space `state_file` describes is private and last written before
    `written_before`. A state written before the time was recorded is dated by its file,
    which every change of its counter rewrote."""
    state = _json_read(state_file, {})
    if state.get("visibility") != Visibility.PRIVATE.value:
        return False
    if "lastWrittenAt" in state:
        written = datetime.fromisoformat(state["lastWrittenAt"])
    else:
        written = datetime.fromtimestamp(state_file.stat().st_mtime, tz=UTC)
    return written < written_before


def _handle_axes(handle: SpaceHandle) -> dict[str, Any]:
    return {
        "id": handle.id,
        "visibility": handle.visibility.value,
        "name": handle.name,
        "tenant": handle.tenant_id,
        "project": handle.project,
        "bot": handle.bot,
        "user": handle.user_id,
        "run": handle.run,
    }


def _meta_dump(meta: DocumentMeta) -> bytes:
    return _json_dump(
        {
            "path": meta.path,
            "revision": meta.revision,
            "size": meta.size,
            "checksum": meta.checksum,
            "updatedBy": meta.updated_by,
            "updatedAt": meta.updated_at.isoformat(),
        }
    )


def _meta_read(meta_file: str | Path) -> DocumentMeta:
    data = json.loads(_file_read(meta_file))
    return DocumentMeta(
        path=data["path"],
        size=data["size"],
        checksum=data["checksum"],
        revision=data["revision"],
        updated_by=data["updatedBy"],
        updated_at=datetime.fromisoformat(data["updatedAt"]),
    )


def _json_dump(data: dict[str, Any]) -> bytes:
    return _JSON_ENCODER.encode(data).encode()


# What `json.dumps(data, sort_keys=True)` writes, from one encoder: `dumps` with any option
# builds a new one per call, which cost a batch of thousands of metadata files more than
# the encoding did.
_JSON_ENCODER = json.JSONEncoder(sort_keys=True)


def _json_read(path: Path, default: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_bytes()))
    except FileNotFoundError:
        return default
