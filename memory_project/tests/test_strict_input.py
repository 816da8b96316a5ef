"""Request bodies are read strictly and query problems are called query problems."""

from __future__ import annotations

import json

import pytest
from rest_framework.exceptions import ValidationError
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from conftest import assert_error
from memory_project.api.serializers import ProhibitSurrogateCharacters
from workspaces.models import File


def _memory_files(tenant) -> int:
    return File.objects.filter(workspace=tenant.workspace).count()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": 5}, "content"),
        ({"content": True}, "content"),
        ({"content": ["a"]}, "content"),
        ({"restoreVersion": "1"}, "restoreVersion"),
        ({"restoreVersion": True}, "restoreVersion"),
        ({"restoreVersion": 1.0}, "restoreVersion"),
    ],
)
def test_a_value_of_another_json_type_is_refused_not_converted(memory_api, tenant, body, field):
    response = memory_api.put(body, 0)

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == [field]
    assert _memory_files(tenant) == 0


def test_an_unknown_field_is_named(memory_api, tenant):
    response = memory_api.put({"contnet": "- likes tea\n"}, 0)

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert "Unknown field" in error["detail"]["fields"]["contnet"][0]
    assert "`content`" in error["detail"]["fields"]["contnet"][0]
    assert _memory_files(tenant) == 0


def test_an_unknown_field_beside_a_valid_one_is_still_refused(memory_api, tenant):
    response = memory_api.put({"content": "- a\n", "extra": 1}, 0)

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == ["extra"]
    assert _memory_files(tenant) == 0


def test_a_boolean_field_takes_only_a_boolean(tenant):
    client = tenant.client_for(tenant.admin)
    url = f"/api/v1/workspaces/{tenant.workspace.pk}/ai"

    response = client.put(url, {"enabled": "false", "expectedRevision": 0}, format="json")

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == ["enabled"]
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0


@pytest.mark.parametrize(
    ("route", "query", "parameter"),
    [
        ("/api/v1/workspaces/{ws}/memory/versions", "limit=abc", "limit"),
        ("/api/v1/workspaces/{ws}/memory/versions", "limit=0", "limit"),
        ("/api/v1/workspaces/{ws}/memory/versions", "cursor=forged", "cursor"),
        ("/api/v1/workspaces", "limit=abc", "limit"),
        ("/api/v1/workspaces/{ws}/documents", "includeDeleted=maybe", "includeDeleted"),
    ],
)
def test_a_bad_query_parameter_is_validation_failed_naming_it(tenant, route, query, parameter):
    client = tenant.client_for(tenant.member)

    response = client.get(f"{route.format(ws=tenant.workspace.pk)}?{query}")

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == [parameter]


@pytest.mark.parametrize(
    "content", ["\ud800", "- likes tea \udfff\n", "x" * 5000 + "\udbff", "\U0001f600 \ud800"]
)
def test_a_lone_surrogate_is_refused_as_drf_refuses_it(memory_api, tenant, content):
    # The project's check (a regular expression) against DRF's own (a loop in Python).
    with pytest.raises(ValidationError) as drf:
        ProhibitSurrogateCharactersValidator()(content)

    # JSON escapes the surrogate (json.dumps's default): UTF-8 itself cannot carry it.
    body = json.dumps({"content": content})
    response = memory_api.client.put(
        memory_api.url, body, content_type="application/json", HTTP_X_BASE_VERSION="0"
    )

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert error["detail"]["fields"]["content"] == [str(drf.value.detail[0])]  # type: ignore[index]
    assert _memory_files(tenant) == 0


def test_text_with_no_lone_surrogate_passes_the_check():
    for text in ["", "- likes tea\n", "emoji \U0001f600 and \ue000 \uffff"]:
        ProhibitSurrogateCharacters()(text)
