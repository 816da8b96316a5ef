"""Domain errors: each carries one machine-readable code and the one HTTP status it maps to.

The API exception handler renders any DomainError as
{"error": {"code", "message", "detail"}}; docs/errors.md lists every code. Higher
apps subclass DomainError for their own refusals, so the table stays one table.
"""

from __future__ import annotations

from typing import Any, ClassVar

from redis.exceptions import RedisError

# What the cache raises when Redis cannot be reached (the in-process cache raises nothing).
# Redis holds only what may be lost: key sessions' keys and throttle counters.
CACHE_ERRORS: tuple[type[Exception], ...] = (RedisError,)


class DomainError(Exception):
    code: ClassVar[str]
    status: ClassVar[int]
    default_message: ClassVar[str]

    def __init__(self, message: str | None = None, **detail: Any) -> None:
        self.message = message or self.default_message
        self.detail = detail
        super().__init__(self.message)


class NotFound(DomainError):
    """The object does not exist or belongs to another tenant: the two are not told apart."""

    code = "NOT_FOUND"
    status = 404
    default_message = "Not found."


class NoActiveTeam(DomainError):
    code = "NO_ACTIVE_TEAM"
    status = 403
    default_message = "This credential has no active team."


class WorkspaceAdminRequired(DomainError):
    code = "WORKSPACE_ADMIN_REQUIRED"
    status = 403
    default_message = "Only an admin of this workspace may do this."


class TeamOwnerRequired(DomainError):
    code = "TEAM_OWNER_REQUIRED"
    status = 403
    default_message = "Only an owner of this team may do this."


class CredentialKindRefused(DomainError):
    """The caller is authenticated, but with a kind of credential this route does not take."""

    code = "CREDENTIAL_KIND_REFUSED"
    status = 403
    default_message = "This kind of credential cannot do this."


class TokenScopeRefused(DomainError):
    """A valid personal access token whose scope does not cover this surface: an MCP-only
    token on the person API, or a person-API token (or a JWT) at the MCP server."""

    code = "TOKEN_SCOPE_REFUSED"
    status = 403
    default_message = "This token's scope does not cover this route."


class ConsentRevisionConflict(DomainError):
    code = "CONSENT_REVISION_CONFLICT"
    status = 409
    default_message = "The workspace AI setting changed since the revision you sent."


class NameTaken(DomainError):
    """A workspace of this name already exists in the team (names are unique per team)."""

    code = "NAME_TAKEN"
    status = 409
    default_message = "Your team already has a workspace of this name; choose another name."


class AlreadyMember(DomainError):
    code = "ALREADY_MEMBER"
    status = 409
    default_message = "This person is already a member of the workspace."


class LastTeamOwner(DomainError):
    """Making the team's only owner a member would leave nobody to manage its bots and their
    tokens (every bot token of theirs would end with their ownership, too)."""

    code = "LAST_TEAM_OWNER"
    status = 409
    default_message = "This is the team's only owner; make another member an owner first."


class LastWorkspaceAdmin(DomainError):
    """Removing, demoting or leaving as the workspace's only admin would leave nobody to manage
    its members or its AI consent."""

    code = "LAST_WORKSPACE_ADMIN"
    status = 409
    default_message = "This is the workspace's only admin; make another member an admin first."


class NotTeamMember(DomainError):
    """The person named is not an active member of the workspace's team (or does not exist:
    the two are not told apart). A workspace admits only its team's members."""

    code = "NOT_TEAM_MEMBER"
    status = 422
    default_message = (
        "Only members of your team can be added to its workspaces, and this person is not one."
    )


class VersionConflict(DomainError):
    """The base version a write named is no longer the current one; nothing was written."""

    code = "VERSION_CONFLICT"
    status = 409
    default_message = "The document changed since the version you based this write on."


class BaseVersionRequired(DomainError):
    code = "BASE_VERSION_REQUIRED"
    status = 428
    default_message = (
        "X-Base-Version is required: name the version this write is based on (0 to create)."
    )


class PreconditionFailed(DomainError):
    """An `If-Match` write whose entity tag is no longer the document's: HTTP's own answer
    to a failed precondition, with the detail a VERSION_CONFLICT would carry."""

    code = "PRECONDITION_FAILED"
    status = 412
    default_message = "The document changed since the entity tag you sent in If-Match."


