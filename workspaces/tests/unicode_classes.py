"""Whole classes of characters for the tests of invisible and lookalike spellings.

The tests generate spellings from these classes, not from a few examples: a check that
holds for every member of the class holds for the spellings an outside reviewer picks.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from functools import cache

import icu

# Default_Ignorable_Code_Point, as Unicode 15.0's DerivedCoreProperties.txt lists it (the
# version of the ICU the code uses): written out here, so the tests do not take the class
# from the library they test.
DEFAULT_IGNORABLE_RANGES: list[tuple[int, int]] = [
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
]

DEFAULT_IGNORABLE: list[str] = [
    chr(code) for first, last in DEFAULT_IGNORABLE_RANGES for code in range(first, last + 1)
]


@cache
def _visible() -> list[str]:
    """Assigned characters, less the invisible ones (their own class, tested as such)."""
    return [
        chr(code)
        for code in range(0x110000)
        if unicodedata.category(chr(code)) not in {"Cc", "Cf", "Cn", "Co", "Cs", "Zl", "Zp"}
    ]


@cache
def lookalikes(target: str) -> tuple[str, ...]:
    """Every visible character that reads as `target` (one character): its compatibility
    and case forms, and the characters Unicode's confusables table (TR39, as ICU ships it)
    gives the same skeleton, directly or after compatibility and case folding."""
    return tuple(sorted(_lookalike_table()[target]))


@cache
def _lookalike_table() -> dict[str, set[str]]:
    checker = icu.SpoofChecker()
    targets = "<>/\\-. " + "abcdefghijklmnopqrstuvwxyz"
    by_skeleton = {str(checker.getSkeleton(0, target)): target for target in targets}
    table: dict[str, set[str]] = defaultdict(set)
    for char in _visible():
        folded = unicodedata.normalize("NFKC", char).casefold()
        skeletons = {str(checker.getSkeleton(0, char)), str(checker.getSkeleton(0, folded))}
        for form in {folded, *skeletons}:
            if form in by_skeleton:
                table[by_skeleton[form]].add(char)
            if form in targets:
                table[form].add(char)
    return table
