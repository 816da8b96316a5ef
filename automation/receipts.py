"""Purge receipts: the signed record that the nightly purge deleted an organisation.

A receipt file is `canonical_json({"receipt": R, "signature": S}) + b"\\n"`, where `S` is
the base64 Ed25519 signature of `canonical_json(R)` under the deployment's
PURGE_RECEIPT_SIGNING_KEY, and `R` embeds the public key that verifies it. A verifier
accepts only a file that is byte for byte that form (so one altered byte anywhere fails,
whitespace and escapes included) and, when given one, only the public key it pinned.
docs/architecture.md defines every byte format used here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings

RECEIPT_TYPE = "workspace-memory/org-purge-receipt"
RECEIPT_FORMAT = 1
SIGNATURE_ALGORITHM = "Ed25519"


class ReceiptInvalid(Exception):
    """The file is not a receipt this deployment (or the pinned key) signed, unaltered."""


@dataclass(frozen=True)
class ReceiptKey:
    """A receipt-signing public key as verifiers see it: base64 of its 32 raw bytes, and
    its id, the first 16 hex characters of their SHA-256."""

    raw: bytes

    @property
    def text(self) -> str:
        return base64.b64encode(self.raw).decode()

    @property
    def key_id(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()[:16]

    @classmethod
    def from_text(cls, text: str) -> ReceiptKey:
        raw = _base64_exact(text.strip(), what="public key")
        if len(raw) != 32:
            raise ReceiptInvalid("an Ed25519 public key is 32 bytes")
        return cls(raw=raw)


def canonical_json(value: Any) -> bytes:
    """The one byte form of a JSON value: keys sorted, no insignificant whitespace, ASCII
    only (anything else escaped as \\uXXXX). Receipts hold no floats, so for them this is
    also RFC 8785's form."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def deleted_ids_digest(deleted: Iterable[tuple[str, object]]) -> str:
    """SHA-256 (hex) over the rows deleted, given as (model label, primary key) pairs.

    Each row is the ASCII line `<label>:<pk>\\n` (an integer pk in decimal, a UUID in its
    lowercase hyphenated form), and the lines are hashed sorted by their bytes, so anyone
    holding the list of ids can recompute the digest whatever order they have it in.
    """
    digest = hashlib.sha256()
    for line in sorted(f"{label}:{pk}\n".encode("ascii") for label, pk in deleted):
        digest.update(line)
    return digest.hexdigest()


def name_digest(name: str) -> str:
    """SHA-256 (hex) of the org's name in UTF-8: the receipt names the org without keeping
    the name after the org is gone, and whoever knows the name can check it."""
    return hashlib.sha256(name.encode()).hexdigest()


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def signing_key() -> Ed25519PrivateKey:
    # Validated at start-up (memory_project/env.py): base64 of the 32-byte seed.
    return Ed25519PrivateKey.from_private_bytes(
        base64.b64decode(settings.PURGE_RECEIPT_SIGNING_KEY)
    )


def deployment_public_key() -> ReceiptKey:
    return ReceiptKey(raw=signing_key().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def receipt_sign(receipt: Mapping[str, Any]) -> bytes:
    """Embed the deployment's public key in `receipt`, sign it and return the file's bytes."""
    key = deployment_public_key()
    signed = {
        **receipt,
        "signingKey": {
            "algorithm": SIGNATURE_ALGORITHM,
            "keyId": key.key_id,
            "publicKey": key.text,
        },
    }
    signature = signing_key().sign(canonical_json(signed))
    return _file_bytes({"receipt": signed, "signature": base64.b64encode(signature).decode()})


def receipt_verify(document: bytes, *, pinned: ReceiptKey | None = None) -> dict[str, Any]:
    """Return the receipt `document` carries if its signature holds, else raise
    ReceiptInvalid saying why. With `pinned`, the receipt must also be signed by that key:
    a receipt carries its own public key, so without a pin it proves only integrity."""
    try:
        parsed = json.loads(document.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ReceiptInvalid("the file is not JSON") from None
    if not isinstance(parsed, dict) or set(parsed) != {"receipt", "signature"}:
        raise ReceiptInvalid("the file is not a purge receipt")
    if _file_bytes(parsed) != document:
        raise ReceiptInvalid("the file is not in its canonical form: it was altered")
    receipt, signature_text = parsed["receipt"], parsed["signature"]
    if not isinstance(receipt, dict) or not isinstance(signature_text, str):
        raise ReceiptInvalid("the file is not a purge receipt")
    key = _embedded_key(receipt)
    if pinned is not None and pinned.raw != key.raw:
        raise ReceiptInvalid(f"signed by key {key.key_id}, not by the pinned key {pinned.key_id}")
    signature = _base64_exact(signature_text, what="signature")
    try:
        Ed25519PublicKey.from_public_bytes(key.raw).verify(signature, canonical_json(receipt))
    except InvalidSignature:
        raise ReceiptInvalid("the signature does not match the receipt") from None
    if receipt.get("type") != RECEIPT_TYPE or receipt.get("format") != RECEIPT_FORMAT:
        raise ReceiptInvalid("the signed document is not a purge receipt of this format")
    return receipt


def _file_bytes(document: Mapping[str, Any]) -> bytes:
    return canonical_json(document) + b"\n"


def _embedded_key(receipt: Mapping[str, Any]) -> ReceiptKey:
    described = receipt.get("signingKey")
    if not isinstance(described, dict) or described.get("algorithm") != SIGNATURE_ALGORITHM:
        raise ReceiptInvalid("the receipt names no Ed25519 signing key")
    key = ReceiptKey.from_text(str(described.get("publicKey", "")))
    if described.get("keyId") != key.key_id:
        raise ReceiptInvalid("the receipt's key id does not match its public key")
    return key


def _base64_exact(text: str, *, what: str) -> bytes:
    # Strict, and compared once re-encoded: base64 lets the unused bits of its last
    # character vary, which would let a byte of the file change without failing.
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ReceiptInvalid(f"the {what} is not base64") from None
    if base64.b64encode(raw).decode() != text:
        raise ReceiptInvalid(f"the {what} is not in canonical base64")
    return raw
