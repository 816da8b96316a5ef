"""Bearer token formats: personal access tokens (iap_...) and short-lived JWTs."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import jwt
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

PAT_PREFIX = "iap_"
DELIVERY_PREFIX = "dlv_"  # a turn's delivery credential (automation.tokens)
JWT_ALGORITHM = "HS256"


def bearer_secret_generate(prefix: str) -> tuple[str, str]:
    """Return a new bearer secret (`prefix` and 256 random bits) and the digest stored in
    its place: a personal access token, a delivery credential."""
    raw = prefix + secrets.token_urlsafe(32)
    return raw, bearer_secret_digest(raw)


def bearer_secret_digest(raw: str) -> str:
    # A secret of 256 random bits needs only a fast hash: there is nothing to brute-force
    # that a slow password hash would protect.
    return hashlib.sha256(raw.encode()).hexdigest()


def pat_generate() -> tuple[str, str]:
    """Return a new personal access token and the digest stored in its place."""
    return bearer_secret_generate(PAT_PREFIX)


@dataclass(frozen=True)
class JwtClaims:
    user_id: int
    team_id: int
    # What it was minted from: a personal access token, or a browser session (its key).
    token_id: int | None = None
    session_key: str | None = None


def jwt_encode(
    *,
    user_id: int,
    team_id: int,
    now: datetime,
    token_id: int | None = None,
    session_key: str | None = None,
) -> tuple[str, datetime]:
    """Sign a JWT. `token_id` names the personal access token it is minted from, and
    `session_key` the browser session, so that revoking that token or ending that session
    ends the JWT too. The session key is sealed (`ses`): a JWT's payload is readable by
    whoever holds it, and the key is the session's cookie, which a page's script never sees."""
    expires_at = now + timedelta(seconds=settings.JWT_TTL_SECONDS)
    payload: dict[str, object] = {
        "sub": str(user_id),
        "team": team_id,
        "iat": int(now.timestamp()),
        "exp": int(expires_at.timestamp()),
    }
    if token_id is not None:
        payload["pat"] = token_id
    if session_key is not None:
        payload["ses"] = _session_key_seal(session_key, user_id=user_id)
    return jwt.encode(payload, settings.JWT_SIGNING_KEY, algorithm=JWT_ALGORITHM), expires_at


def jwt_decode(raw: str) -> JwtClaims:
    """Verify a JWT. Raises jwt.ExpiredSignatureError or another jwt.InvalidTokenError.

    Only HS256 is accepted, so a token with alg=none or any other algorithm fails.
    """
    payload = jwt.decode(
        raw,
        settings.JWT_SIGNING_KEY,
        algorithms=[JWT_ALGORITHM],
        options={"require": ["exp", "iat", "sub", "team"]},
    )
    try:
        token_id, sealed_session = payload.get("pat"), payload.get("ses")
        user_id = int(payload["sub"])
        return JwtClaims(
            user_id=user_id,
            team_id=int(payload["team"]),
            token_id=None if token_id is None else int(token_id),
            session_key=(
                None if sealed_session is None else _session_key_open(sealed_session, user_id)
            ),
        )
    except (TypeError, ValueError, InvalidTag):
        raise jwt.InvalidTokenError("malformed claims") from None


def _session_claim_aead() -> AESGCM:
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"workspace-memory/jwt-session"
    ).derive(settings.JWT_SIGNING_KEY.encode())
    return AESGCM(key)


def _session_key_seal(session_key: str, *, user_id: int) -> str:
    nonce = os.urandom(12)
    sealed = nonce + _session_claim_aead().encrypt(
        nonce, session_key.encode(), str(user_id).encode()
    )
    return base64.urlsafe_b64encode(sealed).decode()


def _session_key_open(sealed: object, user_id: int) -> str:
    """The session key a `ses` claim seals, for the JWT's own subject only. TypeError,
    ValueError or InvalidTag for anything else."""
    if not isinstance(sealed, str):
        raise TypeError("ses is not text")
    raw = base64.urlsafe_b64decode(sealed.encode())
    return _session_claim_aead().decrypt(raw[:12], raw[12:], str(user_id).encode()).decode()
