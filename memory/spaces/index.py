"""A memory space's index and autoload set: pure functions over paths and bodies.

`document_index_fields` reads a Markdown document's title, description and tags for the
listing and a bot's index block; `autoload_select` picks the documents a bot's spec names
by glob. Neither touches a store: the caller lists and reads, these decide.

Front matter is a YAML mapping between a `---` line at the very start of the body and the
next `---` (or `...`) line, parsed by PyYAML in safe mode and only if it is at most
`FRONT_MATTER_MAX_BYTES` long. Anything else (no closing line, a block too long, YAML that
does not parse, a value that is not a mapping) is ignored as front matter, never an error:
the document is still indexed, from its first H1 or its file name. Only scalar values are
read (a string, number, boolean or date, coerced to text), so an aliased structure
(a "billion laughs" block) is never walked.

Autoload patterns are globs over a space's document paths, matched case-sensitively:
`*` is any run of characters within one segment (it never crosses `/`), `?` one character
other than `/`, and `**` as a whole segment any number of segments, none included
(`notes/**/*.md` matches `notes/a.md` and `notes/x/y/a.md`). There are no character classes
or escapes: `[`, `]` and `\\` are literal characters, and `\\` is refused, as it is the other
separator a client might mean. Matching is by segments with the classic two-pointer
wildcard scan, so its time is bounded by the lengths of path and pattern (no regex, no
backtracking blow-up on `*a*a*a*b`).
"""

from __future__ import annotations

import datetime
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from memory.errors import AutoloadPatternInvalid
from workspaces.lookalikes import is_invisible
from workspaces.paths import DOCUMENT_SUFFIX, MAX_PATH_BYTES

FRONT_MATTER_MAX_BYTES = 16 * 1024
TITLE_MAX_CHARS = 200
DESCRIPTION_MAX_CHARS = 1000
TAG_MAX_CHARS = 64
MAX_TAGS = 32
MAX_AUTOLOAD_PATTERNS = 64

_FENCES = ("```", "~~~")
# A front matter delimiter line: `---` opens it, `---` or `...` closes it.
_DELIMITER = re.compile(r"^(?:---|\.\.\.)[ \t]*+\r?$", re.MULTILINE)


@dataclass(frozen=True)
class IndexFields:
    title: str
    description: str
    tags: list[str]


def document_index_fields(path: str, body: str) -> IndexFields | None:
    """Return the index fields of the document at `path`, or None if it is not Markdown.

    The title is the front matter's `title`, else the first `# ` heading outside a code
    fence, else the file name without `.md`. Description and tags come from the front
    matter only; tags may be a list or a comma-separated string.
    """
    if not path.endswith(DOCUMENT_SUFFIX):
        return None
    front_matter, rest = _front_matter_split(body.removeprefix("\ufeff"))
    title = _text(front_matter.get("title"), TITLE_MAX_CHARS) or _first_heading(rest)
    stem = path.rsplit("/", 1)[-1].removesuffix(DOCUMENT_SUFFIX)
    return IndexFields(
        title=title or stem,
        description=_text(front_matter.get("description"), DESCRIPTION_MAX_CHARS),
        tags=_tags(front_matter.get("tags")),
    )


