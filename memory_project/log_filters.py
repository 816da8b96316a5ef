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


class RedactQueryStringArgs(logging.Filter):
    """For uvicorn's access log (the MCP server's), whose formatter takes the request line
    apart from `record.args`, so the query string is cut from each argument, not from the
    formatted message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_query_strings(arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True


class ConflictsAsInfo(logging.Filter):
    """For django.request, which logs every 4xx answer as a warning: a 409 is a routine
    outcome of compare-and-set (two people saved the same version), not a fault, so it is
    logged at INFO, and only where INFO is enabled."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) != 409 or record.levelno != logging.WARNING:
            return True
        record.levelno, record.levelname = logging.INFO, "INFO"
        return logging.getLogger(record.name).isEnabledFor(logging.INFO)
