"""Bearer token formats: personal access tokens (iap_...) and short-lived JWTs."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import jwt
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
    # The personal access token it was minted from; None when minted from a browser session.
    token_id: int | None = None


def jwt_encode(
    *, user_id: int, team_id: int, now: datetime, token_id: int | None = None
) -> tuple[str, datetime]:
    """Sign a JWT. `token_id` names the personal access token it is minted from, so that
    revoking that token ends the JWT too."""
    expires_at = now + timedelta(seconds=settings.JWT_TTL_SECONDS)
    payload: dict[str, object] = {
        "sub": str(user_id),
        "team": team_id,
        "iat": int(now.timestamp()),
        "exp": int(expires_at.timestamp()),
    }
    if token_id is not None:
        payload["pat"] = token_id
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
        token_id = payload.get("pat")
        return JwtClaims(
            user_id=int(payload["sub"]),
            team_id=int(payload["team"]),
            token_id=None if token_id is None else int(token_id),
        )
    except (TypeError, ValueError):
        raise jwt.InvalidTokenError("malformed claims") from None
