"""Request bodies are read strictly and query problems are called query problems."""

from __future__ import annotations

import json
from base64 import b64encode
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from rest_framework.exceptions import ValidationError
from rest_framework.test import APIClient
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from conftest import assert_error
from memory.models import Proposal, SpaceDocument
from memory.tests.conftest import proposal_create
from memory_project.api.serializers import ProhibitSurrogateCharacters
from workspaces.models import ApiToken, File, FileVersion, KeySession, WorkspaceMembership
from workspaces.services import api_token_create


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


@pytest.mark.parametrize("value", ["", " 5", "5 ", "5.0", "+5", "\u0665", "1e1"], ids=repr)
@pytest.mark.parametrize(
    ("route", "parameter"),
    [
        ("/api/v1/workspaces/{ws}/search?q=tea&", "limit"),
        ("/api/v1/automation/workspaces/{ws}/documents/search?q=tea&", "limit"),
        ("/api/v1/agents/assistant/conversations?", "workspaceId"),
        ("/api/v1/workspaces?", "limit"),
    ],
)
def test_a_whole_number_in_the_query_is_digits_only_on_every_route(tenant, route, parameter, value):
    # DRF's IntegerField reads " 5", "5.0", "+5" and an Arabic-Indic five as 5, and a blank
    # as absent; the page size of every list refused them, so the search did too little.
    client = tenant.client_for(tenant.member)
    url = route.format(ws=tenant.workspace.pk)

    response = client.get(f"{url}{parameter}={quote(value)}")

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == [parameter]


@pytest.mark.parametrize(
    ("route", "parameter"),
    [
        ("/api/v1/workspaces/{ws}/documents?", "prefix"),
        ("/api/v1/automation/workspaces/{ws}/documents?", "prefix"),
        ("/api/v1/workspaces/{ws}/search?q=tea&", "cursor"),
        ("/api/v1/workspaces/{ws}/search?", "q"),
    ],
)
def test_a_blank_query_parameter_is_refused_where_the_schema_says_min_length_1(
    tenant, route, parameter
):
    # DRF reads a blank value of an optional text field as absent: `?prefix=` listed every
    # document, though the schema (minLength 1) says a blank is no prefix.
    client = tenant.client_for(tenant.member)

    response = client.get(f"{route.format(ws=tenant.workspace.pk)}{parameter}=")

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == [parameter]


def _cursor(**tokens: str) -> str:
    """A cursor spelled as DRF spells one (base64 of `o`, `r`, `p`), but not given out."""
    return quote(b64encode(urlencode(tokens).encode()).decode())


LIST_ROUTES = [
    "/api/v1/workspaces",
    "/api/v1/tokens",
    "/api/v1/bots",
    "/api/v1/workspaces/{ws}/documents",
    "/api/v1/workspaces/{ws}/members",
    "/api/v1/workspaces/{ws}/memory/versions",
]


@pytest.mark.parametrize(
    "position",
    ["abc", "2026-13-45 99:99:99", "9" * 30, "\x00"],
    ids=["word", "date", "huge", "nul"],
)
@pytest.mark.parametrize("route", LIST_ROUTES)
def test_a_forged_cursor_position_is_validation_failed_not_a_500(tenant, route, position):
    # The position goes into the list's query as a value of its ordering field: a forged one
    # (no date, a number past the column, a NUL) was a database error.
    client = tenant.client_for(tenant.member)
    url = route.format(ws=tenant.workspace.pk)

    for cursor in (_cursor(p=position), _cursor(r="1", p=position)):
        response = client.get(f"{url}?cursor={cursor}")

        error = assert_error(response, 400, "VALIDATION_FAILED")
        assert list(error["detail"]["fields"]) == ["cursor"]


def test_a_cursor_is_taken_back_only_by_the_list_that_gave_it_out(tenant):
    client = tenant.client_for(tenant.member)
    for n in range(3):
        client.put(
            f"/api/v1/workspaces/{tenant.workspace.pk}/documents?path=n{n}.md",
            {"content": "x"},
            format="json",
            HTTP_X_BASE_VERSION="0",
        )
    documents = f"/api/v1/workspaces/{tenant.workspace.pk}/documents"
    page = client.get(f"{documents}?limit=1").json()

    assert client.get(page["next"]).status_code == 200
    cursor = page["next"].split("cursor=")[1].split("&")[0]
    response = client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/members?cursor={cursor}")
    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == ["cursor"]


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


# The POST routes that take no body: what a client sends them is refused, never ignored (a
# client asking for a shorter-lived JWT or key session must not silently get the default).
BODYLESS_POSTS = [
    "/api/v1/auth/jwt",
    "/api/v1/workspaces/{ws}/key-sessions",
    "/api/v1/workspaces/{ws}/memory/proposals/{proposal}/apply",
    "/api/v1/workspaces/{ws}/memory/proposals/{proposal}/dismiss",
]


