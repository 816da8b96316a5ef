"""What only the database store has: sealed bodies and the database's failures."""

from __future__ import annotations

import hashlib
import time

import psycopg
import pytest
from django.db import connection
from django.db.backends.postgresql.base import Cursor as ClientBindingCursor

from conftest import backend_terminate, postgres_only, run_concurrently
from memory.errors import StoreUnavailable
from memory.models import SpaceDocument, SpaceKey
from memory.spaces.database import DatabaseStore
from memory.spaces.handle import Visibility
from memory.spaces.store import PendingWrite, WriteBatch
from memory.tests.spaces.conftest import ROOMY, handle_of, store_write
from workspaces.crypto import deployment_key_id
from workspaces.errors import DocumentUnreadable
from workspaces.services import data_keys_rewrap
from workspaces.tests.leaks import tables_holding

pytestmark = pytest.mark.django_db

MARKER = "OKAPI-51c2-space-marker"


def test_a_body_and_its_checksum_are_stored_only_sealed(team):
    store = DatabaseStore()
    handle = handle_of(team)
    body = f"# Notes\n\n{MARKER}\n".encode()

    store_write(store, handle, "a.md", body, expected=0)

    assert tables_holding(MARKER) == []
    assert tables_holding(hashlib.sha256(body).hexdigest()) == []
    stored = store.read(handle, "a.md")
    assert stored is not None
    assert stored.body == body


def test_the_global_space_and_each_tenant_have_their_own_key(make_team):
    store = DatabaseStore()
    team, other = make_team(), make_team()

    for handle in (handle_of(team), handle_of(other), handle_of(None, Visibility.GLOBAL)):
        store_write(store, handle, "a.md", b"x", expected=0)

    keys = [bytes(row.wrapped_key) for row in SpaceKey.objects.all()]
    assert len(keys) == len(set(keys)) == 3
    assert SpaceKey.objects.filter(tenant__isnull=True).count() == 1


def test_a_flipped_bit_makes_the_document_unreadable_never_partial(team):
    store = DatabaseStore()
    handle = handle_of(team)
    store_write(store, handle, "a.md", MARKER.encode(), expected=0)
    row = SpaceDocument.objects.get()
    tampered = bytearray(row.body_ciphertext)
    tampered[20] ^= 0x01
    SpaceDocument.objects.filter(pk=row.pk).update(body_ciphertext=bytes(tampered))

    with pytest.raises(DocumentUnreadable) as refused:
        store.read(handle, "a.md")

    assert refused.value.detail == {"path": "a.md", "revision": 1}


@pytest.mark.parametrize("target", ["another path", "another space", "another revision"])
def test_a_ciphertext_moved_to_another_row_or_revision_fails_to_open(team, target):
    store = DatabaseStore()
    handle, other_space = handle_of(team), handle_of(team, name="other")
    store_write(store, handle, "a.md", MARKER.encode(), expected=0)
    stolen = SpaceDocument.objects.values("body_ciphertext", "checksum_ciphertext").get()
    reader, path = {
        "another path": (handle, "b.md"),
        "another space": (other_space, "a.md"),
        "another revision": (handle, "a.md"),
    }[target]
    store_write(store, reader, path, b"victim", expected=None)

    SpaceDocument.objects.filter(space__handle_id=reader.id, path=path).update(**stolen)

    with pytest.raises(DocumentUnreadable):
        store.read(reader, path)
    with pytest.raises(DocumentUnreadable):
        store.list(reader)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_connection_lost_under_a_write_is_store_unavailable_and_writes_nothing(team):
    store = DatabaseStore()
    handle = handle_of(team)
    store_write(store, handle, "a.md", b"one", expected=0)
    backend_terminate(connection.connection.info.backend_pid)

    with pytest.raises(StoreUnavailable):
        store_write(store, handle, "a.md", b"two", expected=1)

    connection.close()
    stored = store.read(handle, "a.md")
    assert stored is not None
    assert (stored.body, stored.meta.revision) == (b"one", 1)
    assert store.usage(handle).used_bytes == 3


def test_space_documents_stay_readable_across_a_deployment_key_rotation(team, settings):
    store = DatabaseStore()
    handle, glob = handle_of(team), handle_of(None, Visibility.GLOBAL)
    for space in (handle, glob):
        store_write(store, space, "a.md", b"kept through the rotation", expected=0)
    old = settings.DEPLOYMENT_KEY
    settings.DEPLOYMENT_KEY = "the new deployment key for this rotation " * 2
    settings.DEPLOYMENT_PREVIOUS_KEYS = [old]

    rewrapped = data_keys_rewrap()
    settings.DEPLOYMENT_PREVIOUS_KEYS = []

    assert rewrapped == 2
    assert set(SpaceKey.objects.values_list("wrapping_key_id", flat=True)) == {
        deployment_key_id(settings.DEPLOYMENT_KEY)
    }
    for space in (handle, glob):
        stored = store.read(space, "a.md")
        assert stored is not None
        assert stored.body == b"kept through the rotation"


