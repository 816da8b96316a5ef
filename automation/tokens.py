"""Delivery credentials: the per-turn bearer secret of an agent runtime."""

from __future__ import annotations

from workspaces.tokens import DELIVERY_PREFIX, bearer_secret_generate


def delivery_credential_generate() -> tuple[str, str]:
    """A new delivery credential and the digest stored in its place."""
    return bearer_secret_generate(DELIVERY_PREFIX)


def delivery_credential_cache_key(admission_id: object) -> str:
    return f"delivery-credential:{admission_id}"
