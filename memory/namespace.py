"""The reserved memory namespace: `.zudotext/memory/` and everything under it.

Only the memory routes write the memory document. Every other document route, for the
assistant and for external clients alike, refuses the namespace in any spelling, so the
memory mode (Off included) cannot be bypassed by an ordinary document read or write.

The test is deliberately wider than the store's canonical spelling. A guard that only
recognised the canonical form would let `.ZUDOTEXT/memory/x.md`, `%2Ezudotext%2Fmemory`,
`notes/../.zudotext/memory` or a full-width dot (U+FF0E) through, whenever any layer
(another store adapter, an export on a case-insensitive file system, a later
canonicalisation change) treats it as the same folder. So it:

- unfolds percent-encoding and NFKC round by round, checking every intermediate form,
  deeper than the canonical path allows (a path refused as too deeply encoded may still be
  a memory path, and must be refused as one);
- compares segments under a caseless, compatibility-folded key (close to Unicode's
  NFKC_Casefold: invisible format characters dropped, then NFKC, casefold, NFKC);
- ignores trailing dots and spaces of a segment, which Windows strips;
- looks at the segments both as written and with `..` resolved, so `..` can neither hide a
  memory path nor disguise an ordinary one as the other.
"""

from __future__ import annotations

import unicodedata

from memory.errors import MemoryNamespaceReserved
from memory.models import MEMORY_PATH
from workspaces.paths import REFUSED_CATEGORIES, unfold

# (".zudotext", "memory"): the folder that holds the memory document.
MEMORY_NAMESPACE: tuple[str, ...] = tuple(MEMORY_PATH.split("/")[:-1])
MEMORY_NAMESPACE_PREFIX = "/".join(MEMORY_NAMESPACE) + "/"

# More than the canonical path's rounds: see the module docstring.
NAMESPACE_DECODE_ROUNDS = 8


def _segment_key(segment: str) -> str:
    visible = "".join(
        char for char in segment if unicodedata.category(char) not in REFUSED_CATEGORIES
    )
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", visible).casefold())
    stripped = folded.rstrip(". \t")
    return stripped or folded


_NAMESPACE_KEYS = tuple(_segment_key(segment) for segment in MEMORY_NAMESPACE)


def _keys(text: str) -> list[str]:
    """Segment keys as written: empty and `.` segments dropped, `..` kept."""
    keys = [_segment_key(part) for part in text.replace("\\", "/").split("/")]
    return [key for key in keys if key not in {"", "."}]


def _resolved(keys: list[str]) -> list[str]:
    """Segment keys with each `..` applied; a `..` above the root is dropped, as a server would."""
    resolved: list[str] = []
    for key in keys:
        if key == "..":
            if resolved:
                resolved.pop()
        else:
            resolved.append(key)
    return resolved


def _starts_in_namespace(keys: list[str]) -> bool:
    return tuple(keys[: len(_NAMESPACE_KEYS)]) == _NAMESPACE_KEYS


def is_memory_namespace(raw: str) -> bool:
    """True for every spelling of `.zudotext/memory/` or anything under it.

    Also true for spellings the canonical path refuses for other reasons (no `.md`, a `..`
    segment, too deeply encoded): the namespace refusal comes first, whatever else is wrong.
    """
    text = raw
    for _ in range(NAMESPACE_DECODE_ROUNDS + 1):
        keys = _keys(text)
        if _starts_in_namespace(keys) or _starts_in_namespace(_resolved(keys)):
            return True
        unfolded = unfold(text, strict=False)
        if unfolded == text:
            return False
        text = unfolded
    return False


def memory_namespace_refuse(*raw_paths: str) -> None:
    """Raise MemoryNamespaceReserved if any of the paths is in the memory namespace."""
    for raw in raw_paths:
        if is_memory_namespace(raw):
            raise MemoryNamespaceReserved(prefix=MEMORY_NAMESPACE_PREFIX)
