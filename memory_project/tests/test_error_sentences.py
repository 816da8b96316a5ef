"""The web frame explains every error code in words (static/js/errors.js), never by the bare
code: each code of docs/errors.md's table of HTTP errors, and each turn failure code, has a
sentence there."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ERRORS_DOC = Path(settings.BASE_DIR) / "docs" / "errors.md"
ERRORS_JS = Path(settings.BASE_DIR) / "static" / "js" / "errors.js"


def _documented_http_codes() -> set[str]:
    text = ERRORS_DOC.read_text()
    table = text.split("## Codes that are not HTTP errors")[0]
    return set(re.findall(r"^\| `([A-Z_]+)` \| \d{3} \|", table, re.MULTILINE))


def _documented_turn_codes() -> set[str]:
    text = ERRORS_DOC.read_text()
    section = text.split("## Codes that are not HTTP errors")[1].split("## Codes of the")[0]
    return set(re.findall(r"`([A-Z][A-Z_]+)`", section))


def _codes_with_a_sentence() -> set[str]:
    table = ERRORS_JS.read_text().split("const SENTENCES = {")[1].split("\n};")[0]
    return set(re.findall(r"^  ([A-Z][A-Z_]+):", table, re.MULTILINE))


def test_every_documented_code_has_a_sentence():
    missing = (_documented_http_codes() | _documented_turn_codes()) - _codes_with_a_sentence()

    assert not missing, f"static/js/errors.js has no sentence for {sorted(missing)}"


def test_the_parsers_see_the_tables():
    assert {"VERSION_CONFLICT", "INVALID_DOCUMENT_PATH"} <= _documented_http_codes()
    assert "TURN_TIMED_OUT" in _documented_turn_codes()
    assert "VERSION_CONFLICT" in _codes_with_a_sentence()
