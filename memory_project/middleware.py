"""Gates that answer before any session or credential is read."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import get_bytes_from_wsgi
from django.http import HttpRequest, HttpResponse

from memory_project.api.exceptions import error_response, is_api_path
from workspaces.errors import InvalidDocumentPath

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class RequestSizeLimitMiddleware:
    """Refuse an /api/ body over REQUEST_MAX_BODY_BYTES with 413 before it is read.

    Django would turn an over-size body into a 400, and DRF's JSON parser reads the
    stream without Django's check, so the bound is enforced here, once, from
    Content-Length (a WSGI request without one carries no readable body).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_path(request.path):
            raw_length = request.META.get("CONTENT_LENGTH") or "0"
            try:
                length = int(raw_length)
            except ValueError:
                return error_response("MALFORMED_REQUEST", "Content-Length is not a number.", 400)
            limit = settings.REQUEST_MAX_BODY_BYTES
            if length > limit:
                return error_response(
                    "REQUEST_TOO_LARGE",
                    "The request body is larger than this server accepts.",
                    413,
                    {"limitBytes": limit, "receivedBytes": length},
                )
        return self.get_response(request)


class OriginGateMiddleware:
    """Refuse a state-changing /api/ request from an Origin the deployment does not trust.

    Browsers attach cookies to cross-site requests, so an untrusted Origin on a write
    is refused before any credential is looked at. A request with no Origin header
    passes: it does not come from a browser page and carries no ambient credential.
    REQUIRE_ORIGIN=0 switches the gate off for a rollback.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            settings.REQUIRE_ORIGIN
            and request.method not in SAFE_METHODS
            and is_api_path(request.path)
            and "HTTP_ORIGIN" in request.META
            and not self._is_trusted(request, request.META["HTTP_ORIGIN"])
        ):
            return error_response("CROSS_ORIGIN_REJECTED", "Cross-origin request rejected.", 403)
        return self.get_response(request)

    @staticmethod
    def _is_trusted(request: HttpRequest, origin: str) -> bool:
        origin = origin.strip().lower()
        if origin in settings.TRUSTED_ORIGINS:
            return True
        try:
            own_origin = f"{request.scheme}://{request.get_host()}".lower()
        except DisallowedHost:
            return False
        return origin == own_origin


# Query parameters that name a document: refused as a document path would be.
PATH_PARAMETERS = frozenset({"path"})


class QueryEncodingMiddleware:
    """Refuse an /api/ query string that is not UTF-8 once percent-decoded.

    Django decodes the query string with errors="replace", so `?path=%FF%FE.md` would reach
    a view as U+FFFD U+FFFD: another text than the one sent, which every rule after it
    would judge instead. So the raw query string is judged here, once, for every route: a
    path parameter gets the path's own refusal (`invalid_encoding`), any other parameter
    the validation refusal its serializer would give, with the same reason.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_path(request.path):
            raw = get_bytes_from_wsgi(request.META, "QUERY_STRING", "")
            name = first_undecodable_parameter(raw)
            if name in PATH_PARAMETERS:
                error = InvalidDocumentPath(reason="invalid_encoding")
                return error_response(error.code, error.message, error.status, error.detail)
            if name is not None:
                return error_response(
                    "VALIDATION_FAILED",
                    "The query string is not valid.",
                    400,
                    {
                        "reason": "invalid_encoding",
                        "fields": {name: ["Not UTF-8 once percent-decoded."]},
                    },
                )
        return self.get_response(request)


def first_undecodable_parameter(query: bytes) -> str | None:
    """The name of the first parameter whose name or value is not UTF-8 once
    percent-decoded (a name that is not UTF-8 is given as sent), or None.

    Fields are split on `&` as Django's QueryDict splits them.
    """
    for field in query.split(b"&"):
        raw_name, _, raw_value = field.partition(b"=")
        try:
            name = _decode(raw_name)
        except UnicodeDecodeError:
            return raw_name.decode("latin-1")
        try:
            _decode(raw_value)
        except UnicodeDecodeError:
            return name
    return None


def _decode(component: bytes) -> str:
    return unquote_to_bytes(component.replace(b"+", b" ")).decode("utf-8")
