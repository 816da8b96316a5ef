"""No query string reaches a log: a search's terms and document paths travel in one."""

from __future__ import annotations

import logging
import re

# From a `?` to the end of the request target (whitespace or a quote ends it).
QUERY_STRING = re.compile(r"\?[^\s\"']+")


def redact_query_strings(text: str) -> str:
    return QUERY_STRING.sub("?[redacted]", text)


class RedactQueryStrings(logging.Filter):
    """For loggers that write request lines: runserver's django.server, gunicorn's errors
    about a request line it could not parse."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_query_strings(record.getMessage())
        record.args = None
        return True
