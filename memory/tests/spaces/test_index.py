"""The index fields of a space document and the autoload selection: pure functions, tables
and properties. Nothing here touches a store."""

from __future__ import annotations

import fnmatch
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.errors import AutoloadPatternInvalid
from memory.spaces.index import (
    DESCRIPTION_MAX_CHARS,
    FRONT_MATTER_MAX_BYTES,
    MAX_AUTOLOAD_PATTERNS,
    MAX_TAGS,
    TAG_MAX_CHARS,
    TITLE_MAX_CHARS,
    IndexFields,
    autoload_select,
    document_index_fields,
)

BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]',
        *(
            f"{chr(98 + level)}: &{chr(98 + level)} [{', '.join(['*' + chr(97 + level)] * 9)}]"
            for level in range(8)
        ),
        "title: *i",
        "tags: *i",
        "description: *i",
    ]
)

INDEX_CASES: dict[str, tuple[str, str, IndexFields | None]] = {
    "front matter gives all three": (
        "notes/deploy.md",
        "---\ntitle: Deploy\ndescription: How we ship\ntags: [ops, release]\n---\n# Other\n",
        IndexFields("Deploy", "How we ship", ["ops", "release"]),
    ),
    "tags as a comma string, trimmed, duplicates once": (
        "a.md",
        "---\ntags: ops,  release , ops,\n---\n",
        IndexFields("a", "", ["ops", "release"]),
    ),
    "scalars are coerced to text": (
        "a.md",
        "---\ntitle: 2024\ndescription: 2024-06-01\ntags: [1, true, 2.5]\n---\n",
        IndexFields("2024", "2024-06-01", ["1", "True", "2.5"]),
    ),
    "a multi-line title is one line": (
        "a.md",
        "---\ntitle: |\n  first\n  second\n---\n",
        IndexFields("first second", "", []),
    ),
    "no title in front matter falls back to the H1": (
        "a.md",
        "---\ndescription: d\n---\n\nintro\n# The Heading\n",
        IndexFields("The Heading", "d", []),
    ),
    "a non-scalar title falls back to the H1": (
        "a.md",
        "---\ntitle: {nested: true}\ntags: [[a], b]\n---\n# H\n",
        IndexFields("H", "", ["b"]),
    ),
    "no front matter: the first H1": (
        "a.md",
        "intro\n## Level two\n# First\n# Second\n",
        IndexFields("First", "", []),
    ),
    "an H1 inside a code fence is not a title": (
        "a.md",
        "```bash\n# a comment\n```\n~~~\n# another\n~~~\n# Real\n",
        IndexFields("Real", "", []),
    ),
    "closing hashes and indent of an ATX heading": (
        "a.md",
        "   #   Spaced title  ##\n",
        IndexFields("Spaced title", "", []),
    ),
    "four spaces of indent is code, not a heading": (
        "dir/x.md",
        "    # code\n",
        IndexFields("x", "", []),
    ),
    "no heading: the file stem": ("dir/My Note.md", "just text\n", IndexFields("My Note", "", [])),
    "#hashtag is not a heading": ("t.md", "#hashtag\n", IndexFields("t", "", [])),
    "front matter must start the body": (
        "a.md",
        "\n---\ntitle: late\n---\n",
        IndexFields("a", "", []),
    ),
    "a byte-order mark before it is allowed": (
        "a.md",
        "\ufeff---\ntitle: BOM\n---\n",
        IndexFields("BOM", "", []),
    ),
    "closing with ...": ("a.md", "---\ntitle: Dots\n...\nbody\n", IndexFields("Dots", "", [])),
    "CRLF line endings": (
        "a.md",
        "---\r\ntitle: Windows\r\n---\r\n# H\r\n",
        IndexFields("Windows", "", []),
    ),
    "an unclosed block is not front matter": (
        "a.md",
        "---\ntitle: Open\n# Heading\n",
        IndexFields("Heading", "", []),
    ),
    "malformed YAML is ignored": (
        "a.md",
        "---\ntitle: [unclosed\n---\n# Fallback\n",
        IndexFields("Fallback", "", []),
    ),
    "a YAML list is not a mapping": ("a.md", "---\n- a\n- b\n---\n", IndexFields("a", "", [])),
    "an invalid date is ignored, not raised": (
        "a.md",
        "---\ntitle: 2024-13-45\n---\n",
        IndexFields("a", "", []),
    ),
    "unsafe tags are not constructed": (
        "a.md",
        "---\ntitle: !!python/object/apply:os.system ['true']\n---\n# Safe\n",
        IndexFields("Safe", "", []),
    ),
    "aliases are never walked": ("a.md", f"---\n{BILLION_LAUGHS}\n---\n", IndexFields("a", "", [])),
    "a thematic break is not front matter": (
        "a.md",
        "---\n\nSome text\n\n---\n# After\n",
        IndexFields("After", "", []),
    ),
    "not Markdown is not indexed": ("a.txt", "---\ntitle: T\n---\n", None),
    "not Markdown by case": ("a.MD", "# T\n", None),
}