def test_read_all_answers_each_document_as_read_does(team, monkeypatch):
    """read_all fetches its pages in PostgreSQL's binary format (`values_binary`), read
    through the ORM: the same bodies (bytes) and metadata, times in the same zone."""
    monkeypatch.setattr("memory.spaces.database._BATCH_ROWS", 2)
    store = DatabaseStore()
    handle = handle_of(team)
    for name in ("a", "b/c", "d", "e"):
        store_write(store, handle, f"{name}.md", f"# {name}\n".encode(), expected=0)

    documents = list(store.read_all(handle))
    one_by_one = [store.read(handle, document.meta.path) for document in documents]

    assert [document.meta.path for document in documents] == ["a.md", "b/c.md", "d.md", "e.md"]
    assert documents == one_by_one
    assert all(type(document.body) is bytes for document in documents)
    assert [document.meta.updated_at.tzinfo for document in documents] == [
        document.meta.updated_at.tzinfo for document in one_by_one if document is not None
    ]


@postgres_only
def test_read_all_reads_in_binary_behind_a_client_binding_cursor(team, monkeypatch):
    """With DATABASE_PREPARED_STATEMENTS=false Django's cursors bind on the client, which
    psycopg refuses binary results on: the binary read takes a server-binding one."""
    store = DatabaseStore()
    handle = handle_of(team)
    store_write(store, handle, "a.md", b"# a\n", expected=0)
    connection.ensure_connection()
    monkeypatch.setattr(connection.connection, "cursor_factory", ClientBindingCursor)
    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, psycopg.ClientCursor)

    assert [document.body for document in store.read_all(handle)] == [b"# a\n"]


@postgres_only
def test_a_reader_that_stops_early_holds_no_cursor_open(team, monkeypatch):
    """An export that refuses a credential stops reading part-way. A server-side cursor left
    behind would be closed when its generator is collected, inside whatever transaction the
    connection is in by then, and fail it ("cursor does not exist")."""
    monkeypatch.setattr("memory.spaces.database._BATCH_ROWS", 2)
    store = DatabaseStore()
    handle = handle_of(team)
    for name in ("a", "b", "c", "d", "e"):
        store_write(store, handle, f"{name}.md", name.encode(), expected=0)

    reader = store.read_all(handle)
    first = [next(reader) for _ in range(3)]  # into the second page
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_cursors")
        (open_cursors,) = cursor.fetchone()

    assert open_cursors == 0
    assert [document.meta.path for document in first] == ["a.md", "b.md", "c.md"]
    assert sorted(document.meta.path for document in reader) == ["d.md", "e.md"]


@postgres_only
def test_sealed_bodies_are_stored_out_of_line_without_a_compression_attempt():
    """Ciphertext never compresses: PostgreSQL is told not to try (storage EXTERNAL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
            [SpaceDocument._meta.db_table, "body_ciphertext"],
        )
        assert cursor.fetchone() == ("e",)


@postgres_only
def test_a_batch_read_as_it_is_written_copies_its_new_documents_before_the_end(team):
    """The server stores an import's new documents while the rest is read: before the
    reader answers its writes, a second connection sees the batch's COPY holding rows."""
    store = DatabaseStore()
    handle = handle_of(team)
    store_write(store, handle, "a.md", b"old", expected=0)  # the tenant's key exists
    # More than the client buffers before it sends (32 KiB).
    offered = [PendingWrite(f"n/{index:02d}.md", b"x" * 4096, 0) for index in range(40)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()

    def copied() -> int:
        with connection.cursor() as cursor:
            for _ in range(500):
                cursor.execute(
                    "SELECT tuples_processed FROM pg_stat_progress_copy WHERE pid = %s",
                    [backend],
                )
                row = cursor.fetchone()
                if row is not None and row[0] > 0:
                    return int(row[0])
                time.sleep(0.01)
        return 0

    seen = []

    class Reader:
        def read(self, offer):
            for write in offered:
                offer(write)

        def writes(self):
            seen.extend(run_concurrently(copied))
            return offered

    batch = WriteBatch(
        writes=(), updated_by="import:7", quotas=ROOMY, deadline=time.monotonic() + 5
    )
    store.write_many_as_read(handle, batch, Reader())

    assert seen[0] > 0
    assert [meta.path for meta in store.list(handle)] == ["a.md"] + [w.path for w in offered]
    stored = store.read(handle, "n/39.md")
    assert stored is not None
    assert stored.body == b"x" * 4096


@postgres_only
@pytest.mark.parametrize(
    "answered",
    [[], [PendingWrite("n.md", b"another body", 0)]],
    ids=["not in the batch", "another body"],
)
def test_a_document_offered_unlike_the_batch_it_is_in_writes_nothing(team, answered):
    """The COPY holds what was offered: a batch that does not write exactly that is refused
    whole rather than left with a row it does not hold."""
    store = DatabaseStore()
    handle = handle_of(team)
    store_write(store, handle, "a.md", b"old", expected=0)

    class Reader:
        def read(self, offer):
            offer(PendingWrite("n.md", b"offered", 0))

        def writes(self):
            return answered

    batch = WriteBatch(
        writes=(), updated_by="import:7", quotas=ROOMY, deadline=time.monotonic() + 5
    )
    with pytest.raises(ValueError, match=r"n\.md"):
        store.write_many_as_read(handle, batch, Reader())

    assert [meta.path for meta in store.list(handle)] == ["a.md"]
    assert store.usage(handle).used_bytes == 3
