"""ETag on document reads, and If-Match as the standard spelling of X-Base-Version."""

from __future__ import annotations

import pytest

from conftest import assert_error
from workspaces.models import File


def _document_url(tenant, path: str = "notes/a.md") -> str:
    return f"/api/v1/workspaces/{tenant.workspace.pk}/documents?path={path}"


def test_the_memory_read_carries_its_version_as_etag(memory_api):
    empty = memory_api.get()
    memory_api.save("- likes tea\n", base=0)

    saved = memory_api.get()

    assert (empty["ETag"], saved["ETag"]) == ('"0"', '"1"')


def test_a_save_based_on_the_read_etag_is_written(memory_api, tenant):
    etag = memory_api.get()["ETag"]

    response = memory_api.put({"content": "- likes tea\n"}, None, HTTP_IF_MATCH=etag)

    assert (response.status_code, response.json()["version"]) == (200, 1)
    assert memory_api.get().json()["content"] == "- likes tea\n"


def test_a_stale_if_match_is_412_with_the_detail_of_the_409(memory_api):
    memory_api.save("one", base=0)
    memory_api.save("two", base=1)

    conflict = memory_api.save("mine", base=1)
    failed = memory_api.put({"content": "mine"}, None, HTTP_IF_MATCH='"1"')

    precondition = assert_error(failed, 412, "PRECONDITION_FAILED")
    assert precondition["detail"] == assert_error(conflict, 409, "VERSION_CONFLICT")["detail"]
    assert precondition["detail"] == {"currentVersion": 2}
    assert memory_api.get().json()["content"] == "two"


def test_a_note_read_carries_its_etag_and_a_stale_if_match_write_is_412(tenant):
    client = tenant.client_for(tenant.member)
    client.put(_document_url(tenant), {"content": "one"}, format="json", HTTP_X_BASE_VERSION="0")
    etag = client.get(_document_url(tenant))["ETag"]
    client.put(_document_url(tenant), {"content": "two"}, format="json", HTTP_IF_MATCH=etag)

    stale = client.put(_document_url(tenant), {"content": "x"}, format="json", HTTP_IF_MATCH=etag)

    assert etag == '"1"'
    assert assert_error(stale, 412, "PRECONDITION_FAILED")["detail"]["currentVersion"] == 2
    assert File.objects.get(workspace=tenant.workspace).current_version == 2


@pytest.mark.parametrize("value", ["*", 'W/"0"', "0", '"0", "1"', '"abc"', '"-1"'])
def test_an_if_match_that_is_not_one_strong_tag_is_invalid_header(memory_api, tenant, value):
    response = memory_api.put({"content": "x"}, None, HTTP_IF_MATCH=value)

    assert assert_error(response, 400, "INVALID_HEADER")["detail"] == {"header": "If-Match"}
    assert not File.objects.filter(workspace=tenant.workspace).exists()


def test_if_match_and_x_base_version_must_agree(memory_api, tenant):
    response = memory_api.put({"content": "x"}, 0, HTTP_IF_MATCH='"3"')

    assert_error(response, 400, "INVALID_HEADER")
    assert not File.objects.filter(workspace=tenant.workspace).exists()


def test_agreeing_headers_are_answered_as_x_base_version(memory_api):
    memory_api.save("one", base=0)

    response = memory_api.put({"content": "x"}, 0, HTTP_IF_MATCH='"0"')

    assert_error(response, 409, "VERSION_CONFLICT")


def test_without_either_header_the_write_is_428(memory_api):
    assert_error(memory_api.put({"content": "x"}, None), 428, "BASE_VERSION_REQUIRED")
