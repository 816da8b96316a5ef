"""The secret scanner: the corpus as data, line numbers, ANSI colours, and that the value
never leaves it. Pure functions: nothing here touches the database."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.errors import SecretDetected
from memory.secrets import SecretFinding, secret_find, secret_refuse
from memory.tests.secret_corpus import (
    CREDENTIALS,
    PROSE,
    SERVICE_ACCOUNT_FILE,
    SERVICE_ACCOUNT_FILE_LINE,
    Credential,
    fake,
)

RULES = {
    "anthropic_api_key",
    "openai_api_key",
    "github_token",
    "gitlab_token",
    "slack_token",
    "slack_webhook",
    "aws_access_key_id",
    "aws_secret_access_key",
    "stripe_live_key",
    "google_api_key",
    "gcp_service_account",
    "private_key",
    "jwt",
    "npm_token",
    "pypi_token",
    "workspace_memory_token",
}

ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\][^\x07]*\x07")


def test_the_corpus_covers_every_rule_with_enough_cases() -> None:
    assert {case.rule for case in CREDENTIALS} == RULES
    assert len(CREDENTIALS) >= 40
    assert len(PROSE) >= 40


@pytest.mark.parametrize("case", CREDENTIALS, ids=lambda case: case.rule)
def test_a_credential_line_is_found_with_its_rule(case: Credential) -> None:
    assert secret_find(case.line) == SecretFinding(rule=case.rule, line=1)


@pytest.mark.parametrize("case", CREDENTIALS, ids=lambda case: case.rule)
def test_a_credential_among_prose_is_found_on_its_own_line(case: Credential) -> None:
    before = ["# Notes", "", "prefixes to watch for: sk-, ghp_, glpat-", "ASIA is the region"]
    text = "\n".join([*before, case.line, "task-runner and risk-register", ""])

    finding = secret_find(text)

    assert finding == SecretFinding(rule=case.rule, line=len(before) + 1)


@pytest.mark.parametrize("line", PROSE)
def test_prose_and_near_misses_pass(line: str) -> None:
    assert secret_find(line) is None


def test_all_prose_together_passes() -> None:
    assert secret_find("\n".join(PROSE)) is None


def test_a_service_account_file_is_found_on_its_private_key_line() -> None:
    assert secret_find(SERVICE_ACCOUNT_FILE) == SecretFinding(
        rule="gcp_service_account", line=SERVICE_ACCOUNT_FILE_LINE
    )


def test_a_private_key_member_without_the_service_account_type_is_only_its_pem() -> None:
    text = SERVICE_ACCOUNT_FILE.replace('"service_account"', '"authorized_user"')

    assert secret_find(text) == SecretFinding(rule="private_key", line=SERVICE_ACCOUNT_FILE_LINE)


def test_the_first_credential_by_line_is_reported() -> None:
    text = "\n".join(["ok", f"npm_{fake(36)}", f"ghp_{fake(36)}"])

    assert secret_find(text) == SecretFinding(rule="npm_token", line=2)


def test_a_token_split_by_colour_codes_is_found_and_keeps_its_line() -> None:
    token = f"ghp_{fake(36)}"
    coloured = "".join(f"\x1b[3{index % 8}m{char}" for index, char in enumerate(token))

    assert secret_find(f"a\n\x1b[0mb\n{coloured}\x1b[0m") == SecretFinding("github_token", 3)


def test_an_unterminated_escape_does_not_hide_what_follows() -> None:
    assert secret_find(f"\x1b]0;title ghp_{fake(36)}") == SecretFinding("github_token", 1)


def test_carriage_returns_do_not_shift_lines() -> None:
    assert secret_find(f"a\r\nb\r\nnpm_{fake(36)}\r\n") == SecretFinding("npm_token", 3)


def test_the_value_never_leaves_the_refusal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    value = f"ghp_{fake(36)}"

    with pytest.raises(SecretDetected) as raised:
        secret_refuse(f"line one\ntoken {value}\n", path="notes/deploy.md")

    error = raised.value
    assert error.detail == {"path": "notes/deploy.md", "rule": "github_token", "line": 2}
    for rendering in (str(error), repr(error), repr(error.args), repr(error.detail), caplog.text):
        assert value not in rendering
        assert value[4:] not in rendering


def test_refuse_passes_prose() -> None:
    secret_refuse("\n".join(PROSE), path="notes/prose.md")


# Inputs built to make a backtracking pattern quadratic: many starts inside one run, each
# failing late. The timeout is a hang guard, not a measurement.
@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "unit",
    ["eyJ", "eyJa.", "ghp_", "sk-ant-a-", "xoxb-1", "AKIA", "sk-", "-", "a" * 39 + " ", "aws "],
)
def test_two_mebibytes_of_adversarial_input_is_scanned(unit: str) -> None:
    text = unit * (2 * 1024 * 1024 // len(unit))

    assert secret_find(text) is None


@given(st.text())
def test_any_text_is_scanned_without_error(text: str) -> None:
    finding = secret_find(text)

    assert finding is None or 1 <= finding.line <= text.count("\n") + 1


@given(
    before=st.lists(st.sampled_from(PROSE)),
    case=st.sampled_from(CREDENTIALS),
    after=st.lists(st.sampled_from(PROSE)),
)
def test_a_credential_among_any_prose_is_found_on_its_line(
    before: list[str], case: Credential, after: list[str]
) -> None:
    preceding = "".join(f"{line}\n" for line in before)
    text = preceding + "\n".join([case.line, *after])

    finding = secret_find(text)

    assert finding == SecretFinding(rule=case.rule, line=preceding.count("\n") + 1)


@given(case=st.sampled_from(CREDENTIALS), cuts=st.sets(st.integers(min_value=0, max_value=400)))
def test_colour_codes_anywhere_in_a_credential_do_not_hide_it(
    case: Credential, cuts: set[int]
) -> None:
    plain = ANSI.sub("", case.line)
    coloured = "".join(
        f"\x1b[1;3{index % 8}m{char}" if index in cuts else char for index, char in enumerate(plain)
    )

    assert secret_find(coloured) == SecretFinding(rule=case.rule, line=1)
