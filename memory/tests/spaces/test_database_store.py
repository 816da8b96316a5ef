"""What only the database store has: sealed bodies and the database's failures."""

from __future__ import annotations

import hashlib
import time

import pytest
from django.db import connection

from conftest import backend_terminate, postgres_only
from memory.errors import StoreUnavailable
from memory.models import SpaceDocument, SpaceKey
from memory.spaces.database import DatabaseStore
from memory.spaces.handle import Visibility
from memory.tests.spaces.conftest import ROOMY, handle_of
from workspaces.errors import DocumentUnreadable
from workspaces.tests.leaks import tables_holding

pytestmark = pytest.mark.django_db

MARKER = "OKAPI-51c2-space-marker"


def write(store: DatabaseStore, handle, path: str, body: bytes, expected: int | None = None):
    return store.write(
        handle,
        path,
        body,
        expected_revision=expected,
        updated_by="user:1",
        quotas=ROOMY,
        deadline=time.monotonic() + 5,
    )


def test_a_body_and_its_checksum_are_stored_only_sealed(team):
    store = DatabaseStore()
    handle = handle_of(team)
    body = f"# Notes\n\n{MARKER}\n".encode()

    write(store, handle, "a.md", body, expected=0)

    assert tables_holding(MARKER) == []
    assert tables_holding(hashlib.sha256(body).hexdigest()) == []
    stored = store.read(handle, "a.md")
    assert stored is not None
    assert stored.body == body


def test_the_global_space_and_each_tenant_have_their_own_key(make_team):
    store = DatabaseStore()
    team, other = make_team(), make_team()

    for handle in (handle_of(team), handle_of(other), handle_of(None, Visibility.GLOBAL)):
        write(store, handle, "a.md", b"x", expected=0)

    keys = [bytes(row.wrapped_key) for row in SpaceKey.objects.all()]
    assert len(keys) == len(set(keys)) == 3
    assert SpaceKey.objects.filter(tenant__isnull=True).count() == 1


def test_a_flipped_bit_makes_the_document_unreadable_never_partial(team):
    store = DatabaseStore()
    handle = handle_of(team)
    write(store, handle, "a.md", MARKER.encode(), expected=0)
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
    write(store, handle, "a.md", MARKER.encode(), expected=0)
    stolen = SpaceDocument.objects.values("body_ciphertext", "checksum_ciphertext").get()
    reader, path = {
        "another path": (handle, "b.md"),
        "another space": (other_space, "a.md"),
        "another revision": (handle, "a.md"),
    }[target]
    write(store, reader, path, b"victim", expected=None)

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
    write(store, handle, "a.md", b"one", expected=0)
    backend_terminate(connection.connection.info.backend_pid)

    with pytest.raises(StoreUnavailable):
        write(store, handle, "a.md", b"two", expected=1)

    connection.close()
    stored = store.read(handle, "a.md")
    assert stored is not None
    assert (stored.body, stored.meta.revision) == (b"one", 1)
    assert store.usage(handle).used_bytes == 3
