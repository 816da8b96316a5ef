"""Gates that answer before any session or credential is read."""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Any
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest, get_bytes_from_wsgi
from django.http import HttpRequest, HttpResponse, QueryDict
from django.utils.cache import patch_cache_control
from rest_framework.views import APIView

from memory_project.api.exceptions import edge_error_response, error_response, is_api_path
from memory_project.api.schema import query_parameters
from memory_project.api.throttles import SAFE_METHODS
from workspaces.errors import DomainError, InvalidDocumentPath, ValidationFailed

# Django's bounds on what precedes the body. gunicorn's own limits sit above them
# (memory_project/gunicorn_conf.py), so that these refusals are answered here, in the
# API's shape; gunicorn's old defaults were about the same size.
MAX_URI_BYTES = 4096
MAX_HEADER_FIELDS = 100
MAX_HEADER_BYTES = 16 * 1024
MAX_CONTENT_LENGTH_DIGITS = 18


class ContentSecurityPolicyMiddleware:
    """Send CONTENT_SECURITY_POLICY with every answer (Django 5.2 has no setting for it).

    The pages load scripts and styles from this origin only and hold no inline script, so
    an injected `<script>` or event handler would not run.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


class ApiNoStoreMiddleware:
    """`Cache-Control: no-store` on every /api/ answer that sets no policy of its own.

    Memory and notes are sealed at rest here; a browser would otherwise keep their text in
    its disk cache (an answer with an ETag is stored, to be revalidated), as would a proxy.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if is_api_path(request.path_info) and not response.has_header("Cache-Control"):
            patch_cache_control(response, no_store=True, private=True)
        return response


