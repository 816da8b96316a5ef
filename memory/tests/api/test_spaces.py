"""The memory space routes: /api/v1/memory/usage, /docs, /doc."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import RequestFactory
from rest_framework.test import APIClient

from conftest import Tenant, assert_error
from memory.errors import StoreUnavailable
from memory.models import SpaceDocument
from memory.spaces import selectors, services
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.tests.spaces.conftest import store_write
from memory_project.wsgi import application
from workspaces.models import AuditEvent
from workspaces.services import api_token_create

# Every behaviour, on both stores: the write path is the same whichever holds the bytes.
pytestmark = pytest.mark.usefixtures("every_store")

ORG_SPACE = {"visibility": "org", "name": "notes"}
GLOBAL_SPACE = {"visibility": "global", "name": "handbook"}
MARKDOWN = "text/markdown; charset=utf-8"
TEXT = b"---\ntitle: Deploys\ndescription: How we ship\ntags: [ops, ci]\n---\n# Deploys\nShip it.\n"


@dataclass
class SpaceApi:
    """The space routes as one credential sees them."""

    client: APIClient

    def get_usage(self, space: dict[str, str]) -> Any:
        return self.client.get("/api/v1/memory/usage", space)

    def get_docs(self, space: dict[str, str], **query: str) -> Any:
        return self.client.get("/api/v1/memory/docs", {**space, **query})

    def get_doc(self, space: dict[str, str], path: str) -> Any:
        return self.client.get("/api/v1/memory/doc", {**space, "path": path})

    def put(
        self,
        space: dict[str, str],
        path: str,
        body: bytes,
        base: int | None,
        content_type: str = MARKDOWN,
        **headers: Any,
    ) -> Any:
        if base is not None:
            headers["HTTP_X_BASE_VERSION"] = str(base)
        return self.client.put(doc_url(space, path), body, content_type=content_type, **headers)

    def delete(self, space: dict[str, str], path: str, base: int | None, **headers: Any) -> Any:
        if base is not None:
            headers["HTTP_X_BASE_VERSION"] = str(base)
        return self.client.delete(doc_url(space, path), **headers)


def doc_url(space: dict[str, str], path: str) -> str:
    return "/api/v1/memory/doc?" + urlencode({**space, "path": path})


def org_handle(tenant: Tenant, name: str = "notes") -> SpaceHandle:
    return SpaceHandle(visibility=Visibility.ORG, name=name, tenant_id=tenant.team.pk)


GLOBAL_HANDLE = SpaceHandle(visibility=Visibility.GLOBAL, name="handbook", tenant_id=None)


@pytest.fixture
def api(tenant: Tenant) -> SpaceApi:
    return SpaceApi(tenant.client_for(tenant.member))


@pytest.fixture
def superuser_api(tenant: Tenant) -> SpaceApi:
    tenant.admin.is_superuser = True
    tenant.admin.save(update_fields=["is_superuser"])
    return SpaceApi(tenant.client_for(tenant.admin))


# ---- read and write ---------------------------------------------------------------------


def test_put_creates_and_answers_the_documents_metadata(api, tenant):
    response = api.put(ORG_SPACE, "ops/deploys.md", TEXT, base=0)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["path"] == "ops/deploys.md"
    assert body["title"] == "Deploys"
    assert body["description"] == "How we ship"
    assert body["tags"] == ["ops", "ci"]
    assert body["size"] == len(TEXT)
    assert body["checksum"].startswith("sha256:")
    assert body["revision"] == 1
    assert body["updatedBy"] == f"user:{tenant.member.pk}"
    stored = store_get().read(org_handle(tenant), "ops/deploys.md")
    assert stored is not None
    assert stored.body == TEXT


def test_get_answers_the_raw_markdown_with_its_revision(api):
    api.put(ORG_SPACE, "a.md", TEXT, base=0)
    api.put(ORG_SPACE, "a.md", TEXT + b"more\n", base=1)

    response = api.get_doc(ORG_SPACE, "a.md")

    assert response.status_code == 200
    assert response["Content-Type"] == MARKDOWN
    assert response.content == TEXT + b"more\n"
    assert response["ETag"] == '"2"'
    assert response["X-Revision"] == "2"


def test_get_with_accept_markdown_only_is_served(api):
    api.put(ORG_SPACE, "a.md", TEXT, base=0)

    response = api.client.get(
        "/api/v1/memory/doc", {**ORG_SPACE, "path": "a.md"}, HTTP_ACCEPT="text/markdown"
    )

    assert response.status_code == 200
    assert response.content == TEXT


def test_a_refusal_to_an_accept_markdown_client_is_still_json(api):
    response = api.client.get(
        "/api/v1/memory/doc", {**ORG_SPACE, "path": "absent.md"}, HTTP_ACCEPT="text/markdown"
    )

    assert response["Content-Type"].startswith("application/json")
    assert_error(response, 404, "NOT_FOUND")


def test_get_of_an_absent_document_is_404(api):
    assert_error(api.get_doc(ORG_SPACE, "absent.md"), 404, "NOT_FOUND")


def test_put_without_base_version_is_428_and_writes_nothing(api, tenant):
    assert_error(api.put(ORG_SPACE, "a.md", TEXT, base=None), 428, "BASE_VERSION_REQUIRED")
    assert store_get().list(org_handle(tenant)) == []


def test_put_on_a_stale_revision_is_409_with_the_current_one(api, tenant):
    api.put(ORG_SPACE, "a.md", b"one\n", base=0)
    api.put(ORG_SPACE, "a.md", b"two\n", base=1)

    error = assert_error(api.put(ORG_SPACE, "a.md", b"mine\n", base=1), 409, "VERSION_CONFLICT")

    assert error["detail"]["currentVersion"] == 2
    stored = store_get().read(org_handle(tenant), "a.md")
    assert stored is not None
    assert stored.body == b"two\n"


def test_create_only_on_an_existing_document_is_409(api):
    api.put(ORG_SPACE, "a.md", b"one\n", base=0)

    error = assert_error(api.put(ORG_SPACE, "a.md", b"two\n", base=0), 409, "VERSION_CONFLICT")

    assert error["detail"]["currentVersion"] == 1


def test_invalid_utf8_is_400_invalid_text_and_writes_nothing(api, tenant):
    assert_error(api.put(ORG_SPACE, "a.md", b"caf\xe9\n", base=0), 400, "INVALID_TEXT")
    assert store_get().list(org_handle(tenant)) == []


def test_the_query_is_utf8_whatever_charset_the_body_declares(api, tenant):
    # Django decodes a query string with the body's charset: été.md would be Ã©tÃ©.md, in
    # the space cafÃ©.
    space = {"visibility": "org", "name": "café"}
    content_type = "text/markdown; charset=latin-1"

    response = api.put(space, "été.md", b"summer", base=0, content_type=content_type)

    assert response.status_code == 200, response.content
    assert response.json()["path"] == "été.md"
    stored = store_get().read(org_handle(tenant, name="café"), "été.md")
    assert stored is not None
    assert stored.body == b"summer"


# `*/*` and `text/*` name no one type: DRF would hand such a body to the Markdown parser.
@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "*/*", "text/*"])
def test_a_body_that_is_not_markdown_is_415(api, tenant, content_type):
    response = api.put(ORG_SPACE, "a.md", b'{"content": "x"}', base=0, content_type=content_type)

    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert store_get().list(org_handle(tenant)) == []


def test_an_empty_markdown_body_is_an_empty_document(api, tenant):
    response = api.put(ORG_SPACE, "empty.md", b"", base=0)

    assert response.status_code == 200, response.content
    assert response.json()["size"] == 0


def test_an_empty_body_of_another_type_is_415(api, tenant):
    response = api.put(ORG_SPACE, "empty.md", b"", base=0, content_type="application/json")

    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert store_get().list(org_handle(tenant)) == []


@pytest.mark.parametrize("path", ["/a.md", "a/./b.md", "a\\b.md", "../a.md", "a.txt", ""])
def test_a_path_not_in_its_canonical_spelling_is_refused(api, tenant, path):
    error = assert_error(api.put(ORG_SPACE, path, TEXT, base=0), 400, "INVALID_DOCUMENT_PATH")

    assert "reason" in error["detail"]
    assert store_get().list(org_handle(tenant)) == []


def test_delete_removes_the_document_and_frees_its_bytes(api, tenant):
    api.put(ORG_SPACE, "a.md", TEXT, base=0)

    response = api.delete(ORG_SPACE, "a.md", base=1)

    assert response.status_code == 204
    assert store_get().read(org_handle(tenant), "a.md") is None
    assert api.get_usage(ORG_SPACE).json()["usedBytes"] == 0


def test_delete_of_an_absent_document_is_404(api):
    assert_error(api.delete(ORG_SPACE, "absent.md", base=1), 404, "NOT_FOUND")


def test_delete_on_a_stale_revision_is_409_and_keeps_the_document(api, tenant):
    api.put(ORG_SPACE, "a.md", b"one\n", base=0)
    api.put(ORG_SPACE, "a.md", b"two\n", base=1)

    error = assert_error(api.delete(ORG_SPACE, "a.md", base=1), 409, "VERSION_CONFLICT")

    assert error["detail"]["currentVersion"] == 2
    assert store_get().read(org_handle(tenant), "a.md") is not None


@pytest.mark.parametrize("precondition", ["X-Base-Version", "If-Match"])
def test_a_base_read_before_a_delete_never_matches_the_document_created_after(
    api, tenant, precondition
):
    # A client read "1" (its ETag), someone deleted the document and another created it
    # again: "1" named the text deleted, so it neither writes over nor deletes the new one.
    api.put(ORG_SPACE, "a.md", b"the text read\n", base=0)
    etag = api.get_doc(ORG_SPACE, "a.md")["ETag"]
    assert api.delete(ORG_SPACE, "a.md", base=1).status_code == 204
    created = api.put(ORG_SPACE, "a.md", b"a new note\n", base=0).json()
    assert api.get_doc(ORG_SPACE, "a.md")["ETag"] != etag
    based = {"HTTP_IF_MATCH": etag} if precondition == "If-Match" else {}
    base = None if based else 1
    status, code = (412, "PRECONDITION_FAILED") if based else (409, "VERSION_CONFLICT")

    put = assert_error(api.put(ORG_SPACE, "a.md", b"over it\n", base=base, **based), status, code)
    delete = assert_error(api.delete(ORG_SPACE, "a.md", base=base, **based), status, code)

    assert put["detail"]["currentVersion"] == delete["detail"]["currentVersion"]
    assert put["detail"]["currentVersion"] == created["revision"]
    stored = store_get().read(org_handle(tenant), "a.md")
    assert stored is not None
    assert stored.body == b"a new note\n"


def test_delete_without_base_version_is_428(api, tenant):
    api.put(ORG_SPACE, "a.md", b"one\n", base=0)

    assert_error(api.delete(ORG_SPACE, "a.md", base=None), 428, "BASE_VERSION_REQUIRED")
    assert store_get().read(org_handle(tenant), "a.md") is not None


# ---- listing and usage ---------------------------------------------------------------------


def test_listing_is_recursive_under_dir_with_index_fields_and_attribution(api, tenant):
    api.put(ORG_SPACE, "ops/deploys.md", TEXT, base=0)
    api.put(ORG_SPACE, "ops/deep/oncall.md", b"# On call\n", base=0)
    api.put(ORG_SPACE, "opsx.md", b"# Not under ops\n", base=0)

    response = api.get_docs(ORG_SPACE, dir="ops")

    assert response.status_code == 200
    documents = response.json()["documents"]
    assert [document["path"] for document in documents] == [
        "ops/deep/oncall.md",
        "ops/deploys.md",
    ]
    assert documents[0]["title"] == "On call"
    assert documents[1]["tags"] == ["ops", "ci"]
    assert {document["updatedBy"] for document in documents} == {f"user:{tenant.member.pk}"}
    assert set(documents[0]) == {
        "path",
        "title",
        "description",
        "tags",
        "size",
        "checksum",
        "revision",
        "updatedBy",
        "updatedAt",
    }


def test_listing_a_space_never_written_is_an_empty_list(api):
    response = api.get_docs(ORG_SPACE)

    assert response.status_code == 200
    assert response.json() == {"documents": []}


@pytest.mark.parametrize("directory", ["ops/", "/ops", "ops/../x", "a//b"])
def test_listing_a_dir_not_in_its_canonical_spelling_is_refused(api, directory):
    assert_error(api.get_docs(ORG_SPACE, dir=directory), 400, "INVALID_DOCUMENT_PATH")


def test_usage_of_a_space_never_written_is_zero_against_its_quotas(api, tenant, settings):
    response = api.get_usage(ORG_SPACE)

    assert response.status_code == 200
    assert response.json() == {
        "space": {
            "id": org_handle(tenant).id,
            "visibility": "org",
            "name": "notes",
            "project": "",
            "bot": "",
            "run": "",
        },
        "usedBytes": 0,
        "quotaBytes": settings.MEMORY_QUOTA_SPACE_BYTES["org"],
        "tenantUsedBytes": 0,
        "tenantQuotaBytes": settings.MEMORY_QUOTA_TENANT_BYTES,
    }


def test_usage_counts_the_space_and_the_tenant(api):
    api.put(ORG_SPACE, "a.md", b"12345", base=0)
    api.put({"visibility": "org", "name": "other"}, "b.md", b"123", base=0)

    body = api.get_usage(ORG_SPACE).json()

    assert body["usedBytes"] == 5
    assert body["tenantUsedBytes"] == 8


# ---- tenancy and the global space ------------------------------------------------------------


def test_two_teams_naming_the_same_handle_see_different_spaces(make_tenant):
    first, second = make_tenant(), make_tenant()
    first_api = SpaceApi(first.client_for(first.member))
    second_api = SpaceApi(second.client_for(second.member))
    first_api.put(ORG_SPACE, "a.md", b"first team\n", base=0)

    assert_error(second_api.get_doc(ORG_SPACE, "a.md"), 404, "NOT_FOUND")
    assert second_api.get_docs(ORG_SPACE).json() == {"documents": []}
    assert second_api.get_usage(ORG_SPACE).json()["usedBytes"] == 0
    assert second_api.put(ORG_SPACE, "a.md", b"second team\n", base=0).status_code == 200
    assert first_api.get_doc(ORG_SPACE, "a.md").content == b"first team\n"
    assert second_api.get_doc(ORG_SPACE, "a.md").content == b"second team\n"


def test_user_spaces_are_the_callers_own(tenant):
    member_api = SpaceApi(tenant.client_for(tenant.member))
    admin_api = SpaceApi(tenant.client_for(tenant.admin))
    space = {"visibility": "user", "name": "scratch"}
    member_api.put(space, "a.md", b"mine\n", base=0)

    assert_error(admin_api.get_doc(space, "a.md"), 404, "NOT_FOUND")


@pytest.mark.parametrize("verb", ["put", "delete"])
def test_a_global_write_by_a_non_superuser_is_403_and_changes_nothing(api, superuser_api, verb):
    superuser_api.put(GLOBAL_SPACE, "a.md", b"kept\n", base=0)
    audited = AuditEvent.objects.count()

    if verb == "put":
        response = api.put(GLOBAL_SPACE, "a.md", b"changed\n", base=1)
    else:
        response = api.delete(GLOBAL_SPACE, "a.md", base=1)

    assert_error(response, 403, "GLOBAL_SPACE_WRITE_DENIED")
    stored = store_get().read(GLOBAL_HANDLE, "a.md")
    assert stored is not None
    assert stored.body == b"kept\n"
    assert AuditEvent.objects.count() == audited


def test_a_superusers_global_write_and_delete_are_audited(superuser_api, tenant):
    superuser_api.put(GLOBAL_SPACE, "a.md", b"one\n", base=0)
    superuser_api.delete(GLOBAL_SPACE, "a.md", base=1)

    events = list(
        AuditEvent.objects.filter(
            action__in=[
                AuditEvent.Action.SPACE_GLOBAL_WRITTEN,
                AuditEvent.Action.SPACE_GLOBAL_DELETED,
            ]
        ).order_by("pk")
    )
    assert [event.action for event in events] == ["space_global_written", "space_global_deleted"]
    assert {event.actor_id for event in events} == {tenant.admin.pk}
    assert events[0].detail == {
        "space": GLOBAL_HANDLE.id,
        "updatedBy": f"user:{tenant.admin.pk}",
        "path": "a.md",
        "revision": 1,
        "bytes": 4,
    }
    assert store_get().read(GLOBAL_HANDLE, "a.md") is None


def test_global_reads_are_open_to_every_authenticated_caller(superuser_api, make_tenant):
    superuser_api.put(GLOBAL_SPACE, "a.md", b"# Handbook\n", base=0)
    stranger = make_tenant()
    stranger_api = SpaceApi(stranger.client_for(stranger.member))

    assert stranger_api.get_doc(GLOBAL_SPACE, "a.md").content == b"# Handbook\n"
    assert [d["title"] for d in stranger_api.get_docs(GLOBAL_SPACE).json()["documents"]] == [
        "Handbook"
    ]
    usage = stranger_api.get_usage(GLOBAL_SPACE).json()
    assert usage["usedBytes"] == len(b"# Handbook\n")
    assert usage["tenantQuotaBytes"] == 0


def test_the_routes_need_a_credential(client):
    assert_error(client.get("/api/v1/memory/usage", ORG_SPACE), 401, "AUTHENTICATION_REQUIRED")


# ---- the handle, through the API -------------------------------------------------------------

HANDLE_REFUSALS = [
    ({"name": "n"}, "unknown_visibility", "visibility"),
    ({"visibility": "team", "name": "n"}, "unknown_visibility", "visibility"),
    ({"visibility": "org"}, "missing_name", "name"),
    ({"visibility": "org", "name": ""}, "missing_name", "name"),
    ({"visibility": "org", "name": "../escape"}, "bad_name", "name"),
    ({"visibility": "org", "name": "a/b"}, "bad_name", "name"),
    ({"visibility": "org", "name": "a\\b"}, "bad_name", "name"),
    ({"visibility": "org", "name": "."}, "bad_name", "name"),
    ({"visibility": "org", "name": ".."}, "bad_name", "name"),
    ({"visibility": "org", "name": "x" * 129}, "bad_name", "name"),
    ({"visibility": "private", "name": "n"}, "missing_qualifier", "run"),
    ({"visibility": "bot", "name": "n", "project": "p"}, "missing_qualifier", "bot"),
    ({"visibility": "bot", "name": "n", "bot": "b"}, "missing_qualifier", "project"),
    ({"visibility": "project", "name": "n"}, "missing_qualifier", "project"),
    ({"visibility": "org", "name": "n", "project": "p"}, "unexpected_qualifier", "project"),
    ({"visibility": "global", "name": "n", "bot": "b"}, "unexpected_qualifier", "bot"),
    ({"visibility": "user", "name": "n", "run": "r"}, "unexpected_qualifier", "run"),
    (
        {"visibility": "cross_project", "name": "n", "project": "p"},
        "unexpected_qualifier",
        "project",
    ),
    (
        {"visibility": "project", "name": "n", "project": "p", "bot": "b"},
        "unexpected_qualifier",
        "bot",
    ),
    (
        {"visibility": "private", "name": "n", "run": "r", "project": "p"},
        "unexpected_qualifier",
        "project",
    ),
] + [
    (
        {"visibility": visibility, "name": "n", **others, qualifier: value},
        "bad_qualifier",
        qualifier,
    )
    for visibility, qualifier, others in [
        ("private", "run", {}),
        ("bot", "project", {"bot": "b"}),
        ("bot", "bot", {"project": "p"}),
        ("project", "project", {}),
    ]
    for value in ["../escape", "a/b", "a\\b", ".", "..", ""]
]


@pytest.mark.parametrize(("query", "reason", "field"), HANDLE_REFUSALS)
def test_an_invalid_space_is_400_space_invalid_naming_reason_and_field(api, query, reason, field):
    error = assert_error(api.get_usage(query), 400, "SPACE_INVALID")

    assert error["detail"]["reason"] == reason
    assert error["detail"]["field"] == field


@pytest.mark.parametrize(
    "char",
    ["\x85", "\u202e", "\u200b", "\u2028", "\u034f", "\ufeff"],
    ids=["C1 control", "RLO", "zero-width space", "line separator", "CGJ", "BOM"],
)
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"visibility": "org"}, "name"),
        ({"visibility": "project", "name": "n"}, "project"),
    ],
)
def test_a_space_name_with_an_invisible_character_is_bad(api, query, field, char):
    # `notes` and `no\u200btes` would be two spaces that read alike: refused as a document
    # path's segment is, not only the C0 controls.
    error = assert_error(api.get_usage({**query, field: f"no{char}tes"}), 400, "SPACE_INVALID")

    assert error["detail"]["field"] == field
    assert error["detail"]["problem"] == "control_character"


@pytest.mark.parametrize(
    "query",
    [
        {"visibility": "private", "name": "n", "run": "run-1"},
        {"visibility": "bot", "name": "n", "project": "my.app", "bot": "helper"},
        {"visibility": "project", "name": "n", "project": "my.app"},
        {"visibility": "cross_project", "name": "n"},
        {"visibility": "user", "name": "n"},
        {"visibility": "org", "name": "n.v2"},
    ],
)
def test_every_visibility_takes_its_qualifiers_and_writes(api, query):
    assert api.put(query, "a.md", b"# A\n", base=0).status_code == 200
    assert api.get_doc(query, "a.md").content == b"# A\n"
    assert api.get_usage(query).json()["space"]["visibility"] == query["visibility"]


# ---- one code, one status, on every verb -----------------------------------------------------


def every_verb(api: SpaceApi, space: dict[str, str]) -> list[Any]:
    return [
        api.get_usage(space),
        api.get_docs(space),
        api.get_doc(space, "a.md"),
        api.put(space, "a.md", b"text\n", base=0),
        api.delete(space, "a.md", base=1),
    ]


def test_space_invalid_is_400_on_every_verb(api):
    responses = every_verb(api, {"visibility": "org", "name": ".."})

    assert [response.status_code for response in responses] == [400] * 5
    assert {response.json()["error"]["code"] for response in responses} == {"SPACE_INVALID"}


@pytest.mark.parametrize("name", [" ", "n ", " n", "\u3000n", "n\xa0"])
@pytest.mark.parametrize("field", ["name", "project"])
def test_a_space_name_with_surrounding_whitespace_is_refused_on_every_verb(api, field, name):
    # `n` and `n ` would be two spaces that `du` shows alike: refused as an invisible
    # character is, before anything is read or written.
    space = {"visibility": "project", "name": "n", "project": "p", field: name}

    responses = every_verb(api, space)

    assert [response.status_code for response in responses] == [400] * 5
    for response in responses:
        error = assert_error(response, 400, "SPACE_INVALID")
        assert error["detail"] == {
            "reason": "bad_name" if field == "name" else "bad_qualifier",
            "field": field,
            "problem": "surrounding_whitespace",
        }


class UnreachableStore:
    def __getattr__(self, name: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailable()

        return refuse


def test_store_unavailable_is_503_on_every_verb(api, monkeypatch):
    for module in (services, selectors):
        monkeypatch.setattr(module, "store_get", UnreachableStore)

    responses = every_verb(api, ORG_SPACE)

    assert [response.status_code for response in responses] == [503] * 5
    assert {response.json()["error"]["code"] for response in responses} == {"STORE_UNAVAILABLE"}


@pytest.mark.parametrize(
    "unknown",
    [{"user": "5"}, {"tenant": "9"}, {"team": "9"}, {"pth": "a.md"}],
    ids=["user", "tenant", "team", "misspelt"],
)
def test_a_query_parameter_no_space_route_takes_is_refused_on_every_verb(api, unknown):
    # A space's tenant and user come from the credential, never the query (there is no
    # ?user=): a client naming another one must not be answered with its own space.
    responses = every_verb(api, {**ORG_SPACE, **unknown})

    assert [response.status_code for response in responses] == [400] * 5
    for response in responses:
        error = assert_error(response, 400, "VALIDATION_FAILED")
        assert set(error["detail"]["fields"]) == set(unknown)
    assert api.get_docs(ORG_SPACE).json()["documents"] == []


# The operations `every_verb` calls, in its order.
EVERY_VERB = [
    ("/api/v1/memory/usage", "get"),
    ("/api/v1/memory/docs", "get"),
    ("/api/v1/memory/doc", "get"),
    ("/api/v1/memory/doc", "put"),
    ("/api/v1/memory/doc", "delete"),
]


def test_the_schema_lists_store_unavailable_on_every_verb_that_answers_it(api, monkeypatch):
    for module in (services, selectors):
        monkeypatch.setattr(module, "store_get", UnreachableStore)
    schema = api.client.get("/api/schema/", {"format": "json"}).json()

    responses = every_verb(api, ORG_SPACE)

    for (route, method), response in zip(EVERY_VERB, responses, strict=True):
        assert "STORE_UNAVAILABLE" in listed_codes(schema, route, method, response.status_code)


def test_a_listing_of_a_space_holding_an_unreadable_document_is_422_as_its_schema_says(
    api, every_store
):
    if every_store != "database":
        pytest.skip("the filesystem store keeps bodies as they are: nothing to fail to open")
    api.put(ORG_SPACE, "a.md", b"kept\n", base=0)
    rows = SpaceDocument.objects.all()
    tampered = bytearray(rows.get().body_ciphertext)
    tampered[20] ^= 0x01
    rows.update(body_ciphertext=bytes(tampered))
    schema = api.client.get("/api/schema/", {"format": "json"}).json()

    response = api.get_docs(ORG_SPACE)

    assert_error(response, 422, "DOCUMENT_UNREADABLE")
    assert "DOCUMENT_UNREADABLE" in listed_codes(schema, "/api/v1/memory/docs", "get", 422)


def listed_codes(schema: dict[str, Any], route: str, method: str, status: int) -> set[str]:
    """The codes the schema lists for `method route` under `status` (none if no such status)."""
    response = schema["paths"][route][method]["responses"].get(str(status), {})
    return set(response.get("content", {}).get("application/json", {}).get("examples", {}))


# ---- the Origin gate ---------------------------------------------------------------------------


def test_a_foreign_origin_cannot_put_or_delete(api, tenant):
    api.put(ORG_SPACE, "a.md", b"kept\n", base=0)

    put = api.put(ORG_SPACE, "a.md", b"changed\n", base=1, HTTP_ORIGIN="https://evil.example")
    delete = api.delete(ORG_SPACE, "a.md", base=1, HTTP_ORIGIN="https://evil.example")
    create = api.put(ORG_SPACE, "b.md", b"new\n", base=0, HTTP_ORIGIN="https://evil.example")

    for response in (put, delete, create):
        assert_error(response, 403, "CROSS_ORIGIN_REJECTED")
    assert [meta.path for meta in store_get().list(org_handle(tenant))] == ["a.md"]
    stored = store_get().read(org_handle(tenant), "a.md")
    assert stored is not None
    assert stored.body == b"kept\n"


# ---- the ceiling, and bodies that lie about their length ----------------------------------------


@pytest.fixture
def small_ceiling(settings):
    settings.MEMORY_MAX_DOCUMENT_BYTES = 64 * 1024
    return settings.MEMORY_MAX_DOCUMENT_BYTES


def test_a_document_over_the_ceiling_is_422_and_nothing_is_written(api, tenant, small_ceiling):
    error = assert_error(
        api.put(ORG_SPACE, "big.md", b"x" * (small_ceiling + 1), base=0),
        422,
        "DOCUMENT_TOO_LARGE",
    )

    assert error["detail"] == {"limitBytes": small_ceiling, "bytes": small_ceiling + 1}
    assert store_get().list(org_handle(tenant)) == []
    assert api.get_usage(ORG_SPACE).json()["usedBytes"] == 0


def test_a_document_at_the_ceiling_is_stored_whole(api, tenant, small_ceiling):
    response = api.put(ORG_SPACE, "big.md", b"x" * small_ceiling, base=0)

    assert response.status_code == 200
    assert response.json()["size"] == small_ceiling


class Unreadable(io.RawIOBase):
    """A request body that fails the test if anything reads it."""

    def read(self, size: int = -1) -> bytes:
        raise AssertionError("the body was read")

    def readline(self, size: int | None = -1) -> bytes:
        raise AssertionError("the body was read")


@dataclass
class WsgiResult:
    status: int
    body: bytes


def wsgi_put(tenant: Tenant, path: str, wsgi_input: Any, **environ: Any) -> WsgiResult:
    """PUT through memory_project.wsgi.application, the stack the servers run, with a
    hand-made body stream and environ."""
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="wsgi")
    # An empty body leaves Content-Length unset: the test sets its own, or none (chunked).
    request_environ = (
        RequestFactory()
        .put(
            doc_url(ORG_SPACE, path),
            b"",
            CONTENT_TYPE=MARKDOWN,
            HTTP_AUTHORIZATION=f"Bearer {token}",
            HTTP_X_BASE_VERSION="0",
            **environ,
        )
        .environ
    )
    request_environ["wsgi.input"] = wsgi_input
    statuses: list[str] = []
    chunks = application(request_environ, lambda status, headers: statuses.append(status))
    return WsgiResult(status=int(statuses[0].split()[0]), body=b"".join(chunks))


@pytest.mark.django_db(transaction=True)
def test_the_ceiling_is_judged_from_content_length_before_the_body_is_read(tenant, settings):
    declared = settings.MEMORY_MAX_DOCUMENT_BYTES + 1

    result = wsgi_put(tenant, "big.md", Unreadable(), CONTENT_LENGTH=str(declared))

    assert result.status == 422
    assert b"DOCUMENT_TOO_LARGE" in result.body
    assert store_get().list(org_handle(tenant)) == []


@pytest.mark.django_db(transaction=True)
def test_a_body_longer_than_its_content_length_is_refused_not_truncated(tenant, settings):
    body = b"# Head\n" + b"x" * (settings.MEMORY_MAX_DOCUMENT_BYTES + 100)

    result = wsgi_put(tenant, "lying.md", io.BytesIO(body), CONTENT_LENGTH="7")

    assert result.status == 400
    assert b"MALFORMED_REQUEST" in result.body
    assert store_get().list(org_handle(tenant)) == []
    assert store_get().usage(org_handle(tenant)).used_bytes == 0


@pytest.mark.django_db(transaction=True)
def test_a_body_shorter_than_its_content_length_is_refused_not_truncated(tenant):
    result = wsgi_put(tenant, "short.md", io.BytesIO(b"# Cut\n"), CONTENT_LENGTH="4096")

    assert result.status == 400
    assert b"MALFORMED_REQUEST" in result.body
    assert store_get().list(org_handle(tenant)) == []


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_past_the_ceiling_is_refused_not_truncated(tenant, settings):
    body = b"x" * (settings.MEMORY_MAX_DOCUMENT_BYTES + 1)

    result = wsgi_put(
        tenant,
        "chunked.md",
        io.BytesIO(body),
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input_terminated": True},
    )

    assert result.status == 422
    assert b"DOCUMENT_TOO_LARGE" in result.body
    assert store_get().list(org_handle(tenant)) == []


@pytest.mark.django_db(transaction=True)
def test_an_honest_body_through_the_wsgi_stack_is_stored_whole(tenant):
    body = b"# Whole\n" + b"y" * 10_000

    result = wsgi_put(tenant, "whole.md", io.BytesIO(body), CONTENT_LENGTH=str(len(body)))

    assert result.status == 200, result.body
    stored = store_get().read(org_handle(tenant), "whole.md")
    assert stored is not None
    assert stored.body == body


# ---- a stored body that is not UTF-8 ----------------------------------------------------------

# Only the store can hold it (the write path refuses it); the filesystem store's files can be
# edited on disk.
NOT_UTF8 = b"# Caf\xe9\n"


def test_a_stored_body_that_is_not_utf8_is_422_document_unreadable_and_still_listed(api, tenant):
    store_write(store_get(), org_handle(tenant), "bad.md", NOT_UTF8)
    assert api.put(ORG_SPACE, "good.md", b"# Good\n", base=0).status_code == 200

    error = assert_error(api.get_doc(ORG_SPACE, "bad.md"), 422, "DOCUMENT_UNREADABLE")
    listed = api.get_docs(ORG_SPACE)

    assert error["detail"] == {"reason": "not_utf8", "path": "bad.md"}
    assert listed.status_code == 200
    assert [each["path"] for each in listed.json()["documents"]] == ["bad.md", "good.md"]
    # Freed like any other: the way out for whoever finds it.
    assert api.delete(ORG_SPACE, "bad.md", base=1).status_code == 204


# ---- a document stored under a path no longer valid ---------------------------------------------


@pytest.mark.parametrize("stored", ["old/./b.md", "old//b.md", "Old/B.MD"])
def test_a_document_under_a_path_no_longer_valid_is_deleted_by_that_spelling(api, tenant, stored):
    # Only the store can hold it (the path rule refuses it on every write); export lists it
    # in `unaddressable`. Deleting it by the spelling listed is the way to free its bytes.
    handle = org_handle(tenant)
    store_write(store_get(), handle, stored, b"legacy\n")
    listed = [each["path"] for each in api.get_docs(ORG_SPACE).json()["documents"]]

    deleted = api.delete(ORG_SPACE, stored, base=1)

    assert listed == [stored]
    assert deleted.status_code == 204
    assert store_get().list(handle) == []
    assert store_get().usage(handle).used_bytes == 0
    event = AuditEvent.objects.get(action="space_unaddressable_deleted")
    assert event.detail["path"] == stored
    assert event.detail["space"] == handle.id


def test_a_path_no_longer_valid_that_holds_no_document_is_still_refused(api, tenant):
    store_write(store_get(), org_handle(tenant), "old/./b.md", b"legacy\n")

    refused = api.delete(ORG_SPACE, "old/./c.md", base=1)

    assert_error(refused, 400, "INVALID_DOCUMENT_PATH")
    assert [meta.path for meta in store_get().list(org_handle(tenant))] == ["old/./b.md"]
