"""The one secret scanner: every writer of memory text calls it before anything is stored.

`secret_find` answers the first credential-shaped value in a text, as a rule name and a
1-based line; it never returns, logs or raises the value itself. `secret_refuse` turns a
finding into `SecretDetected` (422 `SECRET_DETECTED`).

It builds on detect-secrets where that library's plugins serve as they are: the private-key
armour lines (`PrivateKeyDetector`), the PyPI macaroon prefixes (`PypiTokenDetector`), the
JWT's structural check (`JwtTokenDetector.is_formally_valid`) and its sequential-string
filter. Its other plugins are not used as they are, for reasons that hold here: they have no
left boundary (so `desk_live_...` matches inside a word), no randomness check (so
`glpat-personal-access-token` is a GitLab token), and a few are quadratic on adversarial
input (`eyJ` repeated without a dot). Our own rules below carry the current token shapes with
boundaries, bounded possessive quantifiers and a randomness check on the body.

Time is linear in the text: every pattern either starts with a literal behind a boundary
lookbehind (so within one run of token characters only its start can begin a match) and uses
bounded possessive quantifiers (no backtracking), and a rule runs only when its literal occurs
in the text at all. In an ASCII text (most notes) a rule's pattern is tried only where its
literals stand, or in a window just after them, never over the whole text.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import ahocorasick_rs
from detect_secrets.filters.heuristic import is_sequential_string
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector

from memory.errors import SecretDetected
from workspaces.tokens import DELIVERY_PREFIX, PAT_PREFIX

# CSI (ESC [ ... final byte, or the 8-bit CSI) and OSC (ESC ] ... BEL or ST) sequences. They
# never span a newline here, so stripping them keeps every line where it was: a token
# coloured by a terminal is scanned as the token, and its line is the original line.
_ANSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*+[ -/]*+[@-~]|\x1b\][^\x07\x1b\n]*+(?:\x07|\x1b\\)")

# A value that is plainly a stand-in, not a credential: a run of one repeated character
# (`XXXXXXXX`, `00000000`) or the markers that documentation samples carry (AWS's own
# examples end in EXAMPLE / EXAMPLEKEY).
_PLACEHOLDER_RUN = re.compile(r"(.)\1{5}")
_PLACEHOLDER_WORDS = ("EXAMPLE", "REDACTED")


@dataclass(frozen=True)
class SecretFinding:
    rule: str  # a stable rule name such as "github_token"
    line: int  # 1-based, in the text as given


@dataclass(frozen=True)
class _Rule:
    name: str
    # Lower-case literals of which every match holds one: the pattern runs only when the
    # lower-cased text contains one, which keeps a scan of ordinary prose cheap. Unless
    # `reach` says otherwise, every match starts with one, where it is tried.
    needles: tuple[str, ...]
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool]
    # For a rule whose matches start elsewhere: every match it accepts starts within
    # `reach` characters after the start of one of its needles and is at most `longest`
    # characters long, and its matches never overlap one another.
    reach: int | None = None
    longest: int = 0


def _is_placeholder(value: str) -> bool:
    return (
        _PLACEHOLDER_RUN.search(value) is not None
        or any(word in value for word in _PLACEHOLDER_WORDS)
        or is_sequential_string(value)
    )


def _character_classes(value: str) -> int:
    return sum(
        (
            any("a" <= char <= "z" for char in value),
            any("A" <= char <= "Z" for char in value),
            any("0" <= char <= "9" for char in value),
        )
    )


def _random_body(match: re.Match[str]) -> bool:
    """The `body` group mixes at least two of lower case, upper case and digits and is no
    placeholder. Random tokens of 20 characters or more fail this with negligible
    probability; words, kebab-case and snake_case prose (`glpat-personal-access-token`,
    `xoxb-is-the-bot-prefix`) always fail it."""
    body = match["body"]
    return _character_classes(body) >= 2 and not _is_placeholder(body)


def _random_body_with_digit(match: re.Match[str]) -> bool:
    return _random_body(match) and any("0" <= char <= "9" for char in match["body"])


def _random_body_all_classes(match: re.Match[str]) -> bool:
    """For long bodies (48 characters or more), which random tokens fill with all three."""
    return _character_classes(match["body"]) == 3 and not _is_placeholder(match["body"])


def _not_placeholder(match: re.Match[str]) -> bool:
    return not _is_placeholder(match[0])


def _always(match: re.Match[str]) -> bool:
    return True


def _aws_secret_access_key(match: re.Match[str]) -> bool:
    """A 40-character base64 value is an AWS secret access key only with `aws` or `secret`
    shortly before it on the same line, and only if it mixes upper case, lower case and
    digits: a git SHA (hex) or a word never does."""
    body = match["body"]
    if _character_classes(body) < 3 or _is_placeholder(body):
        return False
    text = match.string
    line_start = text.rfind("\n", 0, match.start()) + 1
    before = text[max(line_start, match.start() - _AWS_CONTEXT) : match.start()].lower()
    return "aws" in before or "secret" in before


def _jwt(match: re.Match[str]) -> bool:
    """Three base64url parts whose header decodes to a JSON object naming an `alg`."""
    token = match[0]
    if not JwtTokenDetector.is_formally_valid(token):
        return False
    header = token.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (ValueError, binascii.Error):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


def _gcp_service_account(match: re.Match[str]) -> bool:
    return _GCP_SERVICE_ACCOUNT_TYPE.search(match.string) is not None


# Characters that may continue a token: a match must not start right after one, nor end
# right before one.
_B = r"(?<![A-Za-z0-9_\-])"
_E = r"(?![A-Za-z0-9_\-])"

# An AWS secret access key's length, and how far before it its `aws` or `secret` may start.
_AWS_SECRET_LENGTH = 40
_AWS_CONTEXT = 64

_GCP_SERVICE_ACCOUNT_TYPE = re.compile(r'"type"[ \t]{0,16}+:[ \t]{0,16}+"service_account"')


def _regex(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{alternative})" for alternative in alternatives))


def _token(
    name: str, prefixes: tuple[str, ...], rest: str, accept: Callable[[re.Match[str]], bool]
) -> _Rule:
    """A token that starts with one of `prefixes`, followed by `rest` (which names the random
    part `body`), standing alone between the boundaries."""
    alternatives = "|".join(re.escape(prefix) for prefix in prefixes)
    return _Rule(
        name,
        tuple(prefix.lower() for prefix in prefixes),
        re.compile(f"{_B}(?:{alternatives}){rest}{_E}"),
        accept,
    )


# The plugin's armour lines, plus PKCS#8's encrypted form, which it lacks. Its patterns are
# plain words (`BEGIN RSA PRIVATE KEY`), taken here as the literals they are.
_PRIVATE_KEY_ARMOUR = (
    *(pattern.pattern for pattern in PrivateKeyDetector.denylist),
    "BEGIN ENCRYPTED PRIVATE KEY",
)

_RULES: tuple[_Rule, ...] = (
    # A service-account key file: its "private_key" member locates it (the armour line inside
    # the escaped PEM would otherwise report the less telling `private_key`).
    _Rule(
        "gcp_service_account",
        ('"private_key"',),
        re.compile(r'"private_key"[ \t]{0,16}+:[ \t]{0,16}+"'),
        _gcp_service_account,
    ),
    _Rule(
        "private_key",
        # Each armour line is its own needle: a match starts with one.
        tuple(armour.lower() for armour in _PRIVATE_KEY_ARMOUR),
        _regex(*(re.escape(armour) for armour in _PRIVATE_KEY_ARMOUR)),
        _always,
    ),
    _token(
        "anthropic_api_key",
        ("sk-ant-",),
        r"[a-z]{2,8}+[0-9]{0,3}+-(?P<body>[A-Za-z0-9_\-]{32,200}+)",
        _random_body,
    ),
    _token(
        "openai_api_key",
        ("sk-proj-", "sk-svcacct-", "sk-admin-"),
        r"(?P<body>[A-Za-z0-9_\-]{40,250}+)",
        _random_body_with_digit,
    ),
    # OpenAI's legacy shape: 48 letters and digits straight after `sk-`.
    _token("openai_api_key", ("sk-",), r"(?P<body>[A-Za-z0-9]{48})", _random_body_all_classes),
    _token(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"(?P<body>[A-Za-z0-9]{36,251}+)",
        _random_body,
    ),
    _token(
        "github_token",
        ("github_pat_",),
        r"(?P<body>[A-Za-z0-9_]{60,251}+)",
        _random_body_all_classes,
    ),
    _token(
        "gitlab_token",
        ("glpat-", "gldt-", "glrt-", "glcbt-", "glptt-", "glft-", "glsoat-", "gloas-"),
        r"(?P<body>[A-Za-z0-9_\-]{20,255}+)",
        _random_body,
    ),
    _token(
        "slack_token",
        ("xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"),
        r"(?P<body>[A-Za-z0-9][A-Za-z0-9\-]{18,250}+)",
        _random_body_with_digit,
    ),
    _Rule(
        "slack_webhook",
        ("hooks.slack.com/",),
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"(?P<body>T[A-Z0-9]{6,16}+/[A-Z0-9]{6,24}+/[A-Za-z0-9]{16,64}+)",
            re.IGNORECASE,
        ),
        _random_body,
    ),
    _Rule(
        "aws_access_key_id",
        ("akia", "asia"),
        # A key id is the prefix and 16 upper-case letters or digits. Without a digit the
        # `ASIA` form is as likely an upper-case word (ASIAPACIFIC...), so that one needs one.
        re.compile(
            r"(?<![A-Za-z0-9_])(?:AKIA|ASIA(?=[A-Z]{0,15}+[0-9]))(?P<body>[A-Z0-9]{16})"
            r"(?![A-Za-z0-9])"
        ),
        _not_placeholder,
    ),
    _Rule(
        "aws_secret_access_key",
        ("aws", "secret"),
        re.compile(
            rf"(?<![A-Za-z0-9/+=])(?P<body>[A-Za-z0-9/+]{{{_AWS_SECRET_LENGTH}}})(?![A-Za-z0-9/+=])"
        ),
        _aws_secret_access_key,
        reach=_AWS_CONTEXT,
        longest=_AWS_SECRET_LENGTH,
    ),
    _token(
        "stripe_live_key", ("sk_live_", "rk_live_"), r"(?P<body>[A-Za-z0-9]{24,247}+)", _random_body
    ),
    _token("google_api_key", ("AIza",), r"(?P<body>[A-Za-z0-9_\-]{35})", _random_body),
    _token(
        "jwt",
        ("eyJ",),
        r"[A-Za-z0-9_\-]{8,4096}+\.[A-Za-z0-9_\-]{2,16384}+\.[A-Za-z0-9_\-]{16,4096}+",
        _jwt,
    ),
    _token("npm_token", ("npm_",), r"(?P<body>[A-Za-z0-9]{36})", _random_body),
    # This service's own bearer secrets (`workspaces.tokens.bearer_secret_generate`: the
    # prefix and 43 base64url characters), the ones a note is likeliest to be pasted with.
    _token(
        "workspace_memory_token",
        (PAT_PREFIX, DELIVERY_PREFIX),
        r"(?P<body>[A-Za-z0-9_\-]{43})",
        _random_body,
    ),
    _Rule(
        "pypi_token",
        ("pypi-",),
        _regex(*(pattern.pattern for pattern in PypiTokenDetector.denylist)),
        _not_placeholder,
    ),
)


# Where the rules' needles occur, by Aho-Corasick automata (compiled multi-pattern matchers).
# The check that most texts stop at asks only whether any needle occurs: the leftmost-first
# automaton answers it (a text holding a needle gives at least its leftmost occurrence),
# skipping ahead with SIMD searches for the needles' rare bytes, about five times faster
# than the regex engine, which tests every character against a set. The places of every
# needle, overlapping ones included, come from the standard automaton (three times slower,
# as it has no such skip), asked only about a text that holds one.
_NEEDLE_LIST = sorted({needle for rule in _RULES for needle in rule.needles})
_ANY_NEEDLE = ahocorasick_rs.AhoCorasick(
    _NEEDLE_LIST, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
)
_EVERY_NEEDLE = ahocorasick_rs.AhoCorasick(_NEEDLE_LIST)
# For each needle (by its index in the list), the rules (by their order) it stands for.
_RULES_OF_NEEDLE = [
    [order for order, rule in enumerate(_RULES) if needle in rule.needles]
    for needle in _NEEDLE_LIST
]


def secret_find(text: str) -> SecretFinding | None:
    """Return the first credential-shaped value in `text` (by position; on one position, by
    rule order), or None. ANSI escape sequences are ignored; the line is 1-based."""
    # Every escape sequence starts with one of these two: without them there is none to strip.
    scanned = _ANSI.sub("", text) if "\x1b" in text or "\x9b" in text else text
    lowered = scanned.lower()
    if not _ANY_NEEDLE.find_matches_as_indexes(lowered):
        return None
    if not scanned.isascii():
        # Beyond ASCII a needle's place in the lower case need not be its place in the text
        # (`İ` lower-cases to two characters), and a pattern that ignores case matches
        # characters whose lower case is no needle's (the long s, U+017F, for `s`): every
        # rule that may match runs over all of it.
        return _rules_scan(scanned, lowered)
    return _rules_scan_near(scanned, lowered)


def _rules_scan(scanned: str, lowered: str) -> SecretFinding | None:
    """Every rule whose needle `lowered` holds, over the whole of `scanned` (the text without
    escape sequences, and its lower case)."""
    first: tuple[int, int, str] | None = None  # (position, rule order, rule name)
    for order, rule in enumerate(_RULES):
        if not any(needle in lowered for needle in rule.needles):
            continue
        first = _earliest_accepted(first, order, rule.pattern.finditer(scanned))
    return _finding(scanned, first)


def _rules_scan_near(scanned: str, lowered: str) -> SecretFinding | None:
    """What `_rules_scan` answers, from each rule's pattern run only at or near its needles'
    places (`scanned` is ASCII, so `lowered` has each character in its place)."""
    places: dict[int, list[int]] = {}  # rule order: where its needles start, in order
    for needle, start, _ in _EVERY_NEEDLE.find_matches_as_indexes(lowered, overlapping=True):
        for order in _RULES_OF_NEEDLE[needle]:
            places.setdefault(order, []).append(start)
    first: tuple[int, int, str] | None = None
    for order, starts in sorted(places.items()):
        matches = _matches_near(_RULES[order], scanned, sorted(set(starts)))
        first = _earliest_accepted(first, order, matches)
    return _finding(scanned, first)


def _matches_near(rule: _Rule, scanned: str, starts: list[int]) -> Iterator[re.Match[str]]:
    """The matches of `rule` that `finditer` over the whole text would give, in order, save
    those that its `accept` refuses for want of a needle nearby (`starts`: its needles'
    places, in order)."""
    if rule.reach is None:
        # Every match starts with a needle: where `finditer` would resume, after the last
        # match, the next place a match is tried is the next needle.
        resume = 0
        for start in starts:
            if start < resume:
                continue
            match = rule.pattern.match(scanned, start)
            if match is not None:
                resume = match.end()
                yield match
        return
    # Every match the rule accepts starts within `reach` of a needle, and its matches are
    # runs bounded on both sides, which cannot overlap: a window finds there what the whole
    # text holds. It ends one character past the longest match, for the pattern's look at
    # the character after it; a match that touches its end was cut short by it, unless the
    # text ends there too.
    resume = 0
    for start in starts:
        end = min(len(scanned), start + rule.reach + rule.longest + 1)
        for match in rule.pattern.finditer(scanned, max(start, resume), end):
            if match.end() < end or end == len(scanned):
                resume = match.end()
                yield match


def _earliest_accepted(
    first: tuple[int, int, str] | None, order: int, matches: Iterator[re.Match[str]]
) -> tuple[int, int, str] | None:
    """`first` (position, rule order, rule name), or the first of rule `order`'s `matches`
    (in order) that the rule accepts, if that starts earlier: later ones cannot."""
    rule = _RULES[order]
    for match in matches:
        if first is not None and match.start() > first[0]:
            break
        if rule.accept(match):
            candidate = (match.start(), order, rule.name)
            return candidate if first is None else min(first, candidate)
    return first


def _finding(scanned: str, first: tuple[int, int, str] | None) -> SecretFinding | None:
    if first is None:
        return None
    position, _, name = first
    return SecretFinding(rule=name, line=scanned.count("\n", 0, position) + 1)


def secret_refuse(text: str, *, path: str) -> None:
    """Raise `SecretDetected` naming `path`, the rule and the line if `text` holds a
    credential. The value never leaves this function."""
    finding = secret_find(text)
    if finding is not None:
        raise SecretDetected(path=path, rule=finding.rule, line=finding.line)
