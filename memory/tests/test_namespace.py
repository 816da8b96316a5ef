"""The memory namespace test: every spelling of `.zudotext/memory/`, and nothing else."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memory.errors import MemoryNamespaceReserved
from memory.namespace import is_memory_namespace, memory_namespace_refuse
from memory.tests.spellings import ORDINARY_SPELLINGS, RESERVED_SPELLINGS
from workspaces.errors import InvalidDocumentPath
from workspaces.paths import canonical_document_path


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
