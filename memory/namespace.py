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
- compares the path as it looks (`workspaces.lookalikes.fold`): invisible characters
  dropped, then compatibility-, case- and confusable-folded (the TR39 skeleton), so a
  Cyrillic `o` (U+043E), `rn` for `m`, a variation selector or a Hangul filler inside a
  segment, or the division slash U+2215 for `/`, cannot make a path that displays as the
  memory document but is judged as an ordinary note (separators are found after folding,
  for that last reason; a character with several readings counts as any of them);
- ignores trailing dots and spaces of a segment, which Windows strips;
- looks at the segments both as written and with `..` resolved, so `..` can neither hide a
  memory path nor disguise an ordinary one as the other.
"""

from __future__ import annotations

from memory.errors import MemoryNamespaceReserved
from memory.models import MEMORY_PATH
from workspaces.lookalikes import alphabet, alternatives, fold
from workspaces.paths import unfold

# (".zudotext", "memory"): the folder that holds the memory document.
MEMORY_NAMESPACE: tuple[str, ...] = tuple(MEMORY_PATH.split("/")[:-1])
MEMORY_NAMESPACE_PREFIX = "/".join(MEMORY_NAMESPACE) + "/"

# More than the canonical path's rounds: see the module docstring.
NAMESPACE_DECODE_ROUNDS = 8

_SEPARATORS = frozenset("/\\")
# A segment is judged without its trailing dots and spaces, which Windows strips.
_TRAILING = ". \t"
_STRUCTURE = _SEPARATORS | frozenset(_TRAILING)
# What a path is folded toward: the namespace's characters and the structural ones.
_ALPHABET = alphabet(MEMORY_NAMESPACE_PREFIX) | _STRUCTURE
_NAMESPACE_KEYS = tuple(fold(segment, _ALPHABET) for segment in MEMORY_NAMESPACE)
_OTHER = "other"
_PARENT = ".."

# A segment as read: one tuple of alternative readings per visible character.
Segment = list[tuple[str, ...]]


class _AmbiguousStructure(Exception):
    """A character that may or may not read as a separator, a dot or a space."""


def _segments(text: str) -> list[Segment]:
    """`text` split into segments after folding; invisible characters dropped."""
    segments: list[Segment] = [[]]
    for char in text:
        readings = alternatives(char, _ALPHABET)
        if len(readings) > 1:
            if any(_STRUCTURE.intersection(reading) for reading in readings):
                raise _AmbiguousStructure
            segments[-1].append(readings)
            continue
        for piece in readings[0]:
            if piece in _SEPARATORS:
                segments.append([])
            else:
                segments[-1].append((piece,))
    return segments


def _can_spell(segment: Segment, target: str) -> bool:
    """True if some choice of one reading per character of `segment` spells `target`."""
    positions = {0}
    for readings in segment:
        positions = {
            at + len(reading)
            for at in positions
            for reading in readings
            if target.startswith(reading, at)
        }
    return len(target) in positions


def _key(segment: Segment) -> frozenset[str] | None:
    """What a segment may read as: None for an empty or `.` segment (dropped), else a set
    of `..`, a namespace key or `other`."""
    plain = "".join(readings[0] for readings in segment)
    stripped = plain.rstrip(_TRAILING)
    if not stripped:
        return None if plain in {"", "."} else frozenset({_PARENT if plain == ".." else _OTHER})
    core = segment[: len(segment) - (len(plain) - len(stripped))]
    return frozenset({_OTHER, *(key for key in _NAMESPACE_KEYS if _can_spell(core, key))})


def _starts_in_namespace(keys: list[frozenset[str]]) -> bool:
    return len(keys) >= len(_NAMESPACE_KEYS) and all(
        wanted in key for wanted, key in zip(_NAMESPACE_KEYS, keys, strict=False)
    )


def _reads_as_namespace(text: str) -> bool:
    """True if `text` reads as a path under the namespace, with its segments as written
    (`..` kept) or with each `..` applied (a `..` above the root is dropped, as a server
    would)."""
    try:
        segments = _segments(text)
    except _AmbiguousStructure:
        # No such character in the Unicode data today; were one added, refuse rather
        # than guess where its path's segments are.
        return True
    keys = [key for segment in segments if (key := _key(segment)) is not None]
    resolved: list[frozenset[str]] = []
    for key in keys:
        if key == {_PARENT}:
            if resolved:
                resolved.pop()
        else:
            resolved.append(key)
    return _starts_in_namespace(keys) or _starts_in_namespace(resolved)


def is_memory_namespace(raw: str) -> bool:
    """True for every spelling of `.zudotext/memory/` or anything under it.

    Also true for spellings the canonical path refuses for other reasons (no `.md`, a `..`
    segment, too deeply encoded): the namespace refusal comes first, whatever else is wrong.
    """
    text = raw
    for _ in range(NAMESPACE_DECODE_ROUNDS + 1):
        if _reads_as_namespace(text):
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
