"""The memory namespace test: every spelling of `.zudotext/memory/`, and nothing else."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from memory.errors import MemoryNamespaceReserved
from memory.namespace import is_memory_namespace, memory_namespace_refuse
from memory.tests.spellings import ORDINARY_SPELLINGS, RESERVED_SPELLINGS
from workspaces.errors import InvalidDocumentPath
from workspaces.paths import canonical_document_path
from workspaces.tests.unicode_classes import DEFAULT_IGNORABLE, lookalikes


def test_the_table_has_at_least_thirty_reserved_spellings():
    assert len(set(RESERVED_SPELLINGS)) >= 30


@pytest.mark.parametrize("raw", RESERVED_SPELLINGS)
def test_every_spelling_of_the_namespace_is_recognised(raw):
    assert is_memory_namespace(raw)


@pytest.mark.parametrize("raw", ORDINARY_SPELLINGS)
def test_paths_near_the_namespace_are_not_in_it(raw):
    assert not is_memory_namespace(raw)


def test_refusal_names_the_code_and_status_and_checks_every_path():
    memory_namespace_refuse("notes/a.md", "notes/b.md")

    with pytest.raises(MemoryNamespaceReserved) as refused:
        memory_namespace_refuse("notes/a.md", ".ZUDOTEXT/memory/x.md")

    assert (refused.value.code, refused.value.status) == ("MEMORY_NAMESPACE_RESERVED", 403)


# Characters from which spellings near the namespace are built: separators, escapes, the
# letters of the name, and a full-width dot, letters and an invisible character.
NEAR_NAMESPACE_CHARACTERS = list("./\\%2EFezudotextmemory\uff0e\uff2d\uff3a\u200b")

segment = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/\\%"), min_size=1, max_size=12
)


def _spell(name: str, style: int) -> str:
    """One of several alternative spellings of a namespace segment name."""
    if style == 0:
        return name.upper()
    if style == 1:
        return quote(name, safe="")
    if style == 2:
        return "".join(chr(ord(char) + 0xFEE0) if "!" <= char <= "~" else char for char in name)
    if style == 3:
        return quote(quote(name, safe=""), safe="")
    return name.swapcase()


@settings(max_examples=200)
@given(
    rest=st.lists(segment, min_size=1, max_size=3),
    styles=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    separator=st.sampled_from(["/", "\\", "//", "/./", "%2F", "\uff0f"]),
    lead=st.sampled_from(["", "/", "./", "notes/../", "\\"]),
)
def test_any_respelling_of_a_path_under_the_namespace_is_recognised(rest, styles, separator, lead):
    raw = lead + separator.join(
        [_spell(".zudotext", styles[0]), _spell("memory", styles[1]), *rest]
    )

    assert is_memory_namespace(raw)


@settings(max_examples=300)
@given(
    raw=st.one_of(
        st.sampled_from(RESERVED_SPELLINGS + ORDINARY_SPELLINGS),
        st.text(alphabet=st.sampled_from(NEAR_NAMESPACE_CHARACTERS), max_size=30).map(
            lambda text: text + ".md"
        ),
    )
)
def test_an_accepted_path_is_in_the_namespace_exactly_when_its_canonical_form_is(raw):
    try:
        canonical = canonical_document_path(raw)
    except InvalidDocumentPath:
        assume(False)
        return

    assert is_memory_namespace(raw) == is_memory_namespace(canonical)


# Places inside `.zudotext/memory/memory.md` where an invisible character goes: inside a
# segment, at its end, at its start.
INVISIBLE_AT = [1, 5, 9, 10, 13, 16, 17]


def test_every_default_ignorable_code_point_inside_the_namespace_is_recognised():
    """The whole Default_Ignorable_Code_Point class, each member at several places."""
    missed = [
        (hex(ord(char)), at)
        for char in DEFAULT_IGNORABLE
        for at in INVISIBLE_AT
        if not is_memory_namespace(MEMORY_DOCUMENT[:at] + char + MEMORY_DOCUMENT[at:])
    ]

    assert missed == []


MEMORY_DOCUMENT = ".zudotext/memory/memory.md"


def _lookalike_spelling(draw, text: str) -> str:
    """`text` with some characters replaced by characters that read as them, and invisible
    characters inserted."""
    spelled = []
    for char in text:
        if draw(st.booleans()):
            char = draw(st.sampled_from(lookalikes(char)))
        if draw(st.integers(0, 4)) == 0:
            char += draw(st.sampled_from(DEFAULT_IGNORABLE))
        spelled.append(char)
    return "".join(spelled)


@st.composite
def lookalike_namespace_paths(draw) -> str:
    """Under the namespace, some characters swapped for lookalikes, invisible characters
    inserted, and then perhaps the case changed (a lookalike's capital reads differently)."""
    case = draw(st.sampled_from([str, str.upper, str.lower, str.swapcase]))
    return case(_lookalike_spelling(draw, ".zudotext/memory/")) + draw(segment) + ".md"


@settings(max_examples=500, deadline=None)
@given(raw=lookalike_namespace_paths())
@example(raw=".zudotext/memory\u034f/memory.md")
@example(raw=".zudotext/memory\ufe0f/memory.md")
@example(raw=".zudotext/memory\U000e0100/memory.md")
@example(raw=".zudotext/mem\u115fory/memory.md")
@example(raw=".zud\u043etext/memory/memory.md")
@example(raw=".zudotext\u2215memory\u2215memory.md")
def test_any_lookalike_spelling_of_the_namespace_is_recognised(raw):
    assert is_memory_namespace(raw)


@settings(max_examples=200, deadline=None)
@given(raw=lookalike_namespace_paths())
def test_a_lookalike_of_the_namespace_is_never_an_ordinary_document(raw):
    """The canonical path refuses it (an invisible character) or the namespace does."""
    try:
        canonical = canonical_document_path(raw)
    except InvalidDocumentPath:
        return

    assert is_memory_namespace(canonical)
