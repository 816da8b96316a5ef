"""Parsing of the request headers that carry compare-and-set preconditions."""

from __future__ import annotations

from rest_framework.request import Request

from workspaces.errors import BaseVersionRequired, InvalidHeader

# Every whole number a header carries ends up in a signed 64-bit column or comparison:
# 18 digits always fit, and the bound also keeps int() away from its digit limit.
MAX_HEADER_DIGITS = 18


def whole_number(raw: str, *, header: str, message: str) -> int:
    """Parse a header's whole number (at least 0, at most 18 digits) or refuse the header."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > MAX_HEADER_DIGITS:
        raise InvalidHeader(message, header=header)
    return int(raw)


def base_version_from(request: Request) -> int:
    """Read X-Base-Version: required, a whole number >= 0 (0 means create-only)."""
    raw = request.headers.get("X-Base-Version")
    if raw is None or not raw.strip():
        raise BaseVersionRequired()
    return whole_number(
        raw.strip(),
        header="X-Base-Version",
        message="X-Base-Version must be a whole number of at least 0.",
    )


def flag_from(request: Request, name: str) -> bool:
    """Read a 0/1 flag header; absent is 0, anything other than 0 or 1 is refused."""
    raw = request.headers.get(name)
    if raw is None:
        return False
    if raw.strip() not in {"0", "1"}:
        raise InvalidHeader(f"{name} must be 0 or 1.", header=name)
    return raw.strip() == "1"
