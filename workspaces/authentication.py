"""DRF authentication: bearer tokens for API clients, the browser session for the web frame.

Every successful authentication yields a Credential whose team is the caller's only
source of tenancy: no route reads a tenant from the path, the query or the body.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar, Literal

import jwt
from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request

from workspaces.errors import (
    CredentialExpired,
    CredentialKindRefused,
    DomainError,
    NoActiveTeam,
    OrgPendingDeletion,
    TokenScopeRefused,
)
from workspaces.models import ApiToken, Bot, Team, TeamMembership, User
from workspaces.ratelimit import (
    Window,
    client_address,
    window_retry_after,
    windows_hit,
)
from workspaces.selectors import org_require_active
from workspaces.services import api_token_use_record, browser_session_is_live
from workspaces.sql import api_token_by_digest
from workspaces.tokens import PAT_PREFIX, JwtClaims, bearer_secret_digest, jwt_decode

ACTIVE_TEAM_SESSION_KEY = "active_team_id"

CredentialKind = Literal["pat", "jwt", "session", "bot"]


@dataclass(frozen=True)
class Credential:
    """Who is calling, for which team. A `bot` credential acts as its `bot`; its `user` is
    the team owner who issued the token, never the author of what the bot does."""

    kind: CredentialKind
    user: User
    team: Team
    token_id: int | None = None
    bot: Bot | None = None
    # A browser session's key (kind `session`, or `jwt` for a JWT minted from one), which
    # a JWT minted from it, and a key session opened with either, end with.
    session_key: str | None = None


def _refuse(code: str, message: str) -> AuthenticationFailed:
    return AuthenticationFailed(message, code=code)


class TokenRevoked(AuthenticationFailed):
    """A personal access token, or the one a JWT was minted from, that was revoked; or the
    browser session a JWT was minted from, that ended."""

    default_detail = "Token revoked."
    default_code = "TOKEN_REVOKED"


class BearerAuthentication(BaseAuthentication):
    """`Authorization: Bearer iap_...` (personal access token) or `Bearer <JWT>`.

    It serves the person API: a token of another scope is refused here (403
    TOKEN_SCOPE_REFUSED) once it is known to be valid, and a bot's token is not a person's
    (403 CREDENTIAL_KIND_REFUSED). The MCP server uses `McpBearerAuthentication`, which
    takes only MCP-scoped tokens; a route for bots uses `BotBearerAuthentication`.

    Failed tokens are limited per client address (`BEARER_FAILURE_LIMIT` in
    `BEARER_FAILURE_WINDOW_SECONDS`); past the limit every bearer request from that address
    is 429 until the window ends. Not per account: a wrong token names no account, and a
    user's old revoked token, replayed by anyone, must not lock the user out.
    """

    scope: ClassVar[str] = ApiToken.Scope.API
    # Only a route that lists `BotBearerAuthentication` takes a bot; every other refuses one.
    takes_bots: ClassVar[bool] = False
    # What it refuses a credential with, for the schema of every route it serves
    # (CredentialExpired stands for an expired token: same code and status).
    refusals: ClassVar[tuple[type[Exception], ...]] = (
        AuthenticationFailed,
        TokenRevoked,
        CredentialExpired,
        CredentialKindRefused,
        TokenScopeRefused,
        OrgPendingDeletion,
    )

    def authenticate(self, request: Request) -> tuple[User, Credential] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        # The address's failures are judged before any verdict is given, so that past the
        # limit even a valid token gets none from this address: guessing learns nothing.
        # They are read after the token's lookup, in the same cache call as what follows
        # from the verdict: a failure counted, or (by the view's throttle) the request.
        try:
            verified = self._verify(raw.strip())
        except AuthenticationFailed:
            _failures_judge(bearer_failure_gate(request), failed=True)
            raise
        except DomainError:
            # A valid token refused here (its scope, its kind, its org) is a verdict too.
            _failures_judge(bearer_failure_gate(request), failed=False)
            raise
        if not _view_throttle_judges_bearer_failures(request):
            _failures_judge(bearer_failure_gate(request), failed=False)
        return verified

    def _verify(self, raw: str) -> tuple[User, Credential]:
        if not raw or " " in raw:
            raise _refuse("TOKEN_INVALID", "Malformed bearer credential.")
        if raw.startswith(PAT_PREFIX):
            return self._personal_access_token(raw)
        return self._jwt(raw)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'

    def _personal_access_token(self, raw: str) -> tuple[User, Credential]:
        # Looked up on every request (one statement), so a revocation takes effect on the
        # very next request with no cache window.
        found = api_token_by_digest(bearer_secret_digest(raw))
        if found is None:
            raise _refuse("TOKEN_INVALID", "Token invalid.")
        token, owner_in_team = found
        if token.revoked_at is not None:
            raise TokenRevoked()
        now = timezone.now()
        if token.expires_at <= now:
            raise _refuse("TOKEN_EXPIRED", "Token expired.")
        if not token.user.is_active or not owner_in_team:
            raise _refuse("TOKEN_INVALID", "Token owner unavailable.")
        if token.bot is not None and not self.takes_bots:
            raise CredentialKindRefused("A bot's token cannot act as a person.")
        self._scope_require(token.scope)
        org_require_active(org=token.team.org)
        api_token_use_record(token=token, now=now)
        return token.user, Credential(
            kind="pat" if token.bot is None else "bot",
            user=token.user,
            team=token.team,
            token_id=token.pk,
            bot=token.bot,
        )

    def _jwt(self, raw: str) -> tuple[User, Credential]:
        try:
            claims = jwt_decode(raw)
        except jwt.ExpiredSignatureError:
            raise _refuse("TOKEN_EXPIRED", "Token expired.") from None
        except jwt.InvalidTokenError:
            raise _refuse("TOKEN_INVALID", "Token invalid.") from None
        if claims.token_id is not None:
            _parent_token_require_live(claims, token_id=claims.token_id)
        membership = (
            TeamMembership.objects.select_related("user", "team__org")
            .filter(user_id=claims.user_id, team_id=claims.team_id, user__is_active=True)
            .first()
        )
        if membership is None:
            raise _refuse("TOKEN_INVALID", "Token owner unavailable.")
        if claims.session_key is not None:
            _browser_session_require_live(session_key=claims.session_key, user=membership.user)
        # Only the person API mints JWTs, and only for its own scope.
        self._scope_require(ApiToken.Scope.API)
        org_require_active(org=membership.team.org)
        return membership.user, Credential(
            kind="jwt",
            user=membership.user,
            team=membership.team,
            session_key=claims.session_key,
        )

    def _scope_require(self, scope: str) -> None:
        if scope != self.scope:
            raise TokenScopeRefused(scope=scope, requiredScope=self.scope)


class McpBearerAuthentication(BearerAuthentication):
    """The MCP server's authenticator: MCP-scoped personal access tokens, and bot tokens
    (a bot's credential, for its memory tools; the server gives it no tool of a person's)."""

    scope = ApiToken.Scope.MCP
    takes_bots = True

    def _scope_require(self, scope: str) -> None:
        # A bot token's scope is `bot` exactly when it names a bot (a CHECK holds it).
        if scope != ApiToken.Scope.BOT:
            super()._scope_require(scope)


class BotBearerAuthentication(BearerAuthentication):
    """A route for bots: bot tokens only (a person's token or a JWT is TOKEN_SCOPE_REFUSED).
    The credential is kind `bot` and carries the bot, for attribution as `bot:<id>`."""

    scope = ApiToken.Scope.BOT
    takes_bots = True


def bearer_failure_gate(request: Request) -> Window:
    """The window of failed bearer tokens from the request's client address: full, it
    refuses every bearer request from there (`BEARER_FAILURE_LIMIT` per
    `BEARER_FAILURE_WINDOW_SECONDS`)."""
    return Window(
        key=f"bearer-failures:{client_address(request)}",
        limit=settings.BEARER_FAILURE_LIMIT,
        seconds=settings.BEARER_FAILURE_WINDOW_SECONDS,
    )


def _failures_judge(gate: Window, *, failed: bool) -> None:
    """Throttled if the failure `gate` is full; otherwise, if `failed`, count one failure in
    it. One cache call."""
    now = time.time()
    if windows_hit(windows=[gate] if failed else [], unless_full=gate, now=now) is None:
        raise Throttled(wait=window_retry_after(gate, now))


def _view_throttle_judges_bearer_failures(request: Request) -> bool:
    """Whether the view being served has a throttle that judges the failure gate itself,
    in its own cache call (DRF runs it after authentication and before the view). Not
    when there is no view: the MCP server authenticates on its own."""
    view = (request.parser_context or {}).get("view")
    return view is not None and any(
        getattr(throttle, "judges_bearer_failures", False) for throttle in view.throttle_classes
    )


def _parent_token_require_live(claims: JwtClaims, *, token_id: int) -> None:
    """A JWT minted from a personal access token ends when that token is revoked or
    expires: looked up on every request, like the token itself."""
    parent = (
        ApiToken.objects.filter(pk=token_id, user_id=claims.user_id, team_id=claims.team_id)
        .values("revoked_at", "expires_at")
        .first()
    )
    if parent is None:
        raise _refuse("TOKEN_INVALID", "Token invalid.")
    if parent["revoked_at"] is not None:
        raise TokenRevoked("The token this JWT was minted from was revoked.")
    if parent["expires_at"] <= timezone.now():
        raise _refuse("TOKEN_EXPIRED", "The token this JWT was minted from expired.")


def _browser_session_require_live(*, session_key: str, user: User) -> None:
    """A JWT minted from a browser session ends with that session (`browser_session_is_live`),
    judged on every request, like a token."""
    if not browser_session_is_live(session_key=session_key, user=user):
        raise TokenRevoked("The browser session this JWT was minted from has ended.")


class TeamSessionAuthentication(SessionAuthentication):
    """The signed-in browser session (with DRF's CSRF check), bound to the session's active team."""

    refusals: ClassVar[tuple[type[Exception], ...]] = (NoActiveTeam, OrgPendingDeletion)

    def authenticate(self, request: Request) -> tuple[User, Credential] | None:
        authenticated = super().authenticate(request)
        if authenticated is None:
            return None
        user: User = authenticated[0]
        memberships = TeamMembership.objects.select_related("team__org").filter(user=user)
        chosen = request.session.get(ACTIVE_TEAM_SESSION_KEY)
        membership = (chosen and memberships.filter(team_id=chosen).first()) or (
            memberships.order_by("team_id").first()
        )
        if membership is None:
            raise NoActiveTeam()
        org_require_active(org=membership.team.org)
        return user, Credential(
            kind="session",
            user=user,
            team=membership.team,
            session_key=request.session.session_key,
        )


def request_credential(request: Request) -> Credential:
    """The authenticated caller's credential; views behind IsAuthenticated always have one."""
    credential = request.auth
    if not isinstance(credential, Credential):
        raise NoActiveTeam()
    return credential