def _bodyless_state() -> tuple[object, ...]:
    return (
        KeySession.objects.count(),
        list(Proposal.objects.values_list("status", flat=True)),
        FileVersion.objects.count(),
    )


@pytest.mark.parametrize("route", BODYLESS_POSTS)
@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        ('{"expiresInSeconds": 60}', "application/json", 400, "VALIDATION_FAILED"),
        ("expiresInSeconds=60", "application/x-www-form-urlencoded", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ],
    ids=["json field", "form"],
)
def test_a_body_sent_to_a_route_that_takes_none_is_refused(
    tenant, route, body, content_type, status, code
):
    proposal = proposal_create(tenant, "- likes green tea", "read_only", base_version=0)
    client = tenant.client_for(tenant.member)
    url = route.format(ws=tenant.workspace.pk, proposal=proposal.pk)
    before = _bodyless_state()

    response = client.post(url, data=body, content_type=content_type, HTTP_X_BASE_VERSION="0")

    error = assert_error(response, status, code)
    if code == "VALIDATION_FAILED":
        assert set(error["detail"]["fields"]) == {"expiresInSeconds"}
    assert _bodyless_state() == before


# The DELETE routes take no body either: one was ignored, and the delete went ahead.
BODYLESS_DELETES = ["token", "member", "document", "space document"]


def _bodyless_delete(tenant, route: str) -> tuple[APIClient, str, dict[str, Any]]:
    """The client, URL and headers of a DELETE of `route` that would succeed without a body."""
    client = tenant.client_for(tenant.member)
    workspace = f"/api/v1/workspaces/{tenant.workspace.pk}"
    if route == "token":
        token, _ = api_token_create(user=tenant.member, team=tenant.team, name="spare")
        return client, f"/api/v1/tokens/{token.pk}", {}
    if route == "member":
        admin = tenant.client_for(tenant.admin)
        return admin, f"{workspace}/members/{tenant.member.pk}", {}
    if route == "document":
        url = f"{workspace}/documents?path=notes/a.md"
        client.put(url, {"content": "x\n"}, format="json", HTTP_X_BASE_VERSION="0")
        return client, url, {"HTTP_X_BASE_VERSION": "1"}
    url = "/api/v1/memory/doc?visibility=org&name=notes&path=a.md"
    client.put(url, b"x\n", content_type="text/markdown", HTTP_X_BASE_VERSION="0")
    return client, url, {"HTTP_X_BASE_VERSION": "1"}


def _deletable_state() -> tuple[object, ...]:
    return (
        ApiToken.objects.filter(revoked_at__isnull=True).count(),
        WorkspaceMembership.objects.count(),
        File.objects.filter(deleted_at__isnull=True).count(),
        SpaceDocument.objects.count(),
    )


@pytest.mark.parametrize("route", BODYLESS_DELETES)
@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        ('{"force": true}', "application/json", 400, "VALIDATION_FAILED"),
        ("force=1", "application/x-www-form-urlencoded", 415, "UNSUPPORTED_MEDIA_TYPE"),
    ],
    ids=["json field", "form"],
)
def test_a_body_sent_to_a_delete_is_refused_and_nothing_is_deleted(
    tenant, route, body, content_type, status, code
):
    client, url, headers = _bodyless_delete(tenant, route)
    before = _deletable_state()

    response = client.delete(url, data=body, content_type=content_type, **headers)
    refused_state = _deletable_state()
    empty = client.delete(url, data="{}", content_type="application/json", **headers)

    # A space document's route reads Markdown: a JSON body, even `{}`, is of another type.
    markdown_route = route == "space document"
    error = assert_error(
        response,
        415 if markdown_route else status,
        code if not markdown_route else "UNSUPPORTED_MEDIA_TYPE",
    )
    if code == "VALIDATION_FAILED" and not markdown_route:
        assert set(error["detail"]["fields"]) == {"force"}
    assert refused_state == before
    assert empty.status_code == (415 if markdown_route else 200 if route == "document" else 204)


def test_a_markdown_body_sent_to_a_space_documents_delete_is_415_and_nothing_is_deleted(tenant):
    # The route reads Markdown for its PUT, so the parser hands a DELETE's Markdown body over
    # as bytes: it is refused as every other body sent to this DELETE is, not as a request to
    # send "a dictionary" (which is 415 here too).
    client, url, headers = _bodyless_delete(tenant, "space document")
    before = _deletable_state()

    response = client.delete(url, data=b"x\n", content_type="text/markdown", **headers)

    error = assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert "dictionary" not in error["message"]
    assert _deletable_state() == before
