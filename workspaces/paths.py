"""Document paths: the one canonical spelling every route stores and looks up.

A document has exactly one spelling. Clients reach the store through URLs, JSON bodies,
Windows tools and copy-paste, so the same intent arrives as `notes/a.md`, `/notes/a.md`,
`notes\\a.md`, `notes/./a.md`, `notes%2Fa.md` or with full-width letters. The store is keyed
on the exact string, so without one canonical form two spellings would be two documents,
and a check made on one spelling would not hold for the other.

The steps, in order:

1. percent-decode and apply Unicode NFKC, repeated until nothing changes, at most
   `DECODE_ROUNDS` times (a path still changing after that is refused, not decoded
   further, so a canonical path never decodes to something else later);
2. turn backslashes into `/`;
3. refuse control and format characters (NUL, zero-width space, soft hyphen, ...) and
   every other default-ignorable code point (U+034F, variation selectors, Hangul fillers,
   ...): each displays as nothing, so a path holding one looks like another path;
4. split on `/`, dropping empty and `.` segments (and so a leading `/`);
5. refuse a `..` segment, an empty path, an over-long segment or path, and anything that
   is not a Markdown document.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import unquote

from workspaces.errors import InvalidDocumentPath
from workspaces.lookalikes import INVISIBLE_CATEGORIES, is_default_ignorable

DECODE_ROUNDS = 3
MAX_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 1024
# A bound on the work done for one raw path before it is even decoded: generous enough for
# a maximal path percent-encoded three times over.
MAX_RAW_CHARS = 16 * 1024
DOCUMENT_SUFFIX = ".md"


def unfold(text: str, *, strict: bool) -> str:
    """One round: percent-decode as UTF-8, then NFKC.

    With `strict`, an escape that is not valid UTF-8 raises UnicodeDecodeError; otherwise it
    becomes U+FFFD.
    """
    decoded = unquote(text, encoding="utf-8", errors="strict" if strict else "replace")
    return unicodedata.normalize("NFKC", decoded)


def path_segments(text: str) -> list[str]:
    """Split a decoded path on `/` and `\\`, dropping empty and `.` segments. `..` is kept."""
    return [part for part in text.replace("\\", "/").split("/") if part not in {"", "."}]


def _unfolded(raw: str) -> str:
    """`raw` unfolded (`unfold`) until it no longer changes, or InvalidDocumentPath."""
    text = raw
    try:
        for _ in range(DECODE_ROUNDS):
            unfolded = unfold(text, strict=True)
            if unfolded == text:
                return text
            text = unfolded
        if unfold(text, strict=True) != text:
            raise InvalidDocumentPath(reason="too_deeply_encoded")
    except UnicodeDecodeError:
        raise InvalidDocumentPath(reason="invalid_encoding") from None
    return text


def _canonical_segments(raw: str) -> list[str]:
    """Steps 1 to 5 short of the Markdown rule: the canonical segments of `raw` (none for
    an empty path), or InvalidDocumentPath."""
    if not isinstance(raw, str):
        raise InvalidDocumentPath(reason="not_text")
    if len(raw) > MAX_RAW_CHARS:
        raise InvalidDocumentPath(reason="too_long")
    # ASCII without `%` unfolds to itself (nothing to decode, and NFKC leaves ASCII as it
    # is): most paths skip the rounds.
    text = raw if raw.isascii() and "%" not in raw else _unfolded(raw)
    # Printable ASCII (most paths) holds no invisible and no default-ignorable code point:
    # the per-character look-ups are for the rest.
    if not (text.isascii() and text.isprintable()):
        if any(unicodedata.category(char) in INVISIBLE_CATEGORIES for char in text):
            raise InvalidDocumentPath(reason="control_character")
        if any(is_default_ignorable(char) for char in text):
            raise InvalidDocumentPath(reason="invisible_character")
    segments = path_segments(text)
    if ".." in segments:
        raise InvalidDocumentPath(reason="dot_dot_segment")
    path_bytes = len("/".join(segments).encode())
    # No segment is longer than the whole path: most paths need no look at each segment.
    if path_bytes > MAX_SEGMENT_BYTES and any(
        len(segment.encode()) > MAX_SEGMENT_BYTES for segment in segments
    ):
        raise InvalidDocumentPath(reason="segment_too_long", limitBytes=MAX_SEGMENT_BYTES)
    if path_bytes > MAX_PATH_BYTES:
        raise InvalidDocumentPath(reason="too_long", limitBytes=MAX_PATH_BYTES)
    return segments


def canonical_document_path(raw: str) -> str:
    """Return the canonical spelling of a document path, or raise InvalidDocumentPath.

    The result is a fixed point: canonical_document_path(result) == result.
    """
    segments = _canonical_segments(raw)
    if not segments:
        raise InvalidDocumentPath(reason="empty")
    path = "/".join(segments)
    if not path.endswith(DOCUMENT_SUFFIX) or segments[-1] == DOCUMENT_SUFFIX:
        raise InvalidDocumentPath(reason="not_markdown")
    return path


def document_path_require_canonical(raw: str) -> str:
    """Return `raw` if it is the canonical spelling of a valid path; refuse anything else.

    One document, one spelling: a route never silently stores or reads under a spelling
    other than the one sent. A valid path sent in another spelling is refused with the
    canonical one in `detail.canonical`, so the client can correct itself.
    """
    return _spelling_require(raw, canonical_document_path(raw))


def directory_path_require_canonical(raw: str) -> str:
    """Return `raw` if it is the canonical spelling of a directory prefix ("" for the root);
    refuse anything else, as `document_path_require_canonical` does.

    The same steps as a document path without the Markdown rule: no leading or trailing
    `/`, so `notes` and not `notes/`.
    """
    return _spelling_require(raw, "/".join(_canonical_segments(raw)))


def _spelling_require(raw: str, canonical: str) -> str:
    if canonical != raw:
        raise InvalidDocumentPath(
            "The path is not in its canonical spelling; send detail.canonical instead.",
            reason="not_canonical",
            canonical=canonical,
        )
    return canonical
