"""A NUL in a document's text is refused on every path that writes one, with the one code a
JSON body's `content` already had (VALIDATION_FAILED, `detail.fields.content`): a raw Markdown
body to a memory space (which the remote CLI sends), the local CLI, an import's entry, the
workspace memory document and notes, and the MCP tools (automation/tests)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from conftest import assert_error
from memory.spaces.quotas import store_get
from memory.tests.api.test_space_archive import ORG_SPACE, org_handle, post_import
from memory.tests.test_cli import org_space, refused
from memory.tests.test_space_archive import INCOMING, archive_of, contents, layout

pytestmark = pytest.mark.usefixtures("every_store")

NUL_REFUSED = {"fields": {"content": ["Null characters are not allowed."]}}


def test_a_raw_markdown_body_holding_nul_is_refused(tenant):
    url = "/api/v1/memory/doc?" + urlencode({**ORG_SPACE, "path": "a.md"})

    response = tenant.client_for(tenant.member).put(
        url, b"before\x00after\n", content_type="text/markdown", HTTP_X_BASE_VERSION="0"
    )

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert error["detail"] == {**NUL_REFUSED, "path": "a.md"}
    assert store_get().read(org_handle(tenant), "a.md") is None


def test_a_local_cli_write_holding_nul_is_refused(tenant, tmp_path):
    (tmp_path / "a.md").write_bytes(b"before\x00after\n")

    code, message, _ = refused(
        "put", "a.md", *org_space(tenant), "--user", tenant.member.username,
        "--file", str(tmp_path / "a.md"), "--base-version", "0",
    )  # fmt: skip

    assert code == 1  # the file's fault, not the command line's (exit 2)
    assert message.startswith("VALIDATION_FAILED")
    assert store_get().read(org_handle(tenant), "a.md") is None


def test_an_imported_document_holding_nul_is_refused_by_its_path(tenant):
    archive = archive_of(layout({**INCOMING, "notes/nul.md": b"before\x00after\n"}))

    response = post_import(tenant.client_for(tenant.member), ORG_SPACE, archive)

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert error["detail"] == {**NUL_REFUSED, "path": "notes/nul.md"}
    assert contents(org_handle(tenant)) == {}


@pytest.mark.parametrize("route", ["memory", "documents?path=notes/a.md"])
def test_the_workspace_memory_and_notes_refuse_nul_alike(tenant, route):
    response = tenant.client_for(tenant.member).put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/{route}",
        {"content": "before\x00after\n"},
        format="json",
        HTTP_X_BASE_VERSION="0",
    )

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert error["detail"] == NUL_REFUSED
