"""Parsing of the request headers that carry compare-and-set preconditions."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request

from memory_project.api.serializers import is_whole_number
from workspaces.errors import (
    BaseVersionRequired,
    InvalidHeader,
    PreconditionFailed,
    VersionConflict,
)

# Every whole number a header carries ends up in a signed 64-bit column or comparison:
# 18 digits always fit, and the bound also keeps int() away from its digit limit.
MAX_HEADER_DIGITS = 18


def whole_number(raw: str, *, header: str, message: str) -> int:
    """Parse a header's whole number (at least 0, at most 18 digits, spelled as a query
    spells one) or refuse the header."""
    if not is_whole_number(raw) or len(raw) > MAX_HEADER_DIGITS:
        raise InvalidHeader(message, header=header)
    return int(raw)


def field_value(raw: str) -> str:
    """A header's value as HTTP defines it (RFC 9110, 5.5): without the spaces and tabs around
    it, which are not part of it (gunicorn strips them before the app sees the header).
    `str.strip()` would also remove a no-break space, NEL and other characters that are."""
    return raw.strip(" \t")


# A document's entity tag is its version number, quoted: `"7"` (`"0"` before it exists).
ENTITY_TAG = re.compile(r'"([0-9]+)"')
# Set on the request when its base version came from If-Match, so that a conflict is
# answered as HTTP answers a failed precondition (412), not with 409.
IF_MATCH_ATTRIBUTE = "base_version_from_if_match"


# What a write that names its base version can be refused with, for the schema.
BASE_VERSION_REFUSALS = (BaseVersionRequired, InvalidHeader, VersionConflict, PreconditionFailed)

BASE_VERSION_PARAMETERS = [
    OpenApiParameter(
        "X-Base-Version",
        int,
        OpenApiParameter.HEADER,
        description=(
            "The version this write is based on; 0 creates the document. Required unless "
            "If-Match is sent (428 BASE_VERSION_REQUIRED); a stale one is 409 VERSION_CONFLICT."
        ),
    ),
    OpenApiParameter(
        "If-Match",
        str,
        OpenApiParameter.HEADER,
        description=(
            "X-Base-Version in HTTP's spelling: the ETag of the read this write is based on "
            '(`"7"`; `"0"` creates). A stale one is 412 PRECONDITION_FAILED.'
        ),
    ),
]


def entity_tag(version: int) -> str:
    return f'"{version}"'


def base_version_from(request: Request) -> int:
    """Read the write's base version: X-Base-Version, or If-Match (its standard spelling,
    one strong entity tag as a read's ETag gives it). Required, a whole number >= 0 (0
    means create-only); when both are sent they must agree."""
    raw = field_value(request.headers.get("X-Base-Version", ""))
    if_match = _if_match_version(request)
    if not raw:
        if if_match is None:
            raise BaseVersionRequired()
        setattr(request, IF_MATCH_ATTRIBUTE, True)
        return if_match
    version = whole_number(
        raw,
        header="X-Base-Version",
        message="X-Base-Version must be a whole number of at least 0.",
    )
    if if_match is not None and if_match != version:
        raise InvalidHeader(
            "If-Match and X-Base-Version name different versions.", header="If-Match"
        )
    return version


def _if_match_version(request: Request) -> int | None:
    raw = field_value(request.headers.get("If-Match", ""))
    if not raw:
        return None
    message = 'If-Match must be one entity tag as a read gave it, like "7".'
    matched = ENTITY_TAG.fullmatch(raw)
    if matched is None:
        raise InvalidHeader(message, header="If-Match")
    return whole_number(matched.group(1), header="If-Match", message=message)


def is_if_match_write(request: Any) -> bool:
    return bool(getattr(request, IF_MATCH_ATTRIBUTE, False))


def flag_from(request: Request, name: str) -> bool:
    """Read a 0/1 flag header; absent is 0, anything other than 0 or 1 is refused."""
    raw = request.headers.get(name)
    if raw is None:
        return False
    if field_value(raw) not in {"0", "1"}:
        raise InvalidHeader(f"{name} must be 0 or 1.", header=name)
    return field_value(raw) == "1"
