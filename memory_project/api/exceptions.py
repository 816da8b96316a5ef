"""The one place where refusals become HTTP: every API error is
{"error": {"code", "message", "detail"}}, one code mapping to one status."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth import SESSION_KEY
from django.core.exceptions import DisallowedHost
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, UnreadablePostError
from django.shortcuts import render
from django.views import defaults
from rest_framework import exceptions as drf
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response
from rest_framework.views import set_rollback

from workspaces.api.headers import is_if_match_write
from workspaces.errors import (
    CredentialKindRefused,
    DomainError,
    PreconditionFailed,
    VersionConflict,
)

# DRF's own exceptions, by class, with the code and status this API gives them.
# AuthenticationFailed carries its own specific code (TOKEN_EXPIRED, ...).
DRF_ERROR_CODES: list[tuple[type[drf.APIException], str, int]] = [
    (drf.NotAuthenticated, "AUTHENTICATION_REQUIRED", 401),
    (drf.AuthenticationFailed, "TOKEN_INVALID", 401),
    (drf.ValidationError, "VALIDATION_FAILED", 400),
    (drf.ParseError, "MALFORMED_REQUEST", 400),
    (drf.PermissionDenied, "PERMISSION_DENIED", 403),
    (drf.NotFound, "NOT_FOUND", 404),
    (drf.MethodNotAllowed, "METHOD_NOT_ALLOWED", 405),
    (drf.NotAcceptable, "NOT_ACCEPTABLE", 406),
    (drf.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", 415),
    (drf.Throttled, "RATE_LIMITED", 429),
]


def code_and_status(kind: type[Exception]) -> tuple[str, int]:
    """The code and status a refusal of this kind is answered with: a domain error's own, or
    the row of DRF_ERROR_CODES for one of DRF's exceptions."""
    if issubclass(kind, DomainError):
        return kind.code, kind.status
    for drf_kind, code, status in DRF_ERROR_CODES:
        if issubclass(kind, drf_kind):
            # A subclass may name its own code, as TokenRevoked does.
            own_code = str(getattr(kind, "default_code", ""))
            return (own_code if own_code.isupper() else code), status
    raise LookupError(f"{kind.__name__} is not answered by the API's exception handler")


def error_body(code: str, message: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "detail": detail or {}}}


def error_response(
    code: str, message: str, status: int, detail: dict[str, Any] | None = None
) -> JsonResponse:
    """Render an error outside DRF (middleware, URL resolution) in the API's shape."""
    return JsonResponse(error_body(code, message, detail), status=status)


def edge_error_response(
    request: HttpRequest, code: str, message: str, status: int, detail: dict[str, Any]
) -> HttpResponse:
    """A refusal made before any view: in the API's shape on /api/, plain text elsewhere."""
    if is_api_path(request.path):
        return error_response(code, message, status, detail)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    headers: dict[str, str] = {}
    if isinstance(exc, drf.NotAuthenticated) and _presents_a_credential(context.get("request")):
        # No authenticator of this route took what the caller presented: a credential of
        # another kind (a delivery credential on a person route, a token on a route for
        # turns only), which is not the same as presenting none.
        exc = CredentialKindRefused()
    if isinstance(exc, VersionConflict) and is_if_match_write(context.get("request")):
        # The write named its base in HTTP's own header, so it gets HTTP's own answer.
        exc = PreconditionFailed(**exc.detail)
    if isinstance(exc, DomainError):
        code, status, message, detail = exc.code, exc.status, exc.message, exc.detail
        if "retryAfterSeconds" in detail:
            headers["Retry-After"] = str(detail["retryAfterSeconds"])
    elif isinstance(exc, UnreadablePostError):
        # The body ended early or ran past its Content-Length (memory_project/wsgi.py), or
        # the client went away: refused whole, never acted on cut to some length.
        code, status, message, detail = (
            "MALFORMED_REQUEST",
            400,
            "The body does not match its Content-Length; nothing was read.",
            {},
        )
    elif isinstance(exc, Http404):
        code, status, message, detail = "NOT_FOUND", 404, "Not found.", {}
    elif isinstance(exc, DjangoPermissionDenied):
        code, status, message, detail = "PERMISSION_DENIED", 403, "Permission denied.", {}
    elif isinstance(exc, drf.APIException) and (mapped := _from_drf(exc, headers)):
        code, status, message, detail = mapped
    else:
        return None
    set_rollback()
    return Response(error_body(code, message, detail), status=status, headers=headers)


def _presents_a_credential(request: Any) -> bool:
    if request is None:
        return False
    if request.META.get("HTTP_AUTHORIZATION", "").strip():
        return True
    if any(isinstance(each, SessionAuthentication) for each in request.authenticators):
        return False  # the session was this route's to judge, and it found none
    # The signed-in browser session, read from the session itself: by now DRF has replaced
    # the request's user with an anonymous one.
    session = getattr(request._request, "session", None)
    return bool(session is not None and session.get(SESSION_KEY))


def _from_drf(
    exc: drf.APIException, headers: dict[str, str]
) -> tuple[str, int, str, dict[str, Any]] | None:
    try:
        code, status = code_and_status(type(exc))
    except LookupError:
        return None
    detail: dict[str, Any] = {}
    if isinstance(exc, drf.ValidationError):
        detail = {"fields": exc.detail}
        message = "The request body is not valid."
    else:
        message = str(exc.detail)
    if isinstance(exc, drf.AuthenticationFailed):
        specific = exc.get_codes()
        if isinstance(specific, str) and specific.isupper():
            code = specific
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if isinstance(exc, drf.Throttled) and wait is not None:
        retry_after = max(1, math.ceil(wait))
        headers["Retry-After"] = str(retry_after)
        detail = {"retryAfterSeconds": retry_after}
        message = "Too many requests; retry later."
    return code, status, message, detail


def is_api_path(path: str) -> bool:
    return path.startswith("/api/")


def bad_request_view(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 for a suspicious request, chiefly a Host outside ALLOWED_HOSTS."""
    if isinstance(exception, DisallowedHost):
        return edge_error_response(
            request, "HOST_NOT_ALLOWED", "This server does not answer for that host.", 400, {}
        )
    if is_api_path(request.path):
        return error_response("MALFORMED_REQUEST", "The request is malformed.", 400)
    return defaults.bad_request(request, exception)


def csrf_failure_view(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A page's form refused by the CSRF check: most often a tab opened before the person
    signed in or out elsewhere, which rotates the token. Django's own page speaks only of
    CSRF and DEBUG; this one says what happened and what to do. The API's routes are DRF's,
    which answer PERMISSION_DENIED themselves."""
    return render(request, "403_csrf.html", status=403)


def not_found_view(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_path(request.path):
        return error_response("NOT_FOUND", "Not found.", 404)
    return defaults.page_not_found(request, exception)


def server_error_view(request: HttpRequest) -> HttpResponse:
    if is_api_path(request.path):
        return error_response("INTERNAL_ERROR", "The server failed to handle this request.", 500)
    return defaults.server_error(request)