def autoload_select(paths: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """Return the paths any of `patterns` matches, sorted and each once.

    Every pattern is validated first (AutoloadPatternInvalid names the first bad one by
    its index); duplicates count once, and no patterns select nothing.
    """
    compiled = list(dict.fromkeys(_pattern_segments(index, p) for index, p in enumerate(patterns)))
    if len(compiled) > MAX_AUTOLOAD_PATTERNS:
        raise AutoloadPatternInvalid(reason="too_many_patterns", limit=MAX_AUTOLOAD_PATTERNS)
    return sorted(
        {path for path in paths if any(_path_matches(path.split("/"), p) for p in compiled)}
    )


def _front_matter_split(body: str) -> tuple[dict[Any, Any], str]:
    """The front matter as a mapping and the body after it; ({}, body) when there is none
    usable, so that the first heading is then looked for in the whole body."""
    opening = _DELIMITER.match(body)
    if opening is None or not opening[0].startswith("---") or opening.end() == len(body):
        return {}, body
    start = opening.end() + 1
    # A block of at most FRONT_MATTER_MAX_BYTES has at most that many characters; the end
    # bound would let `$` match where the bound cuts a line, hence the check after it.
    closing = _DELIMITER.search(body, start, start + FRONT_MATTER_MAX_BYTES + 8)
    if closing is None or body[closing.end() : closing.end() + 1] not in ("", "\n"):
        return {}, body
    block = body[start : closing.start()]
    if len(block.encode()) > FRONT_MATTER_MAX_BYTES:
        return {}, body
    mapping = _yaml_mapping(block)
    return (mapping, body[closing.end() + 1 :]) if mapping else ({}, body)


def _yaml_mapping(block: str) -> dict[Any, Any]:
    try:
        loaded = yaml.safe_load(block)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        # Malformed YAML, and the constructors' own refusals (a date like 2024-13-45).
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _text(value: object, limit: int) -> str:
    """A scalar as one line of at most `limit` characters; anything else as ""."""
    if isinstance(value, bool | int | float | str | datetime.date):
        return " ".join(str(value).split())[:limit].strip()
    return ""


def _tags(value: object) -> list[str]:
    items: list[object] = []
    if isinstance(value, str):
        items = list(value.split(","))
    elif isinstance(value, list):
        items = value
    tags = (_text(item, TAG_MAX_CHARS) for item in items)
    return list(dict.fromkeys(tag for tag in tags if tag))[:MAX_TAGS]


def _first_heading(body: str) -> str:
    fence = ""
    for line in body.split("\n"):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = ""
            continue
        if stripped.startswith(_FENCES):
            fence = stripped[:3]
            continue
        # An ATX heading of level 1: up to three spaces of indent, `#`, a space or tab.
        indent = len(line) - len(line.lstrip(" "))
        heading = line.lstrip(" ")
        if indent <= 3 and heading.startswith(("# ", "#\t")):
            # A closing run of `#` is not part of the title.
            return _text(heading[2:].strip().rstrip("#"), TITLE_MAX_CHARS)
    return ""


def _pattern_segments(index: int, pattern: object) -> tuple[str, ...]:
    """Validate one pattern and split it into segments (dropping empty and `.` ones)."""
    if not isinstance(pattern, str):
        raise AutoloadPatternInvalid(reason="not_text", index=index)
    normal = unicodedata.normalize("NFKC", pattern)
    if len(normal.encode()) > MAX_PATH_BYTES:
        raise AutoloadPatternInvalid(reason="too_long", index=index, limitBytes=MAX_PATH_BYTES)
    if any(is_invisible(char) for char in normal):
        raise AutoloadPatternInvalid(reason="control_character", index=index)
    if "\\" in normal:
        raise AutoloadPatternInvalid(reason="backslash", index=index)
    if normal.startswith("/"):
        raise AutoloadPatternInvalid(reason="absolute", index=index)
    segments = tuple(part for part in normal.split("/") if part not in {"", "."})
    if not segments:
        raise AutoloadPatternInvalid(reason="empty", index=index)
    if ".." in segments:
        raise AutoloadPatternInvalid(reason="dot_dot_segment", index=index)
    if any("**" in segment and segment != "**" for segment in segments):
        raise AutoloadPatternInvalid(reason="globstar_in_segment", index=index)
    # Consecutive `**` segments mean the same as one.
    return tuple(
        segment
        for position, segment in enumerate(segments)
        if not (segment == "**" and position and segments[position - 1] == "**")
    )


def _path_matches(path: Sequence[str], pattern: Sequence[str]) -> bool:
    """Match path segments against pattern segments, `**` spanning any number of them.

    Dynamic programming over (pattern prefix, path prefix): O(len(path) * len(pattern))
    segment matches.
    """
    # reachable[j]: the pattern's first i segments can match the path's first j.
    reachable = [True] + [False] * len(path)
    for segment in pattern:
        if segment == "**":
            for j in range(1, len(path) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [
                reachable[j] and _segment_matches(path[j], segment) for j in range(len(path))
            ]
    return reachable[-1]


def _segment_matches(text: str, pattern: str) -> bool:
    """Glob `pattern` (`*`, `?`) against one segment, in O(len(text) * len(pattern))."""
    t = p = 0
    star = -1  # the pattern position after the last `*` seen
    star_text = 0  # where in the text that `*` is currently made to end
    while t < len(text):
        if p < len(pattern) and pattern[p] in ("?", text[t]) and pattern[p] != "*":
            t += 1
            p += 1
        elif p < len(pattern) and pattern[p] == "*":
            p += 1
            star, star_text = p, t
        elif star != -1:
            star_text += 1
            t, p = star_text, star
        else:
            return False
    return all(char == "*" for char in pattern[p:])
