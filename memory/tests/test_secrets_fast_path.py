"""The scanner's fast path (one search for every rule's needle, escape sequences stripped
only when there are any, and in an ASCII text each rule's pattern tried only at or near its
needles' places) answers exactly what running every rule over the stripped text answers."""

from __future__ import annotations

import string

from hypothesis import assume, example, given
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


# ASCII only, so that the scan takes the path that tries patterns near needles alone: pieces
# that put a needle at every distance from a credential (runs of one character, a base64 run
# about as long as an AWS secret access key, the key's context words), a JWT's parts behind
# dots (where `finditer` resumes after a match and a needle inside it is not tried) and
# armour lines cut at either end.
ascii_pieces = st.one_of(
    corpus_lines,
    st.builds(lambda line, cut: line[:cut], corpus_lines, st.integers(0, 200)),
    st.builds(lambda line, cut: line[cut:], corpus_lines, st.integers(0, 80)),
    st.sampled_from(NEEDLES),
    st.sampled_from(NEEDLES).map(str.upper),
    st.builds(
        str.__mul__,
        st.sampled_from([" ", "x", "A", "0", "/", "+", ".", "-", "\n"]),
        st.integers(0, 90),
    ),
    st.text(alphabet=string.ascii_letters + string.digits + "/+", min_size=38, max_size=42),
    st.sampled_from(["aws ", "AWS_", "secret=", "Secret: ", "eyJ", ".eyJ", "BEGIN ", " KEY"]),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=20),
)


# A real AWS secret access key and a real JWT of the corpus, for the examples at the edges of
# what the search near needles must get right.
AWS_KEY = next(case for case in CREDENTIALS if case.rule == "aws_secret_access_key").line[-40:]
JWT = next(case for case in CREDENTIALS if case.rule == "jwt").line.rsplit(" ", 1)[1]


def full_scan(text: str) -> SecretFinding | None:
    scanned = _ANSI.sub("", text)
    return _rules_scan(scanned, scanned.lower())


@given(st.text())
def test_fast_path_agrees_with_the_full_scan_on_any_text(text: str) -> None:
    assert secret_find(text) == full_scan(text)


@given(st.lists(pieces, max_size=30))
# A character that lower-cases to two, which moves every needle of the lower case one place on.
@example(["\u0130", CREDENTIALS[0].line])
def test_fast_path_agrees_with_the_full_scan_on_corpus_pieces(parts: list[str]) -> None:
    text = "".join(parts)

    assert secret_find(text) == full_scan(text)


def test_every_corpus_line_is_answered_as_by_the_full_scan() -> None:
    for line in [case.line for case in CREDENTIALS] + PROSE + [SERVICE_ACCOUNT_FILE]:
        assert secret_find(line) == full_scan(line)


@given(st.lists(ascii_pieces, max_size=30))
# A key as far after its context word as the rule looks back (64 characters).
@example(["aws", " " * 61, AWS_KEY, " end"])
# A key-like run of 41 characters that a window ending after 40 of them would cut to a key.
@example(["aws", " " * 7, "secret", " " * 49, AWS_KEY, "X"])
# A JWT behind a needle whose match it falls inside: the whole scan resumes after that match.
@example(["eyJ", "x" * 9, ".", JWT, " end"])
def test_patterns_near_needles_agree_with_the_full_scan(parts: list[str]) -> None:
    text = "".join(parts)
    assume(text.isascii())

    assert secret_find(text) == full_scan(text)
