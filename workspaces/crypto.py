"""Encryption of document revisions and wrapping of per-workspace data keys.

Two layers:

* every workspace has its own random 256-bit data key; each revision is sealed with
  AES-256-GCM under it, with associated data naming the workspace, the file and the
  version, so a ciphertext copied into any other row fails authentication;
* the data key is stored wrapped by the deployment key (CRYPTOGRAPHY_KEY), with
  django-cryptography's Fernet.

django-cryptography signs its ciphertext with SECRET_KEY unless told otherwise, which
would make every stored key unreadable the day SECRET_KEY is rotated. The field below
gives it an encryption key and a signing key both derived from the deployment key, and
falls back to CRYPTOGRAPHY_PREVIOUS_KEYS while a rotation is under way.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.signing import BadSignature
from django.db import models
from django.utils.crypto import salted_hmac
from django_cryptography.core.signing import FernetSigner
from django_cryptography.utils.crypto import FernetBytes, InvalidToken

from workspaces.errors import DocumentUnreadable

DATA_KEY_BYTES = 32
NONCE_BYTES = 12


class CiphertextRejected(Exception):
    """A ciphertext failed authentication: tampered, truncated, or moved from another row."""


def data_key_generate() -> bytes:
    return AESGCM.generate_key(bit_length=8 * DATA_KEY_BYTES)


def revision_associated_data(*, workspace_id: int, file_id: int, version: int) -> bytes:
    return f"workspace-memory/v1/{workspace_id}/{file_id}/{version}".encode()


@dataclass(frozen=True)
class RecordAddress:
    """A sealed record other than a file revision (a proposal's changes, a message): its
    kind, workspace and id, which its seal is bound to."""

    kind: str
    workspace_id: int
    record_id: object

    @property
    def associated_data(self) -> bytes:
        return f"workspace-memory/v1/{self.kind}/{self.workspace_id}/{self.record_id}".encode()


class Sealer:
    """AES-256-GCM under one data key, for sealing or opening many parts in a row (an
    archive's thousands of documents): the key is set up once, not once per part."""

    def __init__(self, data_key: bytes) -> None:
        self._aead = AESGCM(data_key)

    def seal(self, plaintext: bytes, associated_data: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, associated_data)

    def unseal(self, ciphertext: bytes, associated_data: bytes) -> bytes:
        nonce, body = ciphertext[:NONCE_BYTES], ciphertext[NONCE_BYTES:]
        try:
            return self._aead.decrypt(nonce, body, associated_data)
        except (InvalidTag, ValueError):
            raise CiphertextRejected() from None


def seal(*, data_key: bytes, plaintext: bytes, associated_data: bytes) -> bytes:
    return Sealer(data_key).seal(plaintext, associated_data)


def unseal(*, data_key: bytes, ciphertext: bytes, associated_data: bytes) -> bytes:
    return Sealer(data_key).unseal(ciphertext, associated_data)


def record_seal(*, data_key: bytes, plaintext: bytes, record: RecordAddress) -> bytes:
    """Seal the record at `record`, bound to its address."""
    return seal(data_key=data_key, plaintext=plaintext, associated_data=record.associated_data)


def record_open(*, data_key: bytes | None, ciphertext: bytes, record: RecordAddress) -> bytes:
    """Open what `record_seal` sealed, whole, or refuse it as `_open` does, naming the
    record (`{kind: id}`)."""
    return _open(data_key, ciphertext, record.associated_data, {record.kind: str(record.record_id)})


def revision_open(
    *, data_key: bytes | None, ciphertext: bytes, workspace_id: int, file_id: int, version: int
) -> bytes:
    """Open a file revision, whole, bound to the workspace, file and version it is read as,
    or refuse it as `_open` does, naming the version."""
    associated_data = revision_associated_data(
        workspace_id=workspace_id, file_id=file_id, version=version
    )
    return _open(data_key, ciphertext, associated_data, {"version": version})


def _open(
    data_key: bytes | None, ciphertext: bytes, associated_data: bytes, unreadable: dict[str, Any]
) -> bytes:
    """The one way every app opens what it sealed. Without a key, or when the ciphertext
    fails authentication (altered, truncated, or copied from another row), it is
    DocumentUnreadable with `unreadable` as its detail: no partial text is ever returned."""
    if data_key is None:
        raise DocumentUnreadable(**unreadable)
    try:
        return unseal(data_key=data_key, ciphertext=ciphertext, associated_data=associated_data)
    except CiphertextRejected:
        raise DocumentUnreadable(**unreadable) from None


def ciphertext_digest(ciphertext: bytes) -> str:
    return hashlib.sha256(ciphertext).hexdigest()


def text_digest(*, purpose: str, text: bytes) -> str:
    """A digest of sealed text kept to compare two requests (an idempotent resend). Keyed
    with SECRET_KEY: a plain SHA-256 of a short message or memory line would tell whoever
    reads the table whether a guessed text is the one sent."""
    return salted_hmac(
        f"workspaces.crypto.text_digest:{purpose}", text, algorithm="sha256"
    ).hexdigest()


def deployment_key_id(secret: str) -> str:
    """A short public fingerprint of a deployment key, recorded beside what it wrapped."""
    return hashlib.sha256(f"workspace-memory/key-id/{secret}".encode()).hexdigest()[:16]


@lru_cache(maxsize=8)
def _fernet_for(secret: str) -> FernetBytes:
    def derive(purpose: bytes) -> bytes:
        return HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"workspace-memory/" + purpose
        ).derive(secret.encode())

    return FernetBytes(key=derive(b"wrap"), signer=FernetSigner(key=derive(b"sign")))


def deployment_keys() -> list[str]:
    """The current deployment key first, then any previous ones still accepted for reading."""
    return [settings.DEPLOYMENT_KEY, *settings.DEPLOYMENT_PREVIOUS_KEYS]


class WrappedKeyField(models.BinaryField):
    """A data key stored encrypted and signed under the deployment key alone.

    Built on Django's field hooks, not django-cryptography's `encrypt()`: that takes one
    key fixed at import and signs with SECRET_KEY, and has no way to read under previous
    keys during a rotation. The stored form is the same Fernet token it wrote.
    """

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if value is not None:
            value = bytes(_fernet_for(settings.DEPLOYMENT_KEY).encrypt(bytes(value)))
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> bytes | None:
        return None if value is None else data_key_unwrap(bytes(value))


# How many unwrapped data keys a process keeps, and for how long after unwrapping one.
UNWRAPPED_KEYS_MAX = 1024
UNWRAPPED_KEY_SECONDS = 300.0


class _UnwrappedKeys:
    """The process's recently unwrapped data keys, by the SHA-256 of their wrapped form and
    the deployment keys configured.

    Keyed by what is stored, never by whose key it is: a key re-wrapped by a rotation or
    created anew after a purge is stored as other bytes, so it can never be answered with
    the key it replaced; and a deployment key no longer configured unwraps nothing more.
    Bounded in count (least recently used goes first) and in age (an entry is unwrapped
    again after UNWRAPPED_KEY_SECONDS), so a key whose row is gone leaves the process's
    memory soon after; the purge and the rotation clear it at once.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[bytes, tuple[str, ...]], tuple[float, bytes]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, entry_key: tuple[bytes, tuple[str, ...]]) -> bytes | None:
        with self._lock:
            entry = self._entries.get(entry_key)
            if entry is None or time.monotonic() - entry[0] > UNWRAPPED_KEY_SECONDS:
                self._entries.pop(entry_key, None)
                return None
            self._entries.move_to_end(entry_key)
            return entry[1]

    def put(self, entry_key: tuple[bytes, tuple[str, ...]], data_key: bytes) -> None:
        with self._lock:
            self._entries[entry_key] = (time.monotonic(), data_key)
            self._entries.move_to_end(entry_key)
            while len(self._entries) > UNWRAPPED_KEYS_MAX:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_unwrapped_keys = _UnwrappedKeys()


def data_key_unwrap(wrapped: bytes) -> bytes:
    """The data key that `wrapped` (a stored `WrappedKeyField` value) holds, unwrapped under
    the current or a previous deployment key, or CiphertextRejected."""
    secrets = deployment_keys()
    entry_key = (hashlib.sha256(wrapped).digest(), tuple(secrets))
    if (cached := _unwrapped_keys.get(entry_key)) is not None:
        return cached
    for secret in secrets:
        try:
            data_key = bytes(_fernet_for(secret).decrypt(wrapped))
        except (BadSignature, InvalidToken):
            continue
        _unwrapped_keys.put(entry_key, data_key)
        return data_key
    raise CiphertextRejected("no configured deployment key unwraps this data key")


def unwrapped_keys_forget() -> None:
    """Drop every data key this process holds unwrapped (after a purge or a rotation)."""
    _unwrapped_keys.clear()
