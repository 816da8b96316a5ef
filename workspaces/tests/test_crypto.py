"""Revision sealing and data-key wrapping, including the pinned django-cryptography package."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from django.db import connection, models
from django_cryptography.fields import encrypt
from hypothesis import given
from hypothesis import strategies as st

from workspaces import crypto
from workspaces.crypto import (
    CiphertextRejected,
    data_key_generate,
    deployment_key_id,
    revision_associated_data,
    seal,
    unseal,
)
from workspaces.models import FileVersion, WorkspaceKey
from workspaces.selectors import workspace_data_key
from workspaces.services import data_keys_rewrap, file_write, workspace_key_ensure

AD = revision_associated_data(workspace_id=1, file_id=2, version=3)


def test_pinned_django_cryptography_imports_and_builds_a_field_on_this_django():
    field = encrypt(models.BinaryField())

    assert field.get_internal_type() == "BinaryField"


def test_wrapped_key_round_trips_through_the_database(tenant):
    key = workspace_key_ensure(workspace=tenant.workspace)

    stored = WorkspaceKey.objects.get(workspace=tenant.workspace)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT wrapped_key FROM workspaces_workspacekey WHERE workspace_id = %s",
            [tenant.workspace.pk],
        )
        raw = bytes(cursor.fetchone()[0])

    assert len(key) == 32
    assert bytes(stored.wrapped_key) == key
    assert key not in raw
    assert workspace_key_ensure(workspace=tenant.workspace) == key


def test_rotating_secret_key_does_not_break_unwrapping(tenant, settings):
    key = workspace_key_ensure(workspace=tenant.workspace)

    settings.SECRET_KEY = "an entirely different session secret " * 2

    assert bytes(WorkspaceKey.objects.get(workspace=tenant.workspace).wrapped_key) == key


def test_another_deployment_key_cannot_unwrap(tenant, settings):
    workspace_key_ensure(workspace=tenant.workspace)

    settings.DEPLOYMENT_KEY = "a deployment key that never wrapped anything " * 2

    with pytest.raises(CiphertextRejected):
        WorkspaceKey.objects.get(workspace=tenant.workspace)


@given(st.binary(max_size=4096))
def test_seal_then_unseal_returns_the_plaintext(plaintext):
    key = data_key_generate()

    assert (
        unseal(
            data_key=key,
            ciphertext=seal(data_key=key, plaintext=plaintext, associated_data=AD),
            associated_data=AD,
        )
        == plaintext
    )


@given(st.binary(min_size=1, max_size=256), st.data())
def test_any_flipped_bit_is_rejected(plaintext, data):
    key = data_key_generate()
    sealed = bytearray(seal(data_key=key, plaintext=plaintext, associated_data=AD))
    bit = data.draw(st.integers(min_value=0, max_value=len(sealed) * 8 - 1))
    sealed[bit // 8] ^= 1 << (bit % 8)

    with pytest.raises(CiphertextRejected):
        unseal(data_key=key, ciphertext=bytes(sealed), associated_data=AD)


@pytest.mark.parametrize(
    "elsewhere",
    [
        {"workspace_id": 9, "file_id": 2, "version": 3},
        {"workspace_id": 1, "file_id": 9, "version": 3},
        {"workspace_id": 1, "file_id": 2, "version": 4},
    ],
)
def test_ciphertext_read_as_another_row_is_rejected(elsewhere):
    key = data_key_generate()
    sealed = seal(data_key=key, plaintext=b"memory", associated_data=AD)

    with pytest.raises(CiphertextRejected):
        unseal(
            data_key=key, ciphertext=sealed, associated_data=revision_associated_data(**elsewhere)
        )


def test_two_seals_of_the_same_text_differ():
    key = data_key_generate()

    assert seal(data_key=key, plaintext=b"x", associated_data=AD) != seal(
        data_key=key, plaintext=b"x", associated_data=AD
    )


def test_truncated_ciphertext_is_rejected():
    with pytest.raises(CiphertextRejected):
        unseal(data_key=data_key_generate(), ciphertext=os.urandom(5), associated_data=AD)


def test_rewrap_moves_every_key_to_the_new_deployment_key_without_touching_revisions(
    make_tenant, settings
):
    tenants = [make_tenant() for _ in range(5)]
    for tenant in tenants:
        file_write(
            workspace=tenant.workspace,
            path="notes/a.md",
            plaintext="x",
            base_version=0,
            data_key=workspace_key_ensure(workspace=tenant.workspace),
            author=tenant.member,
            author_kind="human",
            change_kind="save",
        )
    digests_before = dict(FileVersion.objects.values_list("pk", "ciphertext_sha256"))
    keys_before = {t.workspace.pk: workspace_key_ensure(workspace=t.workspace) for t in tenants}
    old = settings.DEPLOYMENT_KEY
    settings.DEPLOYMENT_KEY = "the new deployment key for this rotation " * 2
    settings.DEPLOYMENT_PREVIOUS_KEYS = [old]

    rewrapped = data_keys_rewrap(batch_size=2)

    assert rewrapped == 5
    settings.DEPLOYMENT_PREVIOUS_KEYS = []
    current = deployment_key_id(settings.DEPLOYMENT_KEY)
    assert set(WorkspaceKey.objects.values_list("wrapping_key_id", flat=True)) == {current}
    assert {t.workspace.pk: workspace_key_ensure(workspace=t.workspace) for t in tenants} == (
        keys_before
    )
    assert dict(FileVersion.objects.values_list("pk", "ciphertext_sha256")) == digests_before
    assert data_keys_rewrap(batch_size=2) == 0


def test_rewrap_interrupted_after_one_batch_resumes_where_it_stopped(
    make_tenant, settings, monkeypatch
):
    tenants = [make_tenant() for _ in range(5)]
    keys = {t.workspace.pk: workspace_key_ensure(workspace=t.workspace) for t in tenants}
    old = settings.DEPLOYMENT_KEY
    settings.DEPLOYMENT_KEY = "the new deployment key for this rotation " * 2
    settings.DEPLOYMENT_PREVIOUS_KEYS = [old]
    saves = 0
    real_save = WorkspaceKey.save

    def crash_on_third_save(self, *args, **kwargs):
        nonlocal saves
        saves += 1
        if saves == 3:
            raise KeyboardInterrupt("operator pressed ^C")
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(WorkspaceKey, "save", crash_on_third_save)
    with pytest.raises(KeyboardInterrupt):
        data_keys_rewrap(batch_size=2)
    monkeypatch.setattr(WorkspaceKey, "save", real_save)
    current = deployment_key_id(settings.DEPLOYMENT_KEY)
    assert WorkspaceKey.objects.filter(wrapping_key_id=current).count() == 2

    assert data_keys_rewrap(batch_size=2) == 3

    settings.DEPLOYMENT_PREVIOUS_KEYS = []
    assert {t.workspace.pk: workspace_key_ensure(workspace=t.workspace) for t in tenants} == keys


def test_a_recreated_workspace_key_is_never_answered_with_the_one_it_replaced(tenant):
    old = workspace_key_ensure(workspace=tenant.workspace)
    WorkspaceKey.objects.filter(workspace=tenant.workspace).delete()

    new = workspace_key_ensure(workspace=tenant.workspace)

    assert new != old
    assert workspace_data_key(workspace=tenant.workspace) == new


@pytest.fixture
def unwraps(monkeypatch, settings) -> Iterator[list[str]]:
    """Each Fernet unwrap the process does (not those answered by its cache), by key."""
    seen: list[str] = []
    real = crypto._fernet_for

    def counted(secret: str):
        seen.append(secret)
        return real(secret)

    crypto.unwrapped_keys_forget()
    monkeypatch.setattr(crypto, "_fernet_for", counted)
    yield seen
    crypto.unwrapped_keys_forget()


def wrapped(data_key: bytes, secret: str) -> bytes:
    return bytes(crypto._fernet_for(secret).encrypt(data_key))


def test_unwrapped_keys_are_kept_bounded_in_count(unwraps, settings, monkeypatch):
    monkeypatch.setattr(crypto, "UNWRAPPED_KEYS_MAX", 2)
    keys = [data_key_generate() for _ in range(3)]
    stored = [wrapped(key, settings.DEPLOYMENT_KEY) for key in keys]
    unwraps.clear()

    answers = [crypto.data_key_unwrap(item) for item in [*stored, stored[2], stored[0]]]

    assert answers == [*keys, keys[2], keys[0]]
    # The third key pushed out the first (least recently used), which is unwrapped again.
    assert len(unwraps) == 4


def test_unwrapped_keys_are_unwrapped_again_once_too_old(unwraps, settings, monkeypatch):
    stored = wrapped(data_key_generate(), settings.DEPLOYMENT_KEY)
    unwraps.clear()
    crypto.data_key_unwrap(stored)
    crypto.data_key_unwrap(stored)
    assert len(unwraps) == 1  # the second read was answered by the cache

    monkeypatch.setattr(crypto, "UNWRAPPED_KEY_SECONDS", -1.0)
    crypto.data_key_unwrap(stored)

    assert len(unwraps) == 2


def test_forgetting_drops_every_unwrapped_key(unwraps, settings):
    stored = wrapped(data_key_generate(), settings.DEPLOYMENT_KEY)
    crypto.data_key_unwrap(stored)
    unwraps.clear()

    crypto.unwrapped_keys_forget()
    crypto.data_key_unwrap(stored)

    assert unwraps == [settings.DEPLOYMENT_KEY]
