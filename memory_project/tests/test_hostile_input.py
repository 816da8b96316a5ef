"""Hostile request input, as a table of cases: each gets its documented code, and nothing
is written."""

from __future__ import annotations

import json

import pytest

from automation.models import Admission, Conversation
from automation.services import conversation_create
from memory_project.api.parsers import MAX_JSON_DEPTH, nesting_exceeds
from memory_project.tests.test_error_shape import assert_shape
from memory_project.tests.test_tenancy_matrix import UNSTORABLE_ID
from workspaces.models import AuditEvent, File, FileVersion, Workspace, WorkspaceMembership


def nested(depth: int) -> str:
    """A JSON array nested `depth` levels deep, as text (json.dumps would recurse)."""
    return "[" * depth + "]" * depth


def deep_body(field: str, depth: int) -> str:
    return f'{{"{field}": {nested(depth)}}}'


# (route under the workspace or conversation, method, the field that carries the nesting,
# extra headers): every kind of JSON body a person's client sends.
JSON_ROUTES = [
    ("/api/v1/workspaces/{ws}/memory", "put", "content", {"HTTP_X_BASE_VERSION": "0"}),
    ("/api/v1/workspaces/{ws}/memory/policy", "put", "mode", {}),
    ("/api/v1/workspaces/{ws}/ai", "put", "enabled", {}),
    ("/api/v1/workspaces/{ws}/documents?path=a.md", "put", "content", {"HTTP_X_BASE_VERSION": "0"}),
    ("/api/v1/workspaces/{ws}/documents/move", "post", "from", {"HTTP_X_BASE_VERSION": "1"}),
    ("/api/v1/agents/assistant/conversations", "post", "workspaceId", {}),
    ("/api/v1/agents/assistant/{conv}/messages", "post", "text", {"HTTP_IDEMPOTENCY_KEY": "k"}),
]


def _written_rows() -> tuple[int, ...]:
    return (
        File.objects.count(),
        FileVersion.objects.count(),
        Conversation.objects.count(),
        Admission.objects.count(),
        AuditEvent.objects.count(),
    )


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1_000, 100_000])
@pytest.mark.parametrize(("route", "method", "field", "headers"), JSON_ROUTES)
def test_json_nested_too_deep_is_400_on_every_json_route(
    tenant, depth, route, method, field, headers
):
    client = tenant.client_for(tenant.admin)
    conversation = conversation_create(workspace=tenant.workspace, owner=tenant.admin)
    url = route.format(ws=tenant.workspace.pk, conv=conversation.pk)
    before = _written_rows()

    response = getattr(client, method)(
        url, data=deep_body(field, depth), content_type="application/json", **headers
    )

    error = assert_shape(response, 400, "MALFORMED_REQUEST")
    assert str(MAX_JSON_DEPTH) in error["message"]
    assert _written_rows() == before
    workspace = Workspace.objects.get(pk=tenant.workspace.pk)
    assert (workspace.ai_enabled, workspace.ai_consent_revision) == (True, 0)


def test_json_nested_to_the_bound_is_parsed(tenant):
    client = tenant.client_for(tenant.member)

    response = client.put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/memory",
        data=deep_body("content", MAX_JSON_DEPTH - 1),
        content_type="application/json",
        HTTP_X_BASE_VERSION="0",
    )

    # Parsed, then refused by the field's own rule: a list is not text.
    error = assert_shape(response, 400, "VALIDATION_FAILED")
    assert set(error["detail"]["fields"]) == {"content"}


@pytest.mark.parametrize(
    ("text", "exceeds"),
    [
        ("1", False),
        ("{}", False),
        (nested(MAX_JSON_DEPTH), False),
        (nested(MAX_JSON_DEPTH + 1), True),
        ('{"a": ' * MAX_JSON_DEPTH + "{}" + "}" * MAX_JSON_DEPTH, True),
        ("[" + ", ".join(["[]"] * 1000) + "]", False),
    ],
)
def test_nesting_is_measured_on_objects_and_arrays(text, exceeds):
    assert nesting_exceeds(json.loads(text), MAX_JSON_DEPTH) is exceeds