@pytest.mark.parametrize("case", sorted(INDEX_CASES))
def test_index_fields(case: str) -> None:
    path, body, expected = INDEX_CASES[case]

    assert document_index_fields(path, body) == expected


def test_values_are_bounded() -> None:
    tags = ", ".join(f"tag{index}-{'x' * 100}" for index in range(MAX_TAGS + 10))
    body = f"---\ntitle: {'t' * 1000}\ndescription: {'d' * 5000}\ntags: {tags}\n---\n"

    fields = document_index_fields("a.md", body)

    assert fields is not None
    assert len(fields.title) == TITLE_MAX_CHARS
    assert len(fields.description) == DESCRIPTION_MAX_CHARS
    assert len(fields.tags) == MAX_TAGS
    assert all(len(tag) == TAG_MAX_CHARS for tag in fields.tags)


def test_a_heading_title_is_bounded_too() -> None:
    fields = document_index_fields("a.md", f"# {'h' * 1000}\n")

    assert fields is not None
    assert len(fields.title) == TITLE_MAX_CHARS


def test_front_matter_over_the_bound_is_ignored() -> None:
    filler = "x" * (FRONT_MATTER_MAX_BYTES + 1)
    body = f"---\ntitle: Big\nnote: {filler}\n---\n# Fallback\n"

    assert document_index_fields("a.md", body) == IndexFields("Fallback", "", [])


def test_front_matter_just_under_the_bound_is_read() -> None:
    block = "title: Fits\nnote: "
    block += "x" * (FRONT_MATTER_MAX_BYTES - len(block) - 1) + "\n"
    assert len(block.encode()) == FRONT_MATTER_MAX_BYTES

    assert document_index_fields("a.md", f"---\n{block}---\n") == IndexFields("Fits", "", [])


@given(st.text())
def test_any_body_is_indexed_without_error(body: str) -> None:
    fields = document_index_fields("notes/any.md", body)

    assert fields is not None
    assert fields.title
    assert len(fields.title) <= TITLE_MAX_CHARS
    assert len(fields.description) <= DESCRIPTION_MAX_CHARS
    assert len(fields.tags) <= MAX_TAGS
    assert "\n" not in fields.title


@given(st.text(alphabet=st.sampled_from("-.:#[]{}&*!|>'\"%@`, \n\tab1")))
def test_any_yaml_like_front_matter_is_indexed_without_error(block: str) -> None:
    assert document_index_fields("a.md", f"---\n{block}\n---\n") is not None


PATHS = [
    "README.md",
    "notes/a.md",
    "notes/b.md",
    "notes/deep/c.md",
    "notes/deep/er/d.md",
    "other/notes/e.md",
    "my.app/f.md",
    "x[1].md",
]

AUTOLOAD_CASES: dict[str, tuple[list[str], list[str]]] = {
    "no patterns select nothing": ([], []),
    "* stays in its segment": (["notes/*"], ["notes/a.md", "notes/b.md"]),
    "* at the top": (["*"], ["README.md", "x[1].md"]),
    "*.md at the top only": (["*.md"], ["README.md", "x[1].md"]),
    "** spans segments": (
        ["notes/**"],
        ["notes/a.md", "notes/b.md", "notes/deep/c.md", "notes/deep/er/d.md"],
    ),
    "** may span none": (["notes/**/c.md"], ["notes/deep/c.md"]),
    "** in the middle, zero segments": (["notes/**/a.md"], ["notes/a.md"]),
    "leading **": (["**/e.md"], ["other/notes/e.md"]),
    "** alone is everything": (["**"], sorted(PATHS)),
    "? is one character": (["notes/?.md"], ["notes/a.md", "notes/b.md"]),
    "exact path": (["notes/a.md"], ["notes/a.md"]),
    "a dot in a segment is literal": (["my.app/*"], ["my.app/f.md"]),
    "brackets are literal": (["x[1].md"], ["x[1].md"]),
    "case-sensitive": (["readme.md"], []),
    "duplicates and . segments count once": (
        ["notes/*", "./notes/*", "notes//*", "notes/*"],
        ["notes/a.md", "notes/b.md"],
    ),
    "union, sorted": (["other/**", "README.md"], ["README.md", "other/notes/e.md"]),
    "consecutive ** are one": (["notes/**/**/d.md"], ["notes/deep/er/d.md"]),
}


