"""Document path canonicalisation: one document, one spelling."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from workspaces.errors import InvalidDocumentPath
from workspaces.paths import (
    canonical_document_path,
    directory_path_require_canonical,
    document_path_require_canonical,
    unfold,
)
from workspaces.tests.unicode_classes import DEFAULT_IGNORABLE

CANONICALISED = [
    ("notes/a.md", "notes/a.md"),
    ("/notes/a.md", "notes/a.md"),
    ("notes//a.md", "notes/a.md"),
    ("./notes/./a.md", "notes/a.md"),
    ("notes/a.md/", "notes/a.md"),
    ("notes\\a.md", "notes/a.md"),
    ("\\\\notes\\\\a.md", "notes/a.md"),
    ("notes%2Fa.md", "notes/a.md"),
    ("%6Eotes/a.md", "notes/a.md"),
    ("notes%252Fa.md", "notes/a.md"),
    ("notes%25252Fa.md", "notes/a.md"),
    ("notes%5Ca.md", "notes/a.md"),
    ("\uff4e\uff4f\uff54\uff45\uff53/\uff41\uff0e\uff4d\uff44", "notes/a.md"),
    ("notes\uff0fa.md", "notes/a.md"),
    ("notes\uff3ca.md", "notes/a.md"),
    ("\uff052Fnotes/a.md", "notes/a.md"),
    ("café.md", "café.md"),
    ("cafe\u0301.md", "café.md"),
    ("ﬁle.md", "file.md"),
    ("Notes/A.md", "Notes/A.md"),
    ("日本語/メモ.md", "日本語/メモ.md"),
    ("notes/...md", "notes/...md"),
    ("a b/c d.md", "a b/c d.md"),
    ("x" * 252 + ".md", "x" * 252 + ".md"),
]

REFUSED = [
    ("", "empty"),
    ("/", "empty"),
    ("./.", "empty"),
    ("%2F", "empty"),
    ("../a.md", "dot_dot_segment"),
    ("notes/../a.md", "dot_dot_segment"),
    ("notes\\..\\a.md", "dot_dot_segment"),
    ("%2E%2E/a.md", "dot_dot_segment"),
    ("%252E%252E/a.md", "dot_dot_segment"),
    ("\uff0e\uff0e/a.md", "dot_dot_segment"),
    ("\u2025/a.md", "dot_dot_segment"),
    ("notes/a\x00.md", "control_character"),
    ("notes/a%00.md", "control_character"),
    ("notes/a\n.md", "control_character"),
    ("notes/a\u200b.md", "control_character"),
    ("notes/a\u00ad.md", "control_character"),
    ("notes/a\u202e.md", "control_character"),
    ("notes/a\ufeff.md", "control_character"),
    ("notes/a\u2028.md", "control_character"),
    ("notes/a\ud800.md", "control_character"),
    ("notes/a\u034f.md", "invisible_character"),
    ("notes/a%CD%8F.md", "invisible_character"),
    ("notes/a\ufe0f.md", "invisible_character"),
    ("notes/a\U000e0100.md", "invisible_character"),
    ("notes/\u115fa.md", "invisible_character"),
    ("notes/a\uffa0.md", "invisible_character"),
    ("notes/%FF.md", "invalid_encoding"),
    ("notes/%ED%A0%80.md", "invalid_encoding"),
    ("notes%2525252Fa.md", "too_deeply_encoded"),
    ("x" * 253 + ".md", "segment_too_long"),
    ("é" * 127 + ".md", "segment_too_long"),
    ("/".join(["d" * 200] * 6) + "/a.md", "too_long"),
    ("x" * 20_000 + ".md", "too_long"),
    ("notes/a", "not_markdown"),
    ("notes/a.MD", "not_markdown"),
    ("notes/a.md.txt", "not_markdown"),
    ("notes/.md", "not_markdown"),
    ("notes/", "not_markdown"),
]


@pytest.mark.parametrize(("raw", "canonical"), CANONICALISED)
def test_canonical_spelling(raw, canonical):
    assert canonical_document_path(raw) == canonical


@pytest.mark.parametrize(("raw", "reason"), REFUSED)
def test_refused_paths_name_the_reason(raw, reason):
    with pytest.raises(InvalidDocumentPath) as refused:
        canonical_document_path(raw)

    assert refused.value.detail["reason"] == reason
    assert refused.value.status == 400


@pytest.mark.parametrize(("raw", "canonical"), CANONICALISED)
def test_only_the_one_spelling_is_taken_as_canonical(raw, canonical):
    assert document_path_require_canonical(canonical) == canonical
    if raw != canonical:
        with pytest.raises(InvalidDocumentPath) as refused:
            document_path_require_canonical(raw)
        assert refused.value.detail == {"reason": "not_canonical", "canonical": canonical}


@pytest.mark.parametrize(("raw", "reason"), REFUSED)
def test_an_invalid_path_is_refused_when_canonical_is_required(raw, reason):
    with pytest.raises(InvalidDocumentPath) as refused:
        document_path_require_canonical(raw)

    assert refused.value.detail["reason"] == reason


def test_another_spelling_is_refused_with_the_canonical_one():
    with pytest.raises(InvalidDocumentPath) as refused:
        document_path_require_canonical("/notes//a.md")

    assert refused.value.detail == {"reason": "not_canonical", "canonical": "notes/a.md"}


def test_the_canonical_spelling_passes_unchanged():
    assert document_path_require_canonical("notes/a.md") == "notes/a.md"


path_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("/\\.%25aAzZ.-_ mdé\uff10\uff0e\uff0f\uff3cﬁ\u0301\u200b")),
        st.characters(codec="utf-8"),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(raw=path_text.map(lambda text: text + ".md"))
@example(raw="\uff052E\uff052E/a.md")
@example(raw="%EF%BC%852E.md")
@example(raw="/\u0301a.md")
def test_canonicalisation_is_idempotent(raw):
    try:
        once = canonical_document_path(raw)
    except InvalidDocumentPath:
        assume(False)
        return

    assert canonical_document_path(once) == once


def _is_valid_and_canonical(raw: str) -> bool:
    try:
        return canonical_document_path(raw) == raw
    except InvalidDocumentPath:
        return False


def _spelled(char: str, encoding: int) -> str:
    """`char` as sent: raw, percent-encoded once, or twice."""
    for _ in range(encoding):
        char = quote(char, safe="")
    return char


@pytest.mark.parametrize("encoding", [0, 1, 2])
def test_every_default_ignorable_code_point_is_refused_anywhere_in_a_path(encoding):
    """The whole Default_Ignorable_Code_Point class, each member at a different place."""
    accepted = []
    for index, char in enumerate(DEFAULT_IGNORABLE):
        text = "notes/plan.md"
        at = index % len(text.removesuffix(".md"))
        raw = text[:at] + _spelled(char, encoding) + text[at:]
        try:
            canonical_document_path(raw)
        except InvalidDocumentPath as refused:
            if refused.detail["reason"] not in {"control_character", "invisible_character"}:
                accepted.append((hex(ord(char)), refused.detail["reason"]))
        else:
            accepted.append((hex(ord(char)), "accepted"))

    assert accepted == []


valid_path = st.lists(
    st.text(
        alphabet=st.characters(categories=["L", "N", "P", "S", "Zs"], exclude_characters="/\\%."),
        min_size=1,
        max_size=8,
    ),
    min_size=1,
    max_size=3,
).map(lambda segments: "/".join(segments) + ".md")


@settings(max_examples=300, deadline=None)
@given(
    raw=valid_path,
    invisible=st.sampled_from(DEFAULT_IGNORABLE),
    at=st.integers(min_value=0),
    encoding=st.integers(0, 2),
)
def test_a_default_ignorable_code_point_makes_any_valid_path_invalid(raw, invisible, at, encoding):
    assume(_is_valid_and_canonical(raw))
    at %= len(raw) - len(".md") + 1
    spelled = raw[:at] + _spelled(invisible, encoding) + raw[at:]

    with pytest.raises(InvalidDocumentPath) as refused:
        canonical_document_path(spelled)

    assert refused.value.detail["reason"] in {"control_character", "invisible_character"}


# A directory prefix takes the same steps, without the Markdown rule; the root is "".
@pytest.mark.parametrize("raw", ["", "notes", "notes/2024", "日本語", "my.app"])
def test_a_canonical_directory_passes_unchanged(raw):
    assert directory_path_require_canonical(raw) == raw


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [("notes/", "notes"), ("/notes", "notes"), ("notes//a", "notes/a"), ("notes%2Fa", "notes/a")],
)
def test_a_directory_in_another_spelling_is_refused_with_the_canonical_one(raw, canonical):
    with pytest.raises(InvalidDocumentPath) as refused:
        directory_path_require_canonical(raw)

    assert refused.value.detail == {"reason": "not_canonical", "canonical": canonical}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("notes/../x", "dot_dot_segment"),
        ("..", "dot_dot_segment"),
        ("notes\u034f", "invisible_character"),
        ("notes\x00", "control_character"),
        ("%FF", "invalid_encoding"),
        ("a" * 256, "segment_too_long"),
    ],
)
def test_a_directory_is_refused_for_the_reasons_a_path_is(raw, reason):
    with pytest.raises(InvalidDocumentPath) as refused:
        directory_path_require_canonical(raw)

    assert refused.value.detail["reason"] == reason


# Every ASCII character but the path's own syntax (separators, dots, escapes).
@pytest.mark.parametrize("char", [chr(code) for code in range(128) if chr(code) not in "%/\\."])
def test_an_ascii_character_is_refused_as_invisible_exactly_when_it_is_not_printable(
    char: str,
) -> None:
    # The path rule skips its per-character look-ups for printable ASCII: this is what it
    # relies on, for every ASCII code point.
    assert char not in DEFAULT_IGNORABLE
    if char.isprintable():
        assert canonical_document_path(f"notes/a{char}b.md") == f"notes/a{char}b.md"
    else:
        with pytest.raises(InvalidDocumentPath) as refused:
            canonical_document_path(f"notes/a{char}b.md")
        assert refused.value.detail["reason"] == "control_character"


@settings(deadline=None)
@given(raw=st.text(alphabet=st.characters(max_codepoint=127, exclude_characters="%")))
def test_ascii_without_percent_unfolds_to_itself(raw):
    # The path rule skips the unfolding rounds for such text: this is why it may.
    assert unfold(raw, strict=True) == raw