# Every route that takes a text query parameter, with that parameter percent-encoded as
# bytes that are not UTF-8: judged on the raw query string, never on Django's U+FFFD.
UNDECODABLE = ["%FF%FE.md", "notes/%C0%AF.md", "%ED%A0%80.md", "a%E2%82.md"]
QUERY_ROUTES = [
    ("get", "/api/v1/workspaces/{ws}/documents", "path", "INVALID_DOCUMENT_PATH"),
    ("put", "/api/v1/workspaces/{ws}/documents", "path", "INVALID_DOCUMENT_PATH"),
    ("delete", "/api/v1/workspaces/{ws}/documents", "path", "INVALID_DOCUMENT_PATH"),
    ("get", "/api/v1/workspaces/{ws}/documents", "prefix", "VALIDATION_FAILED"),
    ("get", "/api/v1/automation/workspaces/{ws}/documents", "path", "INVALID_DOCUMENT_PATH"),
    ("put", "/api/v1/automation/workspaces/{ws}/documents", "path", "INVALID_DOCUMENT_PATH"),
    ("delete", "/api/v1/automation/workspaces/{ws}/documents", "path", "INVALID_DOCUMENT_PATH"),
    ("get", "/api/v1/automation/workspaces/{ws}/documents", "prefix", "VALIDATION_FAILED"),
    ("get", "/api/v1/automation/workspaces/{ws}/documents/search", "q", "VALIDATION_FAILED"),
    ("get", "/api/v1/automation/workspaces/{ws}/memory", "purpose", "VALIDATION_FAILED"),
    ("get", "/api/v1/workspaces/{ws}/memory/versions", "before", "VALIDATION_FAILED"),
]


@pytest.mark.parametrize("value", UNDECODABLE)
@pytest.mark.parametrize(("method", "route", "parameter", "code"), QUERY_ROUTES)
def test_a_query_parameter_that_is_not_utf8_is_refused_on_the_raw_query_string(
    tenant, method, route, parameter, code, value
):
    client = tenant.client_for(tenant.member)
    url = route.format(ws=tenant.workspace.pk)
    before = _written_rows()
    body = {"data": json.dumps({"content": "planted"})} if method == "put" else {}

    response = getattr(client, method)(
        f"{url}?{parameter}={value}",
        content_type="application/json",
        HTTP_X_BASE_VERSION="0",
        **body,
    )

    error = assert_shape(response, 400, code)
    if code == "INVALID_DOCUMENT_PATH":
        assert error["detail"] == {"reason": "invalid_encoding"}
    else:
        assert error["detail"]["reason"] == "invalid_encoding"
        assert set(error["detail"]["fields"]) == {parameter}
    assert _written_rows() == before


def test_a_parameter_name_that_is_not_utf8_is_refused(tenant):
    client = tenant.client_for(tenant.member)

    response = client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/documents?%FF=1")

    error = assert_shape(response, 400, "VALIDATION_FAILED")
    assert error["detail"] == {
        "reason": "invalid_encoding",
        "fields": {"%FF": ["Not UTF-8 once percent-decoded."]},
    }


def test_a_percent_encoded_utf8_path_still_reads(tenant):
    client = tenant.client_for(tenant.member)
    path = "notes/caf\u00e9.md"
    client.put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/documents?path=notes/caf%C3%A9.md",
        {"content": "menu"},
        format="json",
        HTTP_X_BASE_VERSION="0",
    )

    response = client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/documents?path={path}")

    assert response.status_code == 200, response.content
    assert response.json()["content"] == "menu"
    assert File.objects.get(workspace=tenant.workspace).path == path


def test_a_body_workspace_id_no_row_can_hold_is_404(tenant):
    client = tenant.client_for(tenant.member)
    before = _written_rows()

    response = client.post(
        "/api/v1/agents/assistant/conversations", {"workspaceId": UNSTORABLE_ID}, format="json"
    )

    assert_shape(response, 404, "NOT_FOUND")
    assert _written_rows() == before


def test_a_body_user_id_no_row_can_hold_is_no_team_member(tenant):
    client = tenant.client_for(tenant.admin)
    members = WorkspaceMembership.objects.filter(workspace=tenant.workspace)
    before = set(members.values_list("user_id", flat=True))

    response = client.post(
        f"/api/v1/workspaces/{tenant.workspace.pk}/members",
        {"userId": UNSTORABLE_ID},
        format="json",
    )

    error = assert_shape(response, 422, "NOT_TEAM_MEMBER")
    assert error["detail"] == {"userId": UNSTORABLE_ID}
    assert set(members.values_list("user_id", flat=True)) == before


