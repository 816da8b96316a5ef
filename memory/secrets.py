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
in the text at all.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from detect_secrets.filters.heuristic import is_sequential_string
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector

from memory.errors import SecretDetected

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
    # lower-cased text contains one, which keeps a scan of ordinary prose cheap.
    needles: tuple[str, ...]
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool]


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
    before = text[max(line_start, match.start() - 64) : match.start()].lower()
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
        ("private key", "putty-user-key-file"),
        # The plugin's armour lines, plus PKCS#8's encrypted form, which it lacks.
        _regex(
            *(pattern.pattern for pattern in PrivateKeyDetector.denylist),
            r"BEGIN ENCRYPTED PRIVATE KEY",
        ),
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
        re.compile(r"(?<![A-Za-z0-9/+=])(?P<body>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
        _aws_secret_access_key,
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
    _Rule(
        "pypi_token",
        ("pypi-",),
        _regex(*(pattern.pattern for pattern in PypiTokenDetector.denylist)),
        _not_placeholder,
    ),
)


# Characters from the most to the least frequent in English prose and Markdown (the letters
# by their frequency in English, the punctuation notes are full of among them); any other
# character counts as rarer than all of these. Only the speed of the needle search depends
# on this order, never what it finds.
_FREQUENT = " etaoinshrdlcumwfgypb.,-/vkjxqz"


def _rarity(char: str) -> int:
    return _FREQUENT.index(char) if char in _FREQUENT else len(_FREQUENT)


def _needles_pattern(needles: list[str]) -> re.Pattern[str]:
    """One pattern that matches where any of `needles` occurs. Each needle is sought from
    its rarest character (its anchor): the engine stops only at an anchor, then looks
    behind it for the needle's start and ahead for its rest. Sought from their first
    characters, the needles stopped the engine at every `a`, `e`, `s`, `p`, ... of a text:
    on English prose the search took half as long again."""
    by_anchor: dict[str, dict[str, list[str]]] = {}  # anchor: what follows: what precedes
    # A needle holding another is found with it: a text holding `sk-ant-` holds `sk-`.
    for needle in [each for each in needles if not any(o != each and o in each for o in needles)]:
        at = max(range(len(needle)), key=lambda index: (_rarity(needle[index]), index))
        following = by_anchor.setdefault(needle[at], {})
        following.setdefault(needle[at + 1 :], []).append(needle[:at])
    return re.compile(
        "|".join(
            re.escape(anchor)
            + _one_of(
                [
                    _behind(preceding, anchor) + re.escape(rest)
                    for rest, preceding in sorted(following.items())
                ]
            )
            for anchor, following in sorted(by_anchor.items())
        )
    )


def _behind(preceding: list[str], matched: str) -> str:
    """A regex asserting that one of `preceding` comes right before `matched` (what the
    engine has just matched): lookbehinds, as a trie from the nearest character back, so
    that one character rules out every needle that does not end with it."""
    if "" in preceding:
        return ""
    by_last: dict[str, list[str]] = {}
    for before in preceding:
        by_last.setdefault(before[-1], []).append(before[:-1])
    return _one_of(
        [
            # One lookbehind for the whole of a lone branch, not one per character of it.
            f"(?<={re.escape(rest[0] + last + matched)})"
            if len(rest) == 1
            else f"(?<={re.escape(last + matched)})" + _behind(rest, last + matched)
            for last, rest in sorted(by_last.items())
        ]
    )


def _one_of(alternatives: list[str]) -> str:
    return alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"


# Every rule's needles in one pattern: a text holding none of them (most notes) is answered
# by one pass instead of a search for each needle.
_NEEDLES = _needles_pattern(sorted({needle for rule in _RULES for needle in rule.needles}))


def secret_find(text: str) -> SecretFinding | None:
    """Return the first credential-shaped value in `text` (by position; on one position, by
    rule order), or None. ANSI escape sequences are ignored; the line is 1-based."""
    # Every escape sequence starts with one of these two: without them there is none to strip.
    scanned = _ANSI.sub("", text) if "\x1b" in text or "\x9b" in text else text
    lowered = scanned.lower()
    if _NEEDLES.search(lowered) is None:
        return None
    return _rules_scan(scanned, lowered)


def _rules_scan(scanned: str, lowered: str) -> SecretFinding | None:
    """Every rule whose needle `lowered` holds, over `scanned` (the text without escape
    sequences, and its lower case)."""
    first: tuple[int, int, str] | None = None  # (position, rule order, rule name)
    for order, rule in enumerate(_RULES):
        if not any(needle in lowered for needle in rule.needles):
            continue
        for match in rule.pattern.finditer(scanned):
            if first is not None and match.start() > first[0]:
                break
            if rule.accept(match):
                candidate = (match.start(), order, rule.name)
                first = candidate if first is None else min(first, candidate)
                break
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
