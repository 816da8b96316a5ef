"""What only the filesystem store has: its layout on disk."""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time

import pytest

from memory.errors import StoreUnavailable
from memory.spaces import filesystem
from memory.spaces.filesystem import FilesystemStore, _flock, _LockFileGone
from memory.spaces.handle import Visibility
from memory.spaces.store import PendingWrite, Quotas, WriteBatch
from memory.tests.spaces.conftest import handle_of, store_write


@pytest.mark.parametrize("visibility", [Visibility.PRIVATE, Visibility.GLOBAL])
def test_the_tree_holds_the_bodies_alone_and_no_temporary_file_is_left(tmp_path, visibility):
    store = FilesystemStore(root=tmp_path)
    handle = handle_of(None if visibility is Visibility.GLOBAL else 4, visibility)
    space_dir = store._space_dir(handle)

    store_write(store, handle, "notes/a.md", b"# A\n", expected=0)
    store_write(store, handle, "notes/a.md", b"# A again\n", expected=1)
    store_write(store, handle, "b.md", b"b", expected=0)

    tree = space_dir / "tree"
    files = sorted(str(path.relative_to(tree)) for path in tree.rglob("*") if path.is_file())
    assert files == ["b.md", "notes/a.md"]
    assert (tree / "notes/a.md").read_bytes() == b"# A again\n"
    assert list((space_dir / "tmp").iterdir()) == []
    assert len(list((space_dir / "meta").iterdir())) == 2


def test_a_delete_removes_the_directories_it_emptied(tmp_path):
    store = FilesystemStore(root=tmp_path)
    handle = handle_of(4, Visibility.ORG)
    store_write(store, handle, "x/y/a.md", b"a", expected=0)

    store.delete(handle, "x/y/a.md", expected_revision=1, deadline=time.monotonic() + 5)

    assert list((store._space_dir(handle) / "tree").iterdir()) == []
    # A create starts above the revision the space deleted.
    assert store_write(store, handle, "x.md", b"x", expected=0).revision == 2


def test_a_filesystem_failure_is_store_unavailable(tmp_path):
    # A file where the store's root directory should be: nothing can be created under it.
    root = tmp_path / "spaces"
    root.write_text("not a directory")
    store = FilesystemStore(root=root)

    with pytest.raises(StoreUnavailable):
        store_write(store, handle_of(4, Visibility.ORG), "a.md", b"a", expected=0)


@pytest.mark.parametrize("failing_rename", [1, 2, 4, 6])
def test_a_batch_failing_in_its_swap_puts_every_file_back(tmp_path, monkeypatch, failing_rename):
    store = FilesystemStore(root=tmp_path)
    handle = handle_of(4)
    space_dir = store._space_dir(handle)
    store_write(store, handle, "a.md", b"old a", expected=0)
    before = {path: path.read_bytes() for path in space_dir.rglob("*") if path.is_file()}
    renames = 0
    real_replace = os.replace

    def replace(source, target):
        nonlocal renames
        renames += 1
        if renames == failing_rename:
            raise OSError("disk gone")
        real_replace(source, target)

    monkeypatch.setattr("memory.spaces.filesystem.os.replace", replace)
    with pytest.raises(StoreUnavailable):
        store.write_many(
            handle,
            WriteBatch(
                writes=[PendingWrite("a.md", b"new a", 1), PendingWrite("b/c.md", b"c", 0)],
                updated_by="import:7",
                quotas=Quotas(space_bytes=0, tenant_bytes=0),
                deadline=time.monotonic() + 5,
            ),
        )

    after = {path: path.read_bytes() for path in space_dir.rglob("*") if path.is_file()}
    assert after == before


def _counting_renames(monkeypatch, failing: int | None = None) -> list[str]:
    """Every `os.replace` of the store, by target; the `failing`-th raises."""
    targets: list[str] = []
    real_replace = os.replace

    def replace(source, target):
        targets.append(str(target))
        if len(targets) == failing:
            raise OSError("disk gone")
        real_replace(source, target)

    monkeypatch.setattr("memory.spaces.filesystem.os.replace", replace)
    return targets


def _batch(*writes: PendingWrite) -> WriteBatch:
    return WriteBatch(
        writes=list(writes),
        updated_by="import:7",
        quotas=Quotas(space_bytes=0, tenant_bytes=0),
        deadline=time.monotonic() + 5,
    )


def test_a_batch_into_new_directories_renames_each_in_whole(tmp_path, monkeypatch):
    """A directory that was not there is staged whole and renamed in as one: a batch into a
    new space renames its tree and its metadata directory, not two files per document; a
    file beside ones already there is renamed in on its own."""
    store = FilesystemStore(root=tmp_path)
    handle = handle_of(4)
    space_dir = store._space_dir(handle)
    renamed = _counting_renames(monkeypatch)
    paths = [f"notes/{index % 3}/n-{index}.md" for index in range(12)]

    documents = (str(space_dir / "tree"), str(space_dir / "meta"))  # not the counters

    store.write_many(handle, _batch(*(PendingWrite(path, path.encode(), 0) for path in paths)))

    assert sorted(name for name in renamed if name.startswith(documents)) == sorted(documents)
    renamed.clear()
    store.write_many(
        handle,
        _batch(PendingWrite("notes/0/late.md", b"late", 0), PendingWrite("new/x.md", b"x", 0)),
    )

    tree_renames = [name for name in renamed if name.startswith(documents[0])]
    assert sorted(tree_renames) == [
        str(space_dir / "tree/new"),
        str(space_dir / "tree/notes/0/late.md"),
    ]
    bodies = {path: path.encode() for path in paths} | {
        "notes/0/late.md": b"late",
        "new/x.md": b"x",
    }
    for path, body in bodies.items():
        stored = store.read(handle, path)
        assert stored is not None
        assert stored.body == body
    assert list((space_dir / "tmp").iterdir()) == []


