"""Bearer token formats: personal access tokens (iap_...) and short-lived JWTs."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import jwt
from django.conf import settings

PAT_PREFIX = "iap_"
JWT_ALGORITHM = "HS256"


def pat_generate() -> tuple[str, str]:
    """Return a new personal access token and the digest stored in its place."""
    raw = PAT_PREFIX + secrets.token_urlsafe(32)
    return raw, pat_digest(raw)


def pat_digest(raw: str) -> str:
    # A PAT carries 256 random bits, so a fast hash is enough: there is nothing to
    # brute-force that a slow password hash would protect.
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class JwtClaims:
    user_id: int
    team_id: int


def jwt_encode(*, user_id: int, team_id: int, now: datetime) -> tuple[str, datetime]:
    expires_at = now + timedelta(seconds=settings.JWT_TTL_SECONDS)
    payload = {
        "sub": str(user_id),
        "team": team_id,
        "iat": int(now.timestamp()),
        "exp": int(expires_at.timestamp()),
    }
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
        return JwtClaims(
            user_id=int(payload["sub"]),
            team_id=int(payload["team"]),
        )
    except (TypeError, ValueError):
        raise jwt.InvalidTokenError("malformed claims") from None
