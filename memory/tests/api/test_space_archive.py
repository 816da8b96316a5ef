"""The archive routes: GET /api/v1/memory/export and POST /api/v1/memory/import."""

from __future__ import annotations

import gzip
import io
import tarfile
from typing import Any
from urllib.parse import urlencode

import pytest
from rest_framework.test import APIClient

from conftest import Tenant, assert_error
from memory.models import SpaceDocument
from memory.spaces.archive import FORMAT, space_export
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.tests.secret_corpus import CREDENTIALS
from memory.tests.spaces.conftest import store_write
from memory.tests.test_space_archive import (
    INCOMING,
    Entry,
    archive_of,
    contents,
    layout,
    tar_bytes,
)

pytestmark = pytest.mark.usefixtures("every_store")

ORG_SPACE = {"visibility": "org", "name": "notes"}
GZIP = "application/gzip"


def org_handle(tenant: Tenant, name: str = "notes") -> SpaceHandle:
    return SpaceHandle(visibility=Visibility.ORG, name=name, tenant_id=tenant.team.pk)


def export(client: APIClient, space: dict[str, str], **headers: Any) -> Any:
    return client.get("/api/v1/memory/export", space, **headers)


def post_import(client: APIClient, space: dict[str, str], body: bytes, **query: str) -> Any:
    url = "/api/v1/memory/import?" + urlencode({**space, **query})
    return client.post(url, body, content_type=GZIP)


@pytest.fixture
def client(tenant: Tenant) -> APIClient:
    return tenant.client_for(tenant.member)


def put(client: APIClient, path: str, body: bytes) -> None:
    url = "/api/v1/memory/doc?" + urlencode({**ORG_SPACE, "path": path})
    response = client.put(url, body, content_type="text/markdown", HTTP_X_BASE_VERSION="0")
    assert response.status_code == 200, response.content


def test_export_answers_the_archive_as_an_attachment_naming_the_space(client, tenant):
    put(client, "a.md", b"# A\n")
    expected = io.BytesIO()
    space_export(handle=org_handle(tenant), out=expected)

    response = export(client, ORG_SPACE, HTTP_ACCEPT=GZIP)

    assert response.status_code == 200
    assert response["Content-Type"] == GZIP
    assert response["Content-Disposition"] == 'attachment; filename="memory-org-notes.tar.gz"'
    assert b"".join(response.streaming_content) == expected.getvalue()


def test_a_space_named_in_another_script_downloads_under_its_own_name(client, tenant):
    response = export(client, {"visibility": "org", "name": "café"}, HTTP_ACCEPT=GZIP)

    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        "attachment; filename*=utf-8''memory-org-caf%C3%A9.tar.gz"
    )


def test_export_of_a_space_holding_a_credential_is_json_with_no_archive_bytes(client, tenant):
    put(client, "a.md", b"fine\n")
    store_write(
        store_get(), org_handle(tenant), "leak.md", f"{CREDENTIALS[0]}\n".encode(), expected=0
    )

    response = export(client, ORG_SPACE, HTTP_ACCEPT=GZIP)

    error = assert_error(response, 422, "SECRET_DETECTED")
    assert response["Content-Type"] == "application/json"
    assert "Content-Disposition" not in response
    assert error["detail"]["path"] == "leak.md"


def test_export_of_a_document_that_fails_its_integrity_check_is_json_with_no_archive_bytes(
    client, tenant, every_store
):
    if every_store != "database":
        pytest.skip("only the database store seals bodies")
    put(client, "a.md", b"# A\n")
    row = SpaceDocument.objects.get()
    tampered = bytearray(row.body_ciphertext)
    tampered[20] ^= 0x01
    SpaceDocument.objects.filter(pk=row.pk).update(body_ciphertext=bytes(tampered))

    response = export(client, ORG_SPACE, HTTP_ACCEPT=GZIP)

    error = assert_error(response, 422, "DOCUMENT_UNREADABLE")
    assert "Content-Disposition" not in response
    assert error["detail"] == {"path": "a.md", "revision": 1}


def test_export_of_a_space_never_written_is_an_empty_archive(client):
    response = export(client, ORG_SPACE)

    assert response.status_code == 200
    assert b"".join(response.streaming_content)[:2] == b"\x1f\x8b"


def test_a_round_trip_through_the_routes(client, tenant):
    put(client, "a.md", b"# A\n")
    put(client, "notes/b.md", b"# B\n")
    archive = b"".join(export(client, ORG_SPACE).streaming_content)

    response = post_import(client, {**ORG_SPACE, "name": "copy"}, archive)

    assert response.status_code == 200, response.content
    assert response.json() == {
        "imported": 2,
        "replaced": 0,
        "skipped": 0,
        "renamed": 0,
        "ignored": [],
        "dryRun": False,
        "documents": [
            {"path": "a.md", "action": "create", "target": "a.md"},
            {"path": "notes/b.md", "action": "create", "target": "notes/b.md"},
        ],
    }
    assert contents(org_handle(tenant, "copy")) == contents(org_handle(tenant))
    attributions = {meta.updated_by for meta in store_get().list(org_handle(tenant, "copy"))}
    assert attributions == {f"import:{tenant.member.pk}"}


