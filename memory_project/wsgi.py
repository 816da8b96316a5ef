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


application = ChunkedBodyMiddleware(get_wsgi_application())