class ValidationFailed(DomainError):
    """A query parameter the route cannot use: missing, not of the type it takes, out of range
    or not one of its values; `detail.fields` maps each parameter, by its own name, to its
    problems. A JSON body's fields are refused with the same code (DRF's ValidationError, as
    the exception handler maps it): one code for one refusal, wherever the field was sent."""

    code = "VALIDATION_FAILED"
    status = 400
    default_message = "A query parameter is not valid."


class InvalidHeader(DomainError):
    code = "INVALID_HEADER"
    status = 400
    default_message = "A request header has a value this route does not accept."


class InvalidText(DomainError):
    """Text that cannot be stored as UTF-8 (a lone surrogate, which JSON can still carry)."""

    code = "INVALID_TEXT"
    status = 400
    default_message = "The text is not valid Unicode and cannot be stored."


class DocumentTooLarge(DomainError):
    code = "DOCUMENT_TOO_LARGE"
    status = 422
    default_message = "The document is larger than the per-document ceiling; nothing was written."


class RateLimited(DomainError):
    """Too much at once from one caller; `detail.retryAfterSeconds` says when to retry (the
    API also sends it as `Retry-After`). The request rate limits answer the same code."""

    code = "RATE_LIMITED"
    status = 429
    default_message = "Too many requests; retry later."


class TenantQuotaExceeded(DomainError):
    """The write would take the team's stored document bytes past its org's quota."""

    code = "TENANT_QUOTA_EXCEEDED"
    status = 422
    default_message = "The team's storage quota would be exceeded; nothing was written."


class DocumentUnreadable(DomainError):
    """A stored revision failed authentication (tampered or moved); no partial text is returned."""

    code = "DOCUMENT_UNREADABLE"
    status = 422
    default_message = "The stored revision failed its integrity check and cannot be read."


class KeySessionUnavailable(DomainError):
    """No live key session: unknown, revoked, or evicted from the cache after idling."""

    code = "KEY_SESSION_UNAVAILABLE"
    status = 403
    default_message = "No live key session for this workspace; open a new one."


class KeySessionStoreUnavailable(DomainError):
    """The cache that holds key sessions' keys cannot be reached (Redis is down).

    Only operations that need a key session's key are refused; `Retry-After` says when to
    try again. Nothing was written.
    """

    code = "KEY_SESSION_STORE_UNAVAILABLE"
    status = 503
    default_message = "Key sessions are unavailable for a moment; retry shortly."
    retry_after_seconds: ClassVar[int] = 10

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, retryAfterSeconds=self.retry_after_seconds)


class InvalidDocumentPath(DomainError):
    """A document path that is not valid, or not in its one canonical spelling.

    `detail.reason` says why; for a valid path sent in another spelling, `detail.canonical`
    is the spelling to send instead.
    """

    code = "INVALID_DOCUMENT_PATH"
    status = 400
    default_message = "The document path is not valid."


class DocumentExists(DomainError):
    """A move's destination is taken (by a live or a deleted document); nothing moved."""

    code = "DOCUMENT_EXISTS"
    status = 409
    default_message = "A document already exists at the destination; nothing was moved."


class CredentialExpired(DomainError):
    """A credential that still authenticates its holder but is past the life it was given.

    Raised where expiry is a route's decision rather than the authenticator's (a delivery
    credential names its turn, whose admission carries the expiry). Same code and status
    as an expired token refused by the authenticator.
    """

    code = "TOKEN_EXPIRED"
    status = 401
    default_message = "This credential is past its expiry."


class CredentialOwnerInactive(DomainError):
    """The person a request acts as was deactivated after the request authenticated.

    Raised where a write re-checks its author in its own statement (`key_session_open`);
    the same code and status as the authenticator gives a request arriving after.
    """

    code = "TOKEN_INVALID"
    status = 401
    default_message = "Token owner unavailable."


class OrgPendingDeletion(DomainError):
    """The caller's org is pending deletion (or being purged): its workspaces are closed."""

    code = "ORG_PENDING_DELETION"
    status = 403
    default_message = "This organisation is scheduled for deletion; its workspaces are closed."


class OrgStateConflict(DomainError):
    """A lifecycle change that does not apply to the org's current state (e.g. restoring an
    org that is not pending deletion, or one a purge has already claimed)."""

    code = "ORG_STATE_CONFLICT"
    status = 409
    default_message = "The organisation is not in a state that allows this."
