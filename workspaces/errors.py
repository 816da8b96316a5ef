"""Domain errors: each carries one machine-readable code and the one HTTP status it maps to.

The API exception handler renders any DomainError as
{"error": {"code", "message", "detail"}}; docs/errors.md lists every code. Higher
apps subclass DomainError for their own refusals, so the table stays one table.
"""

from __future__ import annotations

from typing import Any, ClassVar


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


class CredentialKindRefused(DomainError):
    """The caller is authenticated, but with a kind of credential this route does not take."""

    code = "CREDENTIAL_KIND_REFUSED"
    status = 403
    default_message = "This kind of credential cannot do this."


class ConsentRevisionConflict(DomainError):
    code = "CONSENT_REVISION_CONFLICT"
    status = 409
    default_message = "The workspace AI setting changed since the revision you sent."