# A parameter sent twice: which one a route would act on is a guess (Django takes the last,
# a proxy in front may have judged the first), so it is refused, named, before any view.
REPEATED_QUERIES = [
    ("get", "/api/v1/workspaces/{ws}/documents?path=a.md&path=b.md", "path"),
    ("put", "/api/v1/workspaces/{ws}/documents?path=a.md&path=b.md", "path"),
    ("get", "/api/v1/workspaces/{ws}/memory/versions?limit=1&limit=2", "limit"),
    ("get", "/api/v1/memory/usage?visibility=org&name=n&visibility=global", "visibility"),
    ("put", "/api/v1/memory/doc?visibility=org&name=n&path=a.md&name=m", "name"),
]


@pytest.mark.parametrize(("method", "route", "parameter"), REPEATED_QUERIES)
def test_a_query_parameter_sent_twice_is_refused_and_named(tenant, method, route, parameter):
    client = tenant.client_for(tenant.member)
    before = _written_rows()
    # Each route's own kind of body, so that only the query is wrong.
    markdown = route.startswith("/api/v1/memory/")
    body = json.dumps({"content": "planted"}) if not markdown else "planted"

    response = getattr(client, method)(
        route.format(ws=tenant.workspace.pk),
        data=body if method == "put" else None,
        content_type="text/markdown" if markdown else "application/json",
        HTTP_X_BASE_VERSION="0",
    )

    error = assert_shape(response, 400, "VALIDATION_FAILED")
    assert error["detail"]["reason"] == "repeated"
    assert set(error["detail"]["fields"]) == {parameter}
    assert _written_rows() == before


@pytest.mark.parametrize(("route", "method", "field", "headers"), JSON_ROUTES)
def test_a_json_name_sent_twice_in_one_object_is_400_on_every_json_route(
    tenant, route, method, field, headers
):
    client = tenant.client_for(tenant.admin)
    conversation = conversation_create(workspace=tenant.workspace, owner=tenant.admin)
    url = route.format(ws=tenant.workspace.pk, conv=conversation.pk)
    before = _written_rows()

    response = getattr(client, method)(
        url, data=f'{{"{field}": 1, "{field}": 2}}', content_type="application/json", **headers
    )

    error = assert_shape(response, 400, "MALFORMED_REQUEST")
    assert repr(field) in error["message"]
    assert _written_rows() == before


# JSON is UTF-8 (RFC 8259, 8.1): a body declared in another charset, or under a type that
# names no one media type, is not read as though it were.
OTHER_THAN_UTF8_JSON = [
    ("application/json; charset=latin-1", "latin-1"),
    ("application/json; charset=ISO-8859-1", "latin-1"),
    ("application/json; charset=utf-16", "utf-16"),
    ("application/json; charset=utf-32", "utf-32"),
    ("application/json; charset=no-such-charset", "utf-8"),
    ("*/*", "utf-8"),
    ("application/*", "utf-8"),
]


@pytest.mark.parametrize(("content_type", "encoding"), OTHER_THAN_UTF8_JSON)
@pytest.mark.parametrize(("route", "method", "field", "headers"), JSON_ROUTES)
def test_a_json_body_declared_other_than_utf8_is_415_on_every_json_route(
    tenant, content_type, encoding, route, method, field, headers
):
    client = tenant.client_for(tenant.admin)
    conversation = conversation_create(workspace=tenant.workspace, owner=tenant.admin)
    url = route.format(ws=tenant.workspace.pk, conv=conversation.pk)
    before = _written_rows()

    response = getattr(client, method)(
        url, data=json.dumps({field: "x"}).encode(encoding), content_type=content_type, **headers
    )

    assert_shape(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert _written_rows() == before


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=UTF-8", 'application/json; charset="utf-8"']
)
def test_a_json_body_declared_utf8_is_read(tenant, content_type):
    client = tenant.client_for(tenant.admin)

    response = client.put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/memory",
        data=json.dumps({"content": "caf\u00e9"}, ensure_ascii=False).encode(),
        content_type=content_type,
        HTTP_X_BASE_VERSION="0",
    )

    assert response.status_code == 200, response.content
    assert (
        client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/memory").json()["content"]
        == "caf\u00e9"
    )
