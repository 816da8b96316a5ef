"""The parsers of the /api/ routes: JSON for every route, raw Markdown for the routes that
take a document's bytes as they are (a memory space's document, the mirror's), and a gzip
archive for a memory space's import."""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Mapping
from typing import IO, Any, Generic, TypeVar, cast

from django.utils.http import parse_header_parameters
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.utils import json

# No request body of this API nests more than a few levels; the bound is generous.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"The JSON body is nested more than {MAX_JSON_DEPTH} levels deep."

Body = TypeVar("Body")

NOT_UTF8_JSON = "A JSON body is UTF-8: send it as application/json, with no other charset."


def is_utf8_json(content_type: str) -> bool:
    """True if `content_type` declares a JSON body this API reads: `application/json`, with
    no charset or `utf-8`. JSON is UTF-8 (RFC 8259, 8.1); a body declared in another charset
    (`latin-1`, `utf-16`) would be read as other text than the one sent, or not at all by
    whatever judged it before this server. A type that names no one media type (`*/*`,
    `application/*`), which DRF would hand to the JSON parser, is no declaration of JSON."""
    media_type, parameters = parse_header_parameters(content_type)
    charset = parameters.get("charset", "utf-8")
    return media_type == JSONParser.media_type and charset.lower() == "utf-8"


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, refusing a body declared other than UTF-8 JSON (415), one nested
    deeper than MAX_JSON_DEPTH, or one whose object names a member twice.

    The json module raises RecursionError, not ValueError, for nesting near the interpreter's
    recursion limit, which DRF's parser lets through as a 500. Nesting just below that limit
    parses, but would exhaust the stack of whatever walks the data next (validation, an
    error detail that echoes it), so the bound is far below it.

    Of a name sent twice the json module keeps the last value; another reader of the same
    bytes (a proxy that judged the body) may keep the first. Which was meant is a guess, so
    the body is refused, as a query parameter sent twice is.
    """

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        # DRF's own parse, UTF-8 only, with the object hook it does not take.
        declared = media_type or ""
        if not is_utf8_json(declared):
            raise UnsupportedMediaType(declared, detail=NOT_UTF8_JSON)
        try:
            data = json.loads(
                stream.read().decode("utf-8"),
                parse_constant=json.strict_constant if self.strict else None,
                object_pairs_hook=_object_of_unique_names,
            )
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        except ValueError as error:
            raise ParseError(f"JSON parse error - {error}") from None
        if nesting_exceeds(data, MAX_JSON_DEPTH):
            raise ParseError(TOO_DEEP)
        return data


def _object_of_unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise ValueError(f"the name {name!r} appears twice in one object")
        seen.add(name)
    return dict(pairs)


def nesting_exceeds(data: Any, limit: int) -> bool:
    """True if `data` has more than `limit` levels of objects and arrays (walked without
    recursion, so any depth can be measured)."""
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


class RawBodyParser(BaseParser, Generic[Body]):
    """A body handed to the view as sent, never decoded here: `read` says in what form.
    `raw_body` reads it, an empty one too."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:  # a Body, which DRF's type stubs do not foresee for a parser
        if not self.declares(media_type or ""):
            raise UnsupportedMediaType(media_type or "")
        return self.read(stream)

    @classmethod
    def declares(cls, content_type: str) -> bool:
        """True if `content_type` names this parser's type. DRF hands a parser a body whose
        type is a wildcard (`*/*`, `text/*`) too, which names no one type."""
        return parse_header_parameters(content_type)[0] == cls.media_type

    def read(self, stream: IO[bytes]) -> Body:
        raise NotImplementedError


def raw_body(request: Request, parser: type[RawBodyParser[Body]]) -> Body:
    """The request's body as `parser` reads it. DRF hands an empty body over without asking
    a parser (as an empty dict): its type is judged here, so that an empty body of another
    type is refused like a full one."""
    data = request.data
    if not isinstance(data, dict):
        return cast(Body, data)
    if not parser.declares(request.content_type or ""):
        raise UnsupportedMediaType(request.content_type)
    return parser().read(io.BytesIO())


class MarkdownParser(RawBodyParser[bytes]):
    """A `text/markdown` body as the bytes sent, never decoded here: the write path judges
    UTF-8 (INVALID_TEXT) with everything else it judges, whichever writer sent the bytes.
    A body that does not match its Content-Length fails the read (memory_project/wsgi.py)
    and is refused whole, never cut to it."""

    media_type = "text/markdown"

    def read(self, stream: IO[bytes]) -> bytes:
        return bytes(stream.read())


# An archive's bytes wait in memory up to this size, then in a temporary file.
ARCHIVE_SPOOL_BYTES = 8 * 1024 * 1024


class ArchiveParser(RawBodyParser[IO[bytes]]):
    """An `application/gzip` body as a spooled file, positioned at its start, never decoded
    or extracted here: the import reads it as a stream with its own bounds. Its size is
    bounded by REQUEST_MAX_BODY_BYTES, as every body is."""

    media_type = "application/gzip"

    def read(self, stream: IO[bytes]) -> IO[bytes]:
        # Not a `with` block: the view reads the file after this returns, then closes it.
        spool = tempfile.SpooledTemporaryFile(max_size=ARCHIVE_SPOOL_BYTES)  # noqa: SIM115
        shutil.copyfileobj(stream, spool)
        spool.seek(0)
        return spool