def test_an_overwrite_counts_each_document_once_and_replaced_apart(client, tenant):
    put(client, "a.md", b"old\n")

    response = post_import(client, ORG_SPACE, archive_of(layout(INCOMING)), strategy="overwrite")

    assert response.status_code == 200, response.content
    body = response.json()
    # b.md is new, a.md overwrote ours: each in one count, the counts adding up to two.
    assert {key: body[key] for key in ("imported", "replaced", "skipped", "renamed")} == {
        "imported": 1,
        "replaced": 1,
        "skipped": 0,
        "renamed": 0,
    }
    assert contents(org_handle(tenant)) == INCOMING


def test_a_dry_run_answers_the_plan_and_writes_nothing(client, tenant):
    put(client, "a.md", b"old\n")

    response = post_import(
        client, ORG_SPACE, archive_of(layout(INCOMING)), strategy="rename", dryRun="1"
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["imported"], body["renamed"], body["dryRun"]) == (1, 1, True)
    assert contents(org_handle(tenant)) == {"a.md": b"old\n"}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"strategy": "bogus"}, "strategy"),
        ({"strategy": "SKIP"}, "strategy"),
        ({"strategy": ""}, "strategy"),
        ({"strategy": "overwrite", "dryRun": "maybe"}, "dryRun"),
        ({"dryRun": "yes"}, "dryRun"),
    ],
)
def test_an_unknown_strategy_or_flag_is_validation_failed_naming_it_and_writes_nothing(
    client, tenant, query, field
):
    put(client, "a.md", b"old\n")

    response = post_import(client, ORG_SPACE, archive_of(layout(INCOMING)), **query)

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == [field]
    assert contents(org_handle(tenant)) == {"a.md": b"old\n"}


@pytest.mark.parametrize(
    ("body", "status", "code", "detail"),
    [
        (
            archive_of(layout(INCOMING, extra=[Entry("docs/../../evil.md", b"x")])),
            400,
            "ARCHIVE_INVALID",
            {"reason": "dot_dot", "entry": "docs/../../evil.md"},
        ),
        (b"not gzip at all", 400, "ARCHIVE_INVALID", {"reason": "not_gzip"}),
        (b"", 400, "ARCHIVE_INVALID", {"reason": "not_gzip"}),
        (
            archive_of(layout(INCOMING, checksums=f"{'0' * 64}  docs/a.md\n")),
            422,
            "ARCHIVE_CHECKSUM_MISMATCH",
            {"entry": "docs/a.md"},
        ),
        # Names and manifest strings that are not Unicode: the refusal names them in a form
        # JSON can carry (they once reached the renderer as they were, a 500).
        (
            archive_of(layout(INCOMING, extra=[Entry("docs/\udcff.md", b"x\n")])),
            400,
            "ARCHIVE_INVALID",
            {"reason": "not_utf8", "entry": "docs/\\xff.md"},
        ),
        (
            gzip.compress(
                tar_bytes(
                    layout(INCOMING, extra=[Entry("extra/\udcfe", b"x")]),
                    tar_format=tarfile.USTAR_FORMAT,
                )
            ),
            400,
            "ARCHIVE_INVALID",
            {"reason": "not_utf8", "entry": "extra/\\xfe"},
        ),
        (
            archive_of(layout(INCOMING, manifest={"format": "\ud800"})),
            400,
            "ARCHIVE_INVALID",
            {"reason": "manifest_invalid", "entry": "manifest.json", "problem": "not_unicode"},
        ),
        (
            # Listed after the archive's documents, which it lists as they are.
            archive_of(
                layout(
                    INCOMING,
                    manifest={
                        "format": FORMAT,
                        "documents": [{"path": path} for path in [*INCOMING, "\ud800.md"]],
                    },
                )
            ),
            400,
            "ARCHIVE_INVALID",
            {"reason": "manifest_invalid", "entry": "manifest.json", "problem": "not_unicode"},
        ),
    ],
    ids=[
        "traversal",
        "not gzip",
        "empty",
        "checksum",
        "document name not UTF-8",
        "ignored name not UTF-8",
        "manifest format not Unicode",
        "manifest path not Unicode",
    ],
)
def test_a_refused_archive_is_answered_with_its_code_and_writes_nothing(
    client, tenant, body, status, code, detail
):
    response = post_import(client, ORG_SPACE, body, strategy="overwrite")

    error = assert_error(response, status, code)
    assert error["detail"] == detail
    assert contents(org_handle(tenant)) == {}


def test_a_document_that_is_not_utf8_is_named_in_the_refusal(client, tenant):
    # One document of many: without its path the refusal left the person to find it.
    archive = archive_of(layout({**INCOMING, "notes/latin1.md": b"caf\xe9\n"}))

    response = post_import(client, ORG_SPACE, archive)

    error = assert_error(response, 400, "INVALID_TEXT")
    assert error["detail"] == {"path": "notes/latin1.md"}
    assert contents(org_handle(tenant)) == {}


@pytest.mark.parametrize("body", [archive_of(layout(INCOMING)), b""], ids=["full", "empty"])
def test_an_import_of_another_type_is_415(client, tenant, body):
    url = "/api/v1/memory/import?" + urlencode(ORG_SPACE)

    response = client.post(url, body, content_type="application/x-tar")

    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert contents(org_handle(tenant)) == {}


def test_importing_into_global_without_superuser_is_403(client):
    response = post_import(
        client, {"visibility": "global", "name": "handbook"}, archive_of(layout(INCOMING))
    )

    assert_error(response, 403, "GLOBAL_SPACE_WRITE_DENIED")
    handbook = SpaceHandle(visibility=Visibility.GLOBAL, name="handbook", tenant_id=None)
    assert contents(handbook) == {}
