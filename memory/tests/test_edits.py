"""apply_memory_changes and parse_changes: exact, all-or-nothing edits of one line each.

These are pure functions, so nothing here touches the database.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.edits import MAX_LINE_BYTES, MemoryChange, apply_memory_changes, parse_changes
from memory.errors import MemoryEditInvalid


def add(line: str, heading: str = "") -> MemoryChange:
    return MemoryChange(op="add", line=line, heading=heading)


def replace(target: str, line: str) -> MemoryChange:
    return MemoryChange(op="replace", target=target, line=line)


def remove(target: str) -> MemoryChange:
    return MemoryChange(op="remove", target=target)


def as_document(lines: list[str], newline: str = "\n") -> str:
    return "".join(f"{line}{newline}" for line in lines)


def document_lines(text: str) -> list[str]:
    """The lines of a document that ends with a newline (or is empty), without endings."""
    return [line.removesuffix("\r") for line in text.split("\n")[:-1]]


def byte_length(line: str) -> int:
    return len(line.encode())


VALID = {"op": "add", "line": "- likes green tea"}
TWO_BYTE = "é"  # one character, two bytes in UTF-8
THREE_BYTE = "€"  # one character, three bytes in UTF-8


# --- parse_changes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason", "change"),
    [
        pytest.param([{"op": "append", "line": "x"}], "unknown_op", 0, id="unknown-op"),
        pytest.param([VALID, {"line": "x"}], "unknown_op", 1, id="missing-op"),
        pytest.param([VALID, VALID, "add x"], "unknown_op", 2, id="change-not-an-object"),
        pytest.param([{"op": "add"}], "empty", 0, id="add-without-line"),
        pytest.param([VALID, {"op": "replace", "target": "a"}], "empty", 1, id="replace-no-line"),
        pytest.param([{"op": "replace", "line": "a"}], "empty", 0, id="replace-without-target"),
        pytest.param([VALID, VALID, {"op": "remove"}], "empty", 2, id="remove-without-target"),
        pytest.param(
            [VALID, {"op": "replace", "target": "a", "line": "b", "heading": "# H"}],
            "unexpected_field",
            1,
            id="heading-on-replace",
        ),
        pytest.param(
            [{"op": "remove", "target": "a", "heading": "# H"}],
            "unexpected_field",
            0,
            id="heading-on-remove",
        ),
        pytest.param(
            [{"op": "remove", "target": "a", "line": "b"}],
            "unexpected_field",
            0,
            id="line-on-remove",
        ),
        pytest.param(
            [{"op": "add", "line": "a", "target": "b"}], "unexpected_field", 0, id="target-on-add"
        ),
        pytest.param(
            [{"op": "add", "line": "a", "note": "b"}], "unexpected_field", 0, id="unknown-field"
        ),
        pytest.param([{"op": "add", "line": ""}], "empty", 0, id="empty-line"),
        pytest.param([VALID, {"op": "add", "line": " \t "}], "empty", 1, id="whitespace-line"),
        pytest.param([{"op": "remove", "target": "   "}], "empty", 0, id="whitespace-target"),
        pytest.param([{"op": "add", "line": "a", "heading": ""}], "empty", 0, id="empty-heading"),
        pytest.param([{"op": "add", "line": 5}], "empty", 0, id="line-not-a-string"),
        pytest.param([{"op": "add", "line": "a\nb"}], "multi_line", 0, id="line-with-lf"),
        pytest.param([VALID, {"op": "add", "line": "a\rb"}], "multi_line", 1, id="line-with-cr"),
        pytest.param(
            [{"op": "replace", "target": "a\r\n", "line": "b"}],
            "multi_line",
            0,
            id="target-with-crlf",
        ),
        pytest.param(
            [{"op": "add", "line": "a", "heading": "# H\nb"}], "multi_line", 0, id="heading-with-lf"
        ),
        pytest.param(
            [{"op": "add", "line": THREE_BYTE * 167}], "too_long", 0, id="line-of-501-bytes"
        ),
        pytest.param(
            [VALID, {"op": "remove", "target": TWO_BYTE * 250 + "a"}],
            "too_long",
            1,
            id="target-of-501-bytes",
        ),
        pytest.param(
            [{"op": "add", "line": "a", "heading": "# " + THREE_BYTE * 167}],
            "too_long",
            0,
            id="heading-over-500-bytes",
        ),
        pytest.param(
            [VALID, {"op": "append"}, {"op": "add", "line": ""}],
            "unknown_op",
            1,
            id="first-bad-change-is-named",
        ),
        pytest.param([VALID] * 6, "too_many_changes", None, id="six-changes"),
        pytest.param([], "not_a_list", None, id="empty-list"),
        pytest.param(VALID, "not_a_list", None, id="a-single-change-object"),
        pytest.param("add x", "not_a_list", None, id="a-string"),
        pytest.param(None, "not_a_list", None, id="none"),
    ],
)
def test_parse_changes_refuses_a_malformed_batch_naming_the_reason_and_the_edit(
    raw: Any, reason: str, change: int | None
):
    with pytest.raises(MemoryEditInvalid) as refused:
        parse_changes(raw)

    assert refused.value.code == "MEMORY_EDIT_INVALID"
    assert refused.value.detail["reason"] == reason
    assert refused.value.detail.get("change") == change


def test_a_501_byte_value_is_refused_even_though_it_has_fewer_than_500_characters():
    value = THREE_BYTE * 167

    with pytest.raises(MemoryEditInvalid) as refused:
        parse_changes([{"op": "add", "line": value}])

    assert len(value) < MAX_LINE_BYTES < byte_length(value)
    assert refused.value.detail["reason"] == "too_long"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            [{"op": "add", "line": TWO_BYTE * 250}], [add(TWO_BYTE * 250)], id="line-of-500-bytes"
        ),
        pytest.param(
            [{"op": "remove", "target": "x" * 500}], [remove("x" * 500)], id="target-of-500-bytes"
        ),
        pytest.param(
            [{"op": "add", "line": "a", "heading": "#" * 500}],
            [add("a", heading="#" * 500)],
            id="heading-of-500-bytes",
        ),
        pytest.param(
            [{"op": "replace", "target": "  - old", "line": "\t- new "}],
            [replace("  - old", "\t- new ")],
            id="surrounding-whitespace-kept-as-sent",
        ),
        pytest.param(
            [{"op": "add", "line": str(n)} for n in range(5)],
            [add(str(n)) for n in range(5)],
            id="five-changes",
        ),
    ],
)
def test_parse_changes_accepts_values_up_to_the_limits(raw: Any, expected: list[MemoryChange]):
    parsed = parse_changes(raw)

    assert parsed == expected


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(add("- likes green tea"), id="add"),
        pytest.param(add("- likes green tea", heading="## Drinks"), id="add-under-heading"),
        pytest.param(replace("- likes green tea", "- likes black tea"), id="replace"),
        pytest.param(remove("- likes green tea"), id="remove"),
    ],
)
def test_as_dict_round_trips_through_parse_changes(change: MemoryChange):
    raw = change.as_dict()

    parsed = parse_changes([raw])

    assert parsed == [change]


# --- apply_memory_changes: examples ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "changes", "expected"),
    [
        pytest.param("", [add("x")], "x\n", id="add-to-empty-text"),
        pytest.param("a\n", [add("x")], "a\nx\n", id="add-appends-at-end"),
        pytest.param("a", [add("x")], "a\nx", id="add-to-text-without-trailing-newline"),
        pytest.param("a\r\nb", [add("c")], "a\r\nb\r\nc", id="crlf-without-final-newline-add"),
        pytest.param("a\r\nb", [remove("b")], "a", id="crlf-without-final-newline-remove"),
        pytest.param("a", [add("x"), remove("x")], "a", id="add-then-remove-restores"),
        pytest.param(
            "# A\na1\n\n# B\nb1\n",
            [add("a2", heading="# A")],
            "# A\na1\na2\n\n# B\nb1\n",
            id="add-under-heading-ends-its-section-before-next-heading",
        ),
        pytest.param(
            "# A\na1\n## A.1\nx1\n# B\nb1\n",
            [add("a2", heading="# A")],
            "# A\na1\n## A.1\nx1\na2\n# B\nb1\n",
            id="add-under-heading-skips-its-subsections",
        ),
        pytest.param(
            "# A\n## A.1\nx1\n\n## A.2\ny1\n",
            [add("x2", heading="## A.1")],
            "# A\n## A.1\nx1\nx2\n\n## A.2\ny1\n",
            id="add-under-subheading-stops-at-same-level",
        ),
        pytest.param(
            "## A\na1\n# B\nb1\n",
            [add("a2", heading="## A")],
            "## A\na1\na2\n# B\nb1\n",
            id="add-under-subheading-stops-at-higher-level",
        ),
        pytest.param(
            "# A\na1\n# B\nb1\n",
            [add("b2", heading="# B")],
            "# A\na1\n# B\nb1\nb2\n",
            id="add-under-last-heading",
        ),
        pytest.param(
            "# A\n# B\n",
            [add("a1", heading="# A")],
            "# A\na1\n# B\n",
            id="add-under-empty-section",
        ),
        pytest.param(
            "a\n",
            [add("x", heading="## New")],
            "a\n\n## New\nx\n",
            id="add-under-missing-heading-creates-it-at-end",
        ),
        pytest.param(
            "a\n\n",
            [add("x", heading="## New")],
            "a\n\n## New\nx\n",
            id="add-under-missing-heading-after-blank-line",
        ),
        pytest.param("", [add("x", heading="## New")], "## New\nx\n", id="add-heading-to-empty"),
        pytest.param("a\nb\nc\n", [replace("b", "B")], "a\nB\nc\n", id="replace-exactly-once"),
        pytest.param("a\nb\nc\n", [remove("b")], "a\nc\n", id="remove-exactly-once"),
        pytest.param("a\nb", [remove("b")], "a", id="remove-last-line-without-newline"),
        pytest.param("a\n", [remove("a")], "", id="remove-the-only-line"),
        pytest.param(
            "a\n",
            [add("x"), replace("x", "y"), add("z")],
            "a\ny\nz\n",
            id="each-edit-sees-the-previous-result",
        ),
        pytest.param("a\r\nb\r\n", [add("c")], "a\r\nb\r\nc\r\n", id="crlf-add-keeps-crlf"),
        pytest.param("a\r\nb\r\n", [replace("b", "B")], "a\r\nB\r\n", id="crlf-replace-keeps-crlf"),
        pytest.param("a\r\nb\r\n", [remove("a")], "b\r\n", id="crlf-remove-keeps-crlf"),
        pytest.param(
            "# A\r\na\r\n# B\r\nb\r\n",
            [add("x", heading="# A")],
            "# A\r\na\r\nx\r\n# B\r\nb\r\n",
            id="crlf-add-under-heading-keeps-crlf",
        ),
        pytest.param(
            "a\r\n",
            [add("x", heading="## New")],
            "a\r\n\r\n## New\r\nx\r\n",
            id="crlf-add-under-missing-heading-keeps-crlf",
        ),
    ],
)
def test_apply_memory_changes_applies_each_edit_in_order(
    text: str, changes: list[MemoryChange], expected: str
):
    result = apply_memory_changes(text, changes)

    assert result == expected


@pytest.mark.parametrize(
    ("text", "changes"),
    [
        pytest.param("a\nb\n", [add("b")], id="line-already-present"),
        pytest.param("# A\na\n# B\n", [add("a", heading="# B")], id="present-under-other-heading"),
        pytest.param("a\r\nb", [add("b")], id="crlf-without-trailing-newline"),
        pytest.param("a\r\nb\n\n", [add("a"), add("b")], id="mixed-endings-and-blank-lines"),
    ],
)
def test_a_batch_of_adds_already_present_returns_the_text_byte_for_byte(
    text: str, changes: list[MemoryChange]
):
    result = apply_memory_changes(text, changes)

    assert result == text


@pytest.mark.parametrize(
    ("text", "changes", "reason", "change"),
    [
        pytest.param("a\nb\n", [replace("c", "C")], "no_match", 0, id="replace-no-match"),
        pytest.param("a\nb\n", [add("x"), remove("c")], "no_match", 1, id="remove-no-match"),
        pytest.param("", [remove("a")], "no_match", 0, id="remove-from-empty-text"),
        pytest.param(
            "a\nb\na\n", [replace("a", "A")], "multiple_matches", 0, id="replace-two-matches"
        ),
        pytest.param(
            "a\nb\na\n", [add("x"), remove("a")], "multiple_matches", 1, id="remove-two-matches"
        ),
        pytest.param(
            "a\r\nb\na\n", [remove("a")], "multiple_matches", 0, id="two-matches-despite-cr"
        ),
        pytest.param(
            "- likes green tea\n",
            [replace("green tea", "black tea")],
            "no_match",
            0,
            id="substring-of-a-line-does-not-match",
        ),
        pytest.param("b \n", [remove("b")], "no_match", 0, id="trailing-space-is-significant"),
        pytest.param(
            "a\nb\nc\n",
            [add("x"), replace("a", "A"), remove("missing"), remove("b")],
            "no_match",
            2,
            id="third-edit-fails-whole-batch",
        ),
        pytest.param(
            "a\nb\n", [remove("b"), remove("b")], "no_match", 1, id="target-removed-by-earlier-edit"
        ),
        pytest.param(
            "a\nb\n",
            [replace("a", "b"), remove("b")],
            "multiple_matches",
            1,
            id="duplicate-made-by-earlier-edit",
        ),
    ],
)
def test_a_target_not_matching_exactly_one_line_fails_the_whole_batch_naming_the_edit(
    text: str, changes: list[MemoryChange], reason: str, change: int
):
    with pytest.raises(MemoryEditInvalid) as refused:
        apply_memory_changes(text, changes)

    assert refused.value.code == "MEMORY_EDIT_INVALID"
    assert refused.value.detail == {"change": change, "reason": reason}


# --- apply_memory_changes: properties --------------------------------------------------------

LINE_CHARACTERS = st.characters(exclude_characters="\n\r", exclude_categories=["Cs"])
ASCII_LINE_CHARACTERS = st.characters(min_codepoint=0x20, max_codepoint=0x7E)

# One line as parse_changes accepts it: no line break, not blank, at most 500 UTF-8 bytes
# (125 characters of at most 4 bytes each, or up to 500 ASCII characters).
single_lines = (
    st.one_of(
        st.text(LINE_CHARACTERS, min_size=1, max_size=125),
        st.text(ASCII_LINE_CHARACTERS, min_size=1, max_size=MAX_LINE_BYTES),
    )
    .filter(lambda value: value.strip())
    .filter(lambda value: byte_length(value) <= MAX_LINE_BYTES)
)
document_line_lists = st.lists(single_lines, max_size=12)
unique_line_lists = st.lists(single_lines, max_size=12, unique=True)


def lines_from(lines: list[str]) -> st.SearchStrategy[str]:
    """A line of the text (when it has one) or any other single line."""
    return st.one_of(st.sampled_from(lines), single_lines) if lines else single_lines


def changes_for(lines: list[str]) -> st.SearchStrategy[list[MemoryChange]]:
    """Batches of one to five edits; targets are lines of the text, so most batches apply."""
    targets = st.sampled_from(lines) if lines else single_lines
    return st.lists(
        st.one_of(
            st.builds(add, lines_from(lines), st.one_of(st.just(""), lines_from(lines))),
            st.builds(replace, targets, lines_from(lines)),
            st.builds(remove, targets),
        ),
        min_size=1,
        max_size=5,
    )


@settings(max_examples=200)
@given(lines=document_line_lists, line=single_lines, data=st.data())
def test_adding_the_same_line_twice_equals_adding_it_once(
    lines: list[str], line: str, data: st.DataObject
):
    text = as_document(lines)
    heading = data.draw(st.one_of(st.just(""), lines_from(lines)))
    change = add(line, heading=heading)

    once = apply_memory_changes(text, [change])
    twice = apply_memory_changes(once, [change])

    assert twice == once


@settings(max_examples=200)
@given(lines=document_line_lists, line=single_lines, data=st.data())
def test_adding_a_new_line_then_removing_it_returns_the_original_document(
    lines: list[str], line: str, data: st.DataObject
):
    lines = [other for other in lines if other != line]
    text = as_document(lines)
    heading = data.draw(st.sampled_from(["", *lines]))

    added = apply_memory_changes(text, [add(line, heading=heading)])
    restored = apply_memory_changes(added, [remove(line)])

    assert line in document_lines(added)
    assert restored == text


@settings(max_examples=200)
@given(
    lines=st.lists(single_lines, min_size=1, max_size=12),
    newline=st.sampled_from(["\n", "\r\n"]),
    trailing_newline=st.booleans(),
    data=st.data(),
)
def test_adding_a_line_already_present_returns_the_document_byte_for_byte(
    lines: list[str], newline: str, trailing_newline: bool, data: st.DataObject
):
    text = newline.join(lines) + (newline if trailing_newline else "")
    line = data.draw(st.sampled_from(lines))
    heading = data.draw(st.one_of(st.just(""), single_lines, st.sampled_from(lines)))

    result = apply_memory_changes(text, [add(line, heading=heading)])

    assert result == text


@settings(max_examples=200)
@given(
    others=document_line_lists,
    pair=st.lists(single_lines, min_size=2, max_size=2, unique=True),
    data=st.data(),
)
def test_replacing_a_line_and_then_replacing_it_back_returns_the_original_document(
    others: list[str], pair: list[str], data: st.DataObject
):
    original, replacement = pair
    lines = [line for line in others if line not in pair]
    lines.insert(data.draw(st.integers(0, len(lines))), original)
    text = as_document(lines)

    result = apply_memory_changes(
        text, [replace(original, replacement), replace(replacement, original)]
    )

    assert result == text


@settings(max_examples=200)
@given(lines=st.lists(single_lines, min_size=1, max_size=12, unique=True), data=st.data())
def test_removing_a_line_present_once_drops_only_that_line_and_keeps_the_order(
    lines: list[str], data: st.DataObject
):
    text = as_document(lines)
    position = data.draw(st.integers(0, len(lines) - 1))

    result = apply_memory_changes(text, [remove(lines[position])])

    assert len(document_lines(result)) == len(lines) - 1
    assert document_lines(result) == lines[:position] + lines[position + 1 :]


@settings(max_examples=200)
@given(
    others=document_line_lists,
    target=single_lines,
    earlier_adds=st.lists(single_lines, max_size=4),
    data=st.data(),
)
def test_a_target_present_twice_always_fails_with_multiple_matches(
    others: list[str], target: str, earlier_adds: list[str], data: st.DataObject
):
    lines = [line for line in others if line != target]
    for _ in range(2):
        lines.insert(data.draw(st.integers(0, len(lines))), target)
    text = as_document(lines)
    earlier = [add(line) for line in earlier_adds if line != target]
    failing = data.draw(st.sampled_from([remove(target), replace(target, data.draw(single_lines))]))

    with pytest.raises(MemoryEditInvalid) as refused:
        apply_memory_changes(text, [*earlier, failing])

    assert refused.value.detail == {"change": len(earlier), "reason": "multiple_matches"}


@settings(max_examples=200)
@given(lines=document_line_lists, data=st.data())
def test_a_successful_batch_never_merges_lines_nor_loses_an_untargeted_line(
    lines: list[str], data: st.DataObject
):
    text = as_document(lines)
    changes = data.draw(changes_for(lines))

    try:
        result = apply_memory_changes(text, changes)
    except MemoryEditInvalid:
        return  # a refused batch changes nothing; the examples above cover refusals

    longest = max([MAX_LINE_BYTES, *(byte_length(line) for line in lines)])
    assert result == "" or result.endswith("\n")
    assert all(byte_length(line) <= longest for line in document_lines(result))
    targeted = {change.target for change in changes if change.op != "add"}
    assert {line for line in lines if line not in targeted} <= set(document_lines(result))


@settings(max_examples=200)
@given(lines=st.lists(single_lines, min_size=1, max_size=12), data=st.data())
def test_a_successful_batch_on_a_crlf_document_keeps_only_crlf_endings(
    lines: list[str], data: st.DataObject
):
    text = as_document(lines, newline="\r\n")
    changes = data.draw(changes_for(lines))

    try:
        result = apply_memory_changes(text, changes)
    except MemoryEditInvalid:
        return

    assert result.count("\n") == result.count("\r\n")
    assert result == "" or result.endswith("\r\n")


@settings(max_examples=200)
@given(
    change=st.one_of(
        st.builds(add, single_lines, st.one_of(st.just(""), single_lines)),
        st.builds(replace, single_lines, single_lines),
        st.builds(remove, single_lines),
    )
)
def test_any_valid_change_round_trips_through_as_dict_and_parse_changes(change: MemoryChange):
    raw = change.as_dict()

    parsed = parse_changes([raw])

    assert parsed == [change]


def test_a_lone_surrogate_is_refused_as_invalid_text():
    with pytest.raises(MemoryEditInvalid) as refused:
        parse_changes([{"op": "add", "line": "\ud800"}])

    assert refused.value.detail == {"change": 0, "reason": "invalid_text"}
