import io
import os
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_project.settings")

WSGIApplication = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class ChunkedBodyMiddleware:
    """Hand Django a chunked request body as one of known length.

    Django reads exactly Content-Length bytes of a WSGI body, and a chunked request has no
    Content-Length, so its body reached views as empty. A server that has de-chunked the
    stream and marks its end (`wsgi.input_terminated`, as gunicorn does) lets it be read
    here: up to one byte past REQUEST_MAX_BODY_BYTES, so an over-size body is refused (413,
    memory_project/middleware.py) after reading no more than that. Without the mark the
    body stays chunked, and the middleware refuses it (411) rather than read it as empty.
    """

    def __init__(self, application: WSGIApplication) -> None:
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower() and environ.get(
            "wsgi.input_terminated"
        ):
            body = environ["wsgi.input"].read(settings.REQUEST_MAX_BODY_BYTES + 1)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            del environ["HTTP_TRANSFER_ENCODING"]
        return self.application(environ, start_response)


class BodyFramingError(OSError):
    """The body does not match its Content-Length. Django turns an OSError met while
    reading the body into UnreadablePostError, which the API's parsers answer with 400
    MALFORMED_REQUEST."""


class FramedInput:
    """`wsgi.input` that delivers exactly Content-Length bytes or fails: a body that ends
    early, or holds more than its Content-Length says, raises BodyFramingError instead of
    reaching a view cut to some length.

    Django reads at most Content-Length bytes and takes a short read as the end, so either
    lie would otherwise be stored truncated under a 200. When the declared bytes have been
    delivered, one more byte is asked for: the servers we run under bound their input to
    the declared length (gunicorn's body reader, Django's own server), so for them it
    answers at once with nothing, and only an input holding more than was declared fails.
    """

    def __init__(self, stream: Any, length: int) -> None:
        self.stream = stream
        self.remaining = length

    def read(self, size: int | None = -1) -> bytes:
        wanted = self.remaining if size is None or size < 0 else min(size, self.remaining)
        return self._account(self.stream.read(wanted) if wanted else b"", wanted)

    def readline(self, size: int | None = -1) -> bytes:
        wanted = self.remaining if size is None or size < 0 else min(size, self.remaining)
        line = self.stream.readline(wanted) if wanted else b""
        return self._account(line, len(line) if line.endswith(b"\n") else wanted)

    def _account(self, data: bytes, wanted: int) -> bytes:
        if len(data) < wanted:
            raise BodyFramingError("The body ended before its Content-Length.")
        was_left, self.remaining = self.remaining, self.remaining - len(data)
        if was_left and not self.remaining and self.stream.read(1):
            raise BodyFramingError("The body is longer than its Content-Length.")
        return data


class FramedBodyMiddleware:
    """Hand Django the body through `FramedInput` whenever it has a Content-Length."""

    def __init__(self, application: WSGIApplication) -> None:
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        raw_length = environ.get("CONTENT_LENGTH") or ""
        if raw_length.isascii() and raw_length.isdigit() and "wsgi.input" in environ:
            environ["wsgi.input"] = FramedInput(environ["wsgi.input"], int(raw_length))
        return self.application(environ, start_response)


# The chunked body is made whole first, so that it is framed like any other.
application = ChunkedBodyMiddleware(FramedBodyMiddleware(get_wsgi_application()))
