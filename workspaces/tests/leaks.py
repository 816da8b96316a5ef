"""Looking for text that must not be kept or sent, in every form a cell or a payload could
hold it: as UTF-8 or UTF-16, JSON-escaped (once or twice), percent-encoded, hex or base64
(at each of the three byte alignments it can have inside a longer base64 string). A scan
that looks only for the plaintext would pass a column that stores the same text encoded."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from urllib.parse import quote

from django.db import connection


def _base64_inside(data: bytes) -> list[bytes]:
    """The base64 characters determined by `data` alone, wherever it sits in a longer input."""
    found = []
    for shift in range(3):
        start = -(-shift * 8 // 6)
        end = (shift + len(data)) * 8 // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            found.append(encode(b"\0" * shift + data)[start:end])
    return found


def _json_escaped(text: str) -> str:
    return json.dumps(text)[1:-1]


def encodings(text: str) -> set[bytes]:
    raw = text.encode()
    return {
        raw,
        text.encode("utf-16-le"),
        text.encode("utf-16-be"),
        _json_escaped(text).encode(),
        _json_escaped(_json_escaped(text)).encode(),
        quote(text, safe="").encode(),
        raw.hex().encode(),
        raw.hex().upper().encode(),
        *_base64_inside(raw),
    }


def holds(haystack: bytes | str, text: str) -> bool:
    """True if `haystack` holds `text` in any of its encodings."""
    data = haystack.encode() if isinstance(haystack, str) else haystack
    return any(needle in data for needle in encodings(text))


def _as_bytes(cell: object) -> bytes:
    if isinstance(cell, bytes | memoryview):
        return bytes(cell)
    # A JSON column may come back decoded: look at its text and at its JSON spelling.
    return f"{cell}\n{json.dumps(cell, default=str)}".encode()


def every_cell() -> Iterator[tuple[str, bytes]]:
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                for cell in row:
                    yield table, _as_bytes(cell)


def tables_holding(text: str) -> list[str]:
    """Every table with a cell that holds `text` in any encoding."""
    return sorted({table for table, cell in every_cell() if holds(cell, text)})