@pytest.mark.parametrize("case", sorted(AUTOLOAD_CASES))
def test_autoload_select(case: str) -> None:
    patterns, expected = AUTOLOAD_CASES[case]

    assert autoload_select(PATHS, patterns) == expected


INVALID_PATTERNS: dict[str, tuple[object, str]] = {
    "empty": ("", "empty"),
    "only separators": ("/./", "absolute"),
    "only dots": ("./.", "empty"),
    "absolute": ("/notes/*", "absolute"),
    "dot dot": ("notes/../secret/*", "dot_dot_segment"),
    "leading dot dot": ("../escape", "dot_dot_segment"),
    "backslash": ("notes\\*", "backslash"),
    "NUL": ("notes/\x00*", "control_character"),
    "zero-width space": ("no\u200btes/*", "control_character"),
    "newline": ("notes/*\n", "control_character"),
    "globstar in a segment": ("notes/a**", "globstar_in_segment"),
    "too long": ("a/" * 600, "too_long"),
    "not text": (None, "not_text"),
}


@pytest.mark.parametrize("case", sorted(INVALID_PATTERNS))
def test_an_invalid_pattern_is_refused_naming_it(case: str) -> None:
    pattern, reason = INVALID_PATTERNS[case]

    with pytest.raises(AutoloadPatternInvalid) as raised:
        autoload_select(PATHS, ["notes/*", pattern])  # type: ignore[list-item]

    error = raised.value
    assert (error.code, error.detail["reason"], error.detail["index"]) == (
        "AUTOLOAD_PATTERN_INVALID",
        reason,
        1,
    )


def test_an_invalid_pattern_is_refused_even_with_no_paths() -> None:
    with pytest.raises(AutoloadPatternInvalid):
        autoload_select([], ["../x"])


def test_too_many_distinct_patterns_are_refused() -> None:
    patterns = [f"p{index}/*" for index in range(MAX_AUTOLOAD_PATTERNS + 1)]

    with pytest.raises(AutoloadPatternInvalid) as raised:
        autoload_select(PATHS, patterns)

    assert raised.value.detail == {"reason": "too_many_patterns", "limit": MAX_AUTOLOAD_PATTERNS}


def test_as_many_patterns_as_allowed_after_duplicates_pass() -> None:
    patterns = [f"p{index}/*" for index in range(MAX_AUTOLOAD_PATTERNS)] * 3

    assert autoload_select(PATHS, patterns) == []


@pytest.mark.timeout(30)
def test_many_stars_against_a_long_segment_do_not_blow_up() -> None:
    path = "a" * 250 + ".md"

    assert autoload_select([path], ["*a" * 100 + "*b"]) == []


segment = st.text(alphabet="ab.", min_size=1, max_size=4).filter(lambda s: s not in {".", ".."})
paths = st.lists(segment, min_size=1, max_size=4).map("/".join)
pattern_segment = st.text(alphabet="ab.*?", min_size=1, max_size=4).filter(
    lambda s: s not in {".", ".."} and "**" not in s
)
patterns = st.lists(pattern_segment, min_size=1, max_size=4).map("/".join)


@given(path=paths, pattern=patterns)
def test_single_star_agrees_with_fnmatch_segment_by_segment(path: str, pattern: str) -> None:
    path_parts, pattern_parts = path.split("/"), pattern.split("/")
    expected = len(path_parts) == len(pattern_parts) and all(
        re.fullmatch(fnmatch.translate(p), s, re.DOTALL)
        for s, p in zip(path_parts, pattern_parts, strict=True)
    )

    assert autoload_select([path], [pattern]) == ([path] if expected else [])


@given(path=paths, pattern=patterns)
def test_star_never_crosses_a_separator(path: str, pattern: str) -> None:
    if autoload_select([path], [pattern]):
        assert path.count("/") == pattern.count("/")


@given(path=paths, pattern=patterns, prefix=st.lists(segment, max_size=3))
def test_a_leading_globstar_matches_under_any_prefix(
    path: str, pattern: str, prefix: list[str]
) -> None:
    deeper = "/".join([*prefix, path])

    assert bool(autoload_select([deeper], [f"**/{pattern}"])) >= bool(
        autoload_select([path], [pattern])
    )


@given(all_paths=st.lists(paths), chosen=st.lists(patterns, max_size=5))
def test_the_selection_is_a_sorted_unique_subset_and_the_union_of_its_patterns(
    all_paths: list[str], chosen: list[str]
) -> None:
    selected = autoload_select(all_paths, chosen)

    assert selected == sorted(set(selected))
    assert set(selected) <= set(all_paths)
    union = set().union(*(autoload_select(all_paths, [p]) for p in chosen))
    assert set(selected) == union
