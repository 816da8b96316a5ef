"""Delivery credentials: the per-turn bearer secret of an agent runtime."""

from __future__ import annotations

import hashlib
import secrets

DELIVERY_PREFIX = "dlv_"


def delivery_credential_generate() -> tuple[str, str]:
    """A new delivery credential and the digest stored in its place."""
    raw = DELIVERY_PREFIX + secrets.token_urlsafe(32)
    return raw, delivery_credential_digest(raw)


def delivery_credential_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def delivery_credential_cache_key(admission_id: object) -> str:
    return f"delivery-credential:{admission_id}"
