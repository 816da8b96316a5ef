"""Invisible and lookalike characters: text as a reader sees it, not as its code points.

Two checks must judge text by how it looks. A document path must not display as the
memory document (`.zudotext/memory/memory.md`) while being another path, and memory text
must not display as the end of the recall block. Code points defeat a check on the string
itself: an invisible character (U+034F, a variation selector, a Hangul filler) leaves the
display unchanged, and a lookalike (Cyrillic `o` U+043E, the division slash U+2215, U+2039
for `<`) changes the string but not what a person or a model reads.

Both properties come from the Unicode data that ICU ships (PyICU's API, from the
pyicu-wheels package that bundles ICU), not from a list of our own:
`Default_Ignorable_Code_Point` (the code points a renderer shows as nothing) and the
confusable skeleton of Unicode TR39 (each character mapped to the prototype it is
confusable with, `rn` for `m` included).

Each check asks one question: could this text read as that one (the namespace, the
marker)? The skeleton alone does not answer it once case is ignored too, because
confusability and case do not commute: the table maps the Coptic capital U+2CC6 to `/` but not
its small letter, `m` to `rn` but not `M`, and the lunate sigma U+03F2 to `c` though its
compatibility form reads `o`.
So a character has a few readings (everything the skeleton, compatibility folding and case
mapping reach from it), and a check asks whether some choice of one reading per character
spells what it looks for (`alternatives`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import lru_cache

import icu
from django.core.exceptions import ValidationError

# Control (Cc), format (Cf, zero-width and bidi marks, soft hyphen), surrogate (Cs) and the
# line and paragraph separators (Zl, Zp): invisible in a path or a line of text, and not all
# of them default-ignorable (NUL and the bidi-neutral format characters are not).
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

# No character has more than a handful of readings (ICU 72); the bound only guards against
# a future table with a long chain.
_MAX_READINGS = 64

_SPOOF_CHECKER = icu.SpoofChecker()


def is_default_ignorable(char: str) -> bool:
    """True for a code point with the Unicode property Default_Ignorable_Code_Point."""
    return bool(icu.Char.hasBinaryProperty(char, icu.UProperty.DEFAULT_IGNORABLE_CODE_POINT))


def is_invisible(char: str) -> bool:
    """True for a code point that displays as nothing: default-ignorable, or a control,
    format, surrogate or separator character."""
    return unicodedata.category(char) in INVISIBLE_CATEGORIES or is_default_ignorable(char)


def first_invisible(text: str) -> str | None:
    """The first character of `text` that displays as nothing (`is_invisible`), or None."""
    if text.isascii() and text.isprintable():
        return None  # the common case, judged in C
    return next(filter(is_invisible, text), None)


def display_name_validator(value: str) -> None:
    """Refuse a name a person types (a workspace's, team's, bot's, token's) holding an
    invisible character, as a space name or a document path is refused: `Research` and
    `Re\u200bsearch`, or a right-to-left override that shows `txt.exe` as `exe.txt`, would be
    two names that read alike. A Django validator, so the API and the admin share it."""
    if (char := first_invisible(value)) is not None:
        raise ValidationError(
            f"Holds an invisible character (U+{ord(char):04X}); a name must read as what it is.",
            code="invisible_character",
        )


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _skeleton(text: str) -> str:
    return str(_SPOOF_CHECKER.getSkeleton(0, text))


# In this order, for `readings`: the confusables table first, then compatibility, then case
# (both ways: Cherokee folds to its capitals, Coptic U+2CC6 reads `/` but its small letter not).
_READING_STEPS: tuple[Callable[[str], str], ...] = (
    _skeleton,
    _nfkc,
    str.casefold,
    str.lower,
    str.upper,
)


@lru_cache(maxsize=16384)
def _plain_reading(char: str) -> str:
    """TR39's caseless skeleton, `skeleton(NFKC_Casefold(char))`, repeated until it stops
    changing (a prototype need not be folded itself: `0` -> `O` -> `o`)."""
    text = char
    for _ in range(_MAX_READINGS):
        folded = _skeleton(_nfkc(_nfkc(text).casefold()))
        if folded == text:
            break
        text = folded
    return text


@lru_cache(maxsize=16384)
def readings(char: str) -> tuple[str, ...]:
    """Every string `char` reads as: itself and what the confusable skeleton, compatibility
    folding and case mapping (either way) reach from it, in any order; nearest first (fewest
    steps, the skeleton's before the others'). Only the empty string for an invisible
    character."""
    if is_invisible(char):
        return ("",)
    found = [char]
    for text in found:
        if len(found) >= _MAX_READINGS:
            break
        for step in _READING_STEPS:
            reached = step(text)
            if reached not in found:
                found.append(reached)
    return tuple(found)


def alphabet(*targets: str) -> frozenset[str]:
    """The characters `targets` are made of once folded: what a check looks for."""
    return frozenset("".join(_plain_reading(char) for target in targets for char in target))


@lru_cache(maxsize=16384)
def alternatives(char: str, toward: frozenset[str]) -> tuple[str, ...]:
    """What `char` may read as to a reader looking for characters of `toward`: each of its
    readings made of them, nearest first (the Greek capital upsilon U+03A5 reads `Y`,
    and as the capital of U+03C5 also `u`), else its plain caseless skeleton; only the empty
    string if it is invisible."""
    if is_invisible(char):
        return ("",)
    inside = tuple(reading for reading in readings(char) if reading and set(reading) <= toward)
    return inside or (_plain_reading(char),)


def fold(text: str, toward: frozenset[str]) -> str:
    """`text` as a reader looking for characters of `toward` most plainly sees it: each
    character's nearest reading."""
    return "".join(alternatives(char, toward)[0] for char in text)
