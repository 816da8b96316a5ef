"""gunicorn's settings, for `make run` and production alike, loaded by

    python -m memory_project.serve --bind HOST:PORT

With REDIS_URL set it starts one worker process per core (WEB_CONCURRENCY overrides the
count); without it, on the embedded default, exactly one (see `_workers`).
"""

from __future__ import annotations

import json
import logging
import os
import runpy
import sys
from typing import NoReturn

from django.core.exceptions import ImproperlyConfigured
from gunicorn import util

from memory_project.env import env_int, env_str
from memory_project.log_filters import RedactQueryStrings


def _workers() -> int:
    """One process per core with Redis: a request is mostly Python, and the threads of one
    process share one interpreter lock, so one process tops out at one core. Without
    Redis the cache is Django's in-process one (key sessions, throttle counters), which each
    process would hold apart: a key session opened through one worker would be unknown to
    the next, so the embedded default keeps exactly one process."""
    if env_str("REDIS_URL", ""):
        return env_int("WEB_CONCURRENCY", os.cpu_count() or 1, minimum=1, maximum=64)
    if env_int("WEB_CONCURRENCY", 1, minimum=1) != 1:
        raise ImproperlyConfigured(
            "WEB_CONCURRENCY above 1 needs REDIS_URL: the in-process cache is per process"
        )
    return 1


def _refuse(error: ImproperlyConfigured) -> NoReturn:
    # The message names the variable; gunicorn would print it under a traceback, or (from
    # a worker) after one per worker and "Worker failed to boot".
    sys.exit(f"Configuration error: {error}")


def on_starting(server: object) -> None:
    """Evaluate the settings once in the master before any worker starts, so a malformed
    setting stops gunicorn with its message alone. The module is run, not imported: the
    master keeps no settings, and a graceful reload (HUP) starts workers that read them
    afresh."""
    try:
        runpy.run_module(os.environ.get("DJANGO_SETTINGS_MODULE", "memory_project.settings"))
    except ImproperlyConfigured as error:
        _refuse(error)


try:
    workers = _workers()
except ImproperlyConfigured as error:
    _refuse(error)
worker_class = "gthread"
# Within each process, threads overlap the waits on PostgreSQL and Redis.
threads = 8
# No control socket (gunicorn 25.1+, for `gunicornc`): its default path is one per user
# account ($XDG_RUNTIME_DIR or ~/.gunicorn/gunicorn.ctl), so every server the account runs
# would take it over from the one before, and a command sent to one would reach another.
# A graceful reload is `kill -HUP` to the master's pid.
control_socket_disable = True
accesslog = "-"
# The request's path, never its query string: a search's terms and document paths travel
# there. No Referer either, which carries another page's query string.
access_log_format = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s "%(a)s" %(M)sms'

# Above Django's own bounds (memory_project/middleware.py: a 4 KiB path and query, 100
# header fields, 16 KiB of headers), so that Django answers those refusals in the API's
# shape; gunicorn keeps only what it alone can judge (a request line past its 8190-byte
# maximum, broken framing such as a bad Content-Length).
limit_request_line = 8190
limit_request_fields = 200
limit_request_field_size = 20 * 1024

# The code of each refusal gunicorn answers itself, as docs/errors.md lists it.
EDGE_ERROR_CODES = {
    400: "MALFORMED_REQUEST",
    403: "PERMISSION_DENIED",
    414: "URI_TOO_LONG",
    417: "EXPECTATION_FAILED",
    431: "HEADERS_TOO_LARGE",
    500: "INTERNAL_ERROR",
    501: "TRANSFER_ENCODING_UNSUPPORTED",
}


def write_json_error(sock: object, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's refusal in the API's error shape, instead of its HTML page.

    `mesg` is left out: it can quote the request line, and so its query string.
    """
    body = json.dumps(
        {
            "error": {
                "code": EDGE_ERROR_CODES.get(status_int, "MALFORMED_REQUEST"),
                "message": f"{reason}.",
                "detail": {},
            }
        }
    ).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


# gunicorn has no setting for the body of its own refusals; its workers write them through
# util.write_error, so that one function is replaced (memory_project/tests/test_edge.py
# runs a real gunicorn).
util.write_error = write_json_error
logging.getLogger("gunicorn.error").addFilter(RedactQueryStrings())