class RequestSizeLimitMiddleware:
    """Refuse a request over the transport bounds before its body is read: the path and
    query (414), the headers (431), a body that is not framed by Content-Length (411) and
    a body over REQUEST_MAX_BODY_BYTES (413).

    Django would turn an over-size body into a 400, and DRF's JSON parser reads the
    stream without Django's check, so the body bound is enforced here, once, from
    Content-Length. Django reads exactly Content-Length bytes of a WSGI body, so a
    chunked body still chunked here (the server did not hand it over whole, see
    memory_project/wsgi.py) would be read as empty: it is refused instead.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refusal = self._refusal(request)
        if refusal is not None:
            return edge_error_response(request, *refusal)
        return self.get_response(request)

    @staticmethod
    def _refusal(request: HttpRequest) -> tuple[str, str, int, dict[str, Any]] | None:
        meta = request.META
        # The path as UTF-8: Django has already put the decoded path back into PATH_INFO,
        # which WSGI's Latin-1 cannot re-encode past U+00FF (and would count short below).
        uri_bytes = len(request.path_info.encode()) + len(
            get_bytes_from_wsgi(meta, "QUERY_STRING", "")
        )
        if uri_bytes > MAX_URI_BYTES:
            return ("URI_TOO_LONG", "The URL is too long.", 414, {"limitBytes": MAX_URI_BYTES})
        # One loop with no call per entry: every request pays it, over each of its headers.
        header_fields = header_bytes = 0
        for key, value in meta.items():
            if key.startswith("HTTP_") or key in _BODY_HEADERS:
                header_fields += 1
                header_bytes += len(key) + len(str(value))
        if header_fields > MAX_HEADER_FIELDS or header_bytes > MAX_HEADER_BYTES:
            return (
                "HEADERS_TOO_LARGE",
                "The request headers are too large.",
                431,
                {"limitFields": MAX_HEADER_FIELDS, "limitBytes": MAX_HEADER_BYTES},
            )
        if "HTTP_TRANSFER_ENCODING" in meta and isinstance(request, WSGIRequest):
            return ("LENGTH_REQUIRED", "Send the body with a Content-Length.", 411, {})
        raw_length = meta.get("CONTENT_LENGTH") or "0"
        if (
            not raw_length.isascii()
            or not raw_length.isdigit()
            or len(raw_length) > MAX_CONTENT_LENGTH_DIGITS
        ):
            return ("MALFORMED_REQUEST", "Content-Length is not a number.", 400, {})
        return body_length_refusal(int(raw_length))


def body_length_refusal(length: int) -> tuple[str, str, int, dict[str, Any]] | None:
    """REQUEST_TOO_LARGE for a body whose Content-Length is over REQUEST_MAX_BODY_BYTES."""
    limit = settings.REQUEST_MAX_BODY_BYTES
    if length > limit:
        return (
            "REQUEST_TOO_LARGE",
            "The request body is larger than this server accepts.",
            413,
            {"limitBytes": limit, "receivedBytes": length},
        )
    return None


# The two headers WSGI names without the HTTP_ prefix.
_BODY_HEADERS = frozenset({"CONTENT_TYPE", "CONTENT_LENGTH"})


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


class QueryStringMiddleware:
    """Refuse an /api/ query string that does not read one way: a parameter that is not
    UTF-8 once percent-decoded, or one sent twice; and, once the route is resolved, a
    parameter its operation does not take.

    Django decodes the query string with errors="replace", so `?path=%FF%FE.md` would reach
    a view as U+FFFD U+FFFD: another text than the one sent, which every rule after it
    would judge instead. And of a parameter sent twice a view reads the last, where a proxy
    in front may have judged the first (`?visibility=org&visibility=global`): no route takes
    a list in its query, so which one was meant is a guess. So the raw query string is
    judged here, once, for every route: an undecodable path parameter gets the path's own
    refusal (`invalid_encoding`), anything else VALIDATION_FAILED naming the parameter,
    with the reason `invalid_encoding` or `repeated`.

    A parameter the operation does not take (`query_parameters`: what its schema documents)
    is refused the same way, with the reason `unknown`, before the view runs: ignored, it
    would answer another question than the one asked (`?workspaceId=` on a route that does
    not filter by workspace answers every workspace; `?user=5` on a space the caller's own).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_path(request.path):
            query = get_bytes_from_wsgi(request.META, "QUERY_STRING", "")
            problem = query_string_problem(query)
            if problem is not None:
                name, reason = problem
                error: DomainError
                if reason == "invalid_encoding" and name in PATH_PARAMETERS:
                    error = InvalidDocumentPath(reason=reason)
                else:
                    error = ValidationFailed(reason=reason, fields={name: [PROBLEMS[reason]]})
                return error_response(error.code, error.message, error.status, error.detail)
            if query:
                # Decoded as judged: Django would decode it with the charset the body's
                # Content-Type names (`?path=%C3%A9.md` under `charset=latin-1` is `Ã©.md`).
                request.GET = QueryDict(query, encoding="utf-8")
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponse | None:
        view_class = getattr(view_func, "cls", None)
        if not (is_api_path(request.path) and request.GET and isinstance(view_class, type)):
            return None
        # HEAD is answered by GET, as DRF answers it; a method the view does not take (one it
        # has no handler for, or leaves out of `http_method_names`, as OPTIONS) is its 405.
        method = "GET" if request.method == "HEAD" else str(request.method)
        handler = method.lower()
        if not (
            issubclass(view_class, APIView)
            and handler in view_class.http_method_names
            and hasattr(view_class, handler)
        ):
            return None
        taken = query_parameters(view_func, method)
        if taken is None or set(request.GET) <= taken:
            return None
        error = unknown_parameters_refusal(set(request.GET), taken)
        return error_response(error.code, error.message, error.status, error.detail)


def unknown_parameters_refusal(sent: Set[str], taken: Set[str]) -> ValidationFailed:
    """The refusal of the parameters in `sent` that an operation taking `taken` does not."""
    listed = ", ".join(f"`{name}`" for name in sorted(taken))
    message = f"Unknown parameter; this operation takes {listed}."
    return ValidationFailed(
        reason="unknown", fields={name: [message] for name in sorted(sent - taken)}
    )


PROBLEMS = {
    "invalid_encoding": "Not UTF-8 once percent-decoded.",
    "repeated": "Sent more than once; send it once.",
}


def query_string_problem(query: bytes) -> tuple[str, str] | None:
    """The first parameter that is not UTF-8 once percent-decoded (a name that is not UTF-8
    is given as sent), or that was already sent, with the reason; or None.

    Fields are split on `&` as Django's QueryDict splits them; empty ones are skipped, as it
    skips them.
    """
    seen: set[str] = set()
    for field in query.split(b"&"):
        if not field:
            continue
        raw_name, _, raw_value = field.partition(b"=")
        try:
            name = _decode(raw_name)
        except UnicodeDecodeError:
            return raw_name.decode("latin-1"), "invalid_encoding"
        try:
            _decode(raw_value)
        except UnicodeDecodeError:
            return name, "invalid_encoding"
        if name in seen:
            return name, "repeated"
        seen.add(name)
    return None


def _decode(component: bytes) -> str:
    return unquote_to_bytes(component.replace(b"+", b" ")).decode("utf-8")