# The metadata files are renamed in one by one (1, 2), then the new directories b (3) and
# d (4): 4 fails after b was moved in.
@pytest.mark.parametrize("failing_rename", [1, 3, 4])
def test_a_batch_failing_after_a_new_directory_moved_in_removes_it(
    tmp_path, monkeypatch, failing_rename
):
    store = FilesystemStore(root=tmp_path)
    handle = handle_of(4)
    space_dir = store._space_dir(handle)
    store_write(store, handle, "a.md", b"old a", expected=0)
    before = {path: path.read_bytes() for path in space_dir.rglob("*") if path.is_file()}
    _counting_renames(monkeypatch, failing=failing_rename)

    with pytest.raises(StoreUnavailable):
        store.write_many(
            handle,
            _batch(PendingWrite("b/c.md", b"c", 0), PendingWrite("d/e/f.md", b"f", 0)),
        )

    after = {path: path.read_bytes() for path in space_dir.rglob("*") if path.is_file()}
    assert after == before
    assert sorted(path.name for path in (space_dir / "tree").iterdir()) == ["a.md"]
    assert list((space_dir / "tmp").iterdir()) == []


def test_a_batch_syncs_its_staged_files_once_before_the_first_rename(tmp_path, monkeypatch):
    """A file renamed into the tree before its bytes reached the disk could be found empty
    after a crash: the batch's one filesystem sync comes before any of its renames."""
    store = FilesystemStore(root=tmp_path)
    handle = handle_of(4)
    store_write(store, handle, "a.md", b"old a", expected=0)
    events: list[str] = []
    real_replace, real_sync = os.replace, filesystem._filesystem_sync

    def replace(source, target):
        events.append("rename")
        real_replace(source, target)

    def sync(directory):
        events.append("sync")
        real_sync(directory)

    monkeypatch.setattr("memory.spaces.filesystem.os.replace", replace)
    monkeypatch.setattr("memory.spaces.filesystem._filesystem_sync", sync)
    store.write_many(
        handle,
        WriteBatch(
            writes=[PendingWrite("a.md", b"new a", 1), PendingWrite("b/c.md", b"c", 0)],
            updated_by="import:7",
            quotas=Quotas(space_bytes=0, tenant_bytes=0),
            deadline=time.monotonic() + 5,
        ),
    )

    assert events[0] == "sync"
    assert events.count("sync") == 1
    assert "rename" in events
    written = store.read(handle, "b/c.md")
    assert written is not None
    assert written.body == b"c"


def waiting_on_a_lock(monkeypatch) -> threading.Event:
    """Set once some thread has opened a lock file and found it held: from then on, what
    happens to the file happens while that thread waits on it (no sleep guessing when)."""
    blocked = threading.Event()
    real_flock = fcntl.flock

    def flock(descriptor, operation):
        try:
            return real_flock(descriptor, operation)
        except BlockingIOError:
            blocked.set()
            raise

    monkeypatch.setattr(fcntl, "flock", flock)
    return blocked


def test_a_writer_waiting_on_an_expired_spaces_lock_writes_under_a_fresh_one(tmp_path, monkeypatch):
    blocked = waiting_on_a_lock(monkeypatch)
    store = FilesystemStore(root=tmp_path)
    handle = handle_of(7, Visibility.PRIVATE)
    store_write(store, handle, "a.md", b"old", expected=0)
    space_dir = store._space_dir(handle)
    written = []

    with _flock(space_dir / "space.lock", deadline=None):  # the expiry holds it...
        writer = threading.Thread(
            target=lambda: written.append(store_write(store, handle, "b.md", b"new", expected=0))
        )
        writer.start()
        assert blocked.wait(timeout=30)  # the writer opened the lock file and waits on it
        shutil.rmtree(space_dir)  # ...and removes the space, lock file included
    writer.join(timeout=10)

    assert [meta.path for meta in written] == ["b.md"]
    assert [meta.path for meta in store.list(handle)] == ["b.md"]
    assert (space_dir / "space.lock").exists()  # the file the next writer will lock too


def test_a_lock_on_a_removed_file_is_refused(tmp_path, monkeypatch):
    blocked = waiting_on_a_lock(monkeypatch)
    lock = tmp_path / "space.lock"
    lock.touch()
    refusals = []

    def wait() -> None:
        try:
            with _flock(lock, deadline=time.monotonic() + 10):
                pass
        except _LockFileGone:
            refusals.append("gone")

    with _flock(lock, deadline=None):
        waiter = threading.Thread(target=wait)
        waiter.start()
        assert blocked.wait(timeout=30)
        lock.unlink()
    waiter.join(timeout=10)

    assert refusals == ["gone"]
