"""The scanner's fast path (one search for every rule's needle, escape sequences stripped
only when there are any) answers exactly what running every rule over the stripped text
answers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory.secrets import _ANSI, _RULES, SecretFinding, _rules_scan, secret_find
from memory.tests.secret_corpus import CREDENTIALS, PROSE, SERVICE_ACCOUNT_FILE

NEEDLES = sorted({needle for rule in _RULES for needle in rule.needles})
COLOURS = ["\x1b[0m", "\x1b[1;31m", "\x9b2K", "\x1b]0;title\x07"]

# Pieces of real lines (credentials whole, cut, or with a character dropped), every needle in
# both cases and cut short, and escape sequences, so that drawn texts hold needles with and
# without a credential around them.
corpus_lines = st.sampled_from(
    [case.line for case in CREDENTIALS] + PROSE + SERVICE_ACCOUNT_FILE.splitlines()
)
pieces = st.one_of(
    corpus_lines,
    st.builds(lambda line, cut: line[:cut], corpus_lines, st.integers(0, 200)),
    st.builds(lambda line, cut: line[:cut] + line[cut + 1 :], corpus_lines, st.integers(0, 200)),
    st.sampled_from(NEEDLES),
    st.sampled_from(NEEDLES).map(str.upper),
    st.sampled_from(NEEDLES).map(lambda needle: needle[:-1]),
    st.sampled_from(COLOURS),
    st.sampled_from(["\n", " ", "x", "A", "0", "_", "-", "="]),
    st.text(max_size=20),
)


def full_scan(text: str) -> SecretFinding | None:
    scanned = _ANSI.sub("", text)
    return _rules_scan(scanned, scanned.lower())


@given(st.text())
def test_fast_path_agrees_with_the_full_scan_on_any_text(text: str) -> None:
    assert secret_find(text) == full_scan(text)


@given(st.lists(pieces, max_size=30))
def test_fast_path_agrees_with_the_full_scan_on_corpus_pieces(parts: list[str]) -> None:
    text = "".join(parts)

    assert secret_find(text) == full_scan(text)


def test_every_corpus_line_is_answered_as_by_the_full_scan() -> None:
    for line in [case.line for case in CREDENTIALS] + PROSE + [SERVICE_ACCOUNT_FILE]:
        assert secret_find(line) == full_scan(line)
