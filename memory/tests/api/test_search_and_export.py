"""A person's search over notes and memory (/api/v1/workspaces/{id}/search) and the two
exports: memory as Markdown (/memory/export) and the notes as an `iterion.memory.v1`
archive (/documents/export), refused whole on a credential."""

from __future__ import annotations

import gzip
import io
import json
import logging
import tarfile
from urllib.parse import urlencode

import pytest

from conftest import assert_error
from memory.models import MEMORY_PATH
from memory.services import memory_save
from memory.spaces.archive import ImportStrategy, space_import
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter
from memory.tests.secret_corpus import CREDENTIALS


def put_note(client, workspace_id: int, path: str, content: str, base: int = 0) -> None:
    response = client.put(
        f"/api/v1/workspaces/{workspace_id}/documents?{urlencode({'path': path})}",
        {"content": content},
        format="json",
        HTTP_X_BASE_VERSION=str(base),
    )
    assert response.status_code == 200, response.content


def search(client, workspace_id: int, **query: str):
    return client.get(f"/api/v1/workspaces/{workspace_id}/search?{urlencode(query)}")


def test_search_finds_notes_and_memory_case_insensitively(tenant):
    client = tenant.client_for(tenant.member)
    put_note(client, tenant.workspace.pk, "ideas/plan.md", "Ship the Kettle on Friday\n")
    put_note(client, tenant.workspace.pk, "other.md", "nothing here\n")
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=0, content="- kettle\n"
    )

    response = search(client, tenant.workspace.pk, q="KETTLE")

    assert response.status_code == 200
    body = response.json()
    assert [(hit["path"], hit["isMemory"]) for hit in body["results"]] == [
        (MEMORY_PATH, True),
        ("ideas/plan.md", False),
    ]
    assert "Kettle" in body["results"][1]["snippet"]
    assert (body["truncated"], body["nextCursor"]) == (False, None)


def test_search_is_bounded_and_continues_from_the_cursor(tenant):
    client = tenant.client_for(tenant.member)
    for number in range(3):
        put_note(client, tenant.workspace.pk, f"n{number}.md", "tea\n")

    first = search(client, tenant.workspace.pk, q="tea", limit="2").json()
    rest = search(client, tenant.workspace.pk, q="tea", cursor=first["nextCursor"]).json()

    assert [hit["path"] for hit in first["results"]] == ["n0.md", "n1.md"]
    assert first["truncated"] is True
    assert [hit["path"] for hit in rest["results"]] == ["n2.md"]


def test_search_of_another_teams_workspace_is_404(tenant, make_tenant):
    other = make_tenant()
    put_note(other.client_for(other.member), other.workspace.pk, "secret.md", "tea\n")

    response = search(tenant.client_for(tenant.member), other.workspace.pk, q="tea")

    assert_error(response, 404, "NOT_FOUND")


def test_search_without_a_query_is_validation_failed(tenant):
    response = search(tenant.client_for(tenant.member), tenant.workspace.pk)

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert "q" in error["detail"]["fields"]


def test_search_never_logs_its_query(tenant, caplog):
    client = tenant.client_for(tenant.member)
    put_note(client, tenant.workspace.pk, "a.md", "zebra-crossing\n")

    with caplog.at_level(logging.DEBUG):
        assert search(client, tenant.workspace.pk, q="zebra-crossing").status_code == 200
        assert_error(search(client, tenant.workspace.pk, q="z" * 201), 400, "VALIDATION_FAILED")

    assert "zebra" not in caplog.text
    assert "zzzz" not in caplog.text


def test_memory_export_is_the_current_text_as_a_markdown_attachment(tenant):
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="- tea\n")
    memory_save(
        workspace=tenant.workspace, author=tenant.member, base_version=1, content="- café\n"
    )

    response = tenant.client_for(tenant.member).get(
        f"/api/v1/workspaces/{tenant.workspace.pk}/memory/export"
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="memory-')
    assert response["X-Version"] == "2"
    assert response.content.decode() == "- café\n"


def _archive_entries(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        return {
            member.name: tar.extractfile(member).read()  # type: ignore[union-attr]
            for member in tar.getmembers()
        }


def test_notes_export_is_an_archive_of_the_live_notes_without_memory(tenant):
    client = tenant.client_for(tenant.member)
    put_note(client, tenant.workspace.pk, "ideas/plan.md", "plan\n")
    put_note(client, tenant.workspace.pk, "gone.md", "gone\n")
    client.delete(
        f"/api/v1/workspaces/{tenant.workspace.pk}/documents?path=gone.md",
        HTTP_X_BASE_VERSION="1",
    )
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="- tea\n")

    response = client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/documents/export")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    entries = _archive_entries(b"".join(response.streaming_content))
    assert list(entries) == ["manifest.json", "docs/ideas/plan.md", "checksums.sha256"]
    assert entries["docs/ideas/plan.md"] == b"plan\n"
    manifest = json.loads(entries["manifest.json"])
    assert manifest["format"] == "iterion.memory.v1"
    assert [document["path"] for document in manifest["documents"]] == ["ideas/plan.md"]


def test_a_notes_archive_imports_into_a_team_memory_space(tenant):
    client = tenant.client_for(tenant.member)
    put_note(client, tenant.workspace.pk, "ideas/plan.md", "plan\n")
    exported = b"".join(
        client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/documents/export").streaming_content
    )
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)

    report = space_import(
        handle=handle,
        archive=io.BytesIO(exported),
        strategy=ImportStrategy.SKIP,
        dry_run=False,
        writer=SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk),
    )

    assert report.imported == 1
    stored = store_get().read(handle, "ideas/plan.md")
    assert stored is not None
    assert stored.body == b"plan\n"


@pytest.mark.parametrize("credential", CREDENTIALS[:2], ids=lambda c: c.rule)
def test_notes_export_with_a_credential_is_refused_whole(tenant, credential):
    client = tenant.client_for(tenant.member)
    put_note(client, tenant.workspace.pk, "a.md", "fine\n")
    put_note(client, tenant.workspace.pk, "b.md", f"note\n{credential.line}\n")

    response = client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/documents/export")

    error = assert_error(response, 422, "SECRET_DETECTED")
    assert response["Content-Type"] == "application/json"
    assert (error["detail"]["path"], error["detail"]["rule"]) == ("b.md", credential.rule)
    assert credential.line not in response.content.decode()


def test_exports_of_another_teams_workspace_are_404(tenant, make_tenant):
    other = make_tenant()
    client = tenant.client_for(tenant.member)

    for route in ("memory/export", "documents/export"):
        response = client.get(f"/api/v1/workspaces/{other.workspace.pk}/{route}")
        assert_error(response, 404, "NOT_FOUND")
