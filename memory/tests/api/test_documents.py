"""A person's document routes: /api/v1/workspaces/{id}/documents, /move and /restore."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from rest_framework.test import APIClient

from conftest import assert_error
from memory.models import MEMORY_PATH
from memory.selectors import memory_current_get, memory_policy_get
from memory.services import memory_policy_set
from memory.tests.spellings import INVISIBLE_SPELLINGS, LOOKALIKE_SPELLINGS
from workspaces.models import File, FileVersion


@dataclass
class DocumentsApi:
    """The human document routes of one workspace, as one member sees them."""

    client: APIClient
    workspace_id: int

    @property
    def url(self) -> str:
        return f"/api/v1/workspaces/{self.workspace_id}/documents"

    def _headers(self, base: int | None, headers: dict[str, Any]) -> dict[str, Any]:
        if base is not None:
            headers["HTTP_X_BASE_VERSION"] = str(base)
        return headers

    def read(self, path: str) -> Any:
        return self.client.get(f"{self.url}?{urlencode({'path': path})}")

    def list(self, **query: str) -> Any:
        return self.client.get(f"{self.url}?{urlencode(query)}")

    def put(self, path: str, content: str, base: int | None, **headers: Any) -> Any:
        return self.client.put(
            f"{self.url}?{urlencode({'path': path})}",
            {"content": content},
            format="json",
            **self._headers(base, headers),
        )

    def delete(self, path: str, base: int | None) -> Any:
        return self.client.delete(
            f"{self.url}?{urlencode({'path': path})}", **self._headers(base, {})
        )

    def move(self, source: str, destination: str, base: int | None) -> Any:
        return self.client.post(
            f"{self.url}/move",
            {"from": source, "to": destination},
            format="json",
            **self._headers(base, {}),
        )

    def restore(self, path: str, base: int | None) -> Any:
        return self.client.post(
            f"{self.url}/restore", {"path": path}, format="json", **self._headers(base, {})
        )


@pytest.fixture
def docs(tenant) -> DocumentsApi:
    return DocumentsApi(client=tenant.client_for(tenant.member), workspace_id=tenant.workspace.pk)


def stored(tenant) -> list[tuple[str, int, bool]]:
    return [
        (file.path, file.current_version, file.is_deleted)
        for file in File.objects.filter(workspace=tenant.workspace).order_by("path")
    ]


def test_create_read_and_save_a_note(docs, tenant):
    created = docs.put("notes/a.md", "first", base=0)
    saved = docs.put("notes/a.md", "second ☕", base=1)

    assert created.status_code == 200
    assert created.json() == {"path": "notes/a.md", "version": 1, "bytes": 5, "changeKind": "save"}
    assert saved.json()["version"] == 2
    assert docs.read("notes/a.md").json() == {
        "path": "notes/a.md",
        "content": "second ☕",
        "version": 2,
        "bytes": 10,
    }
    revision = FileVersion.objects.get(file__path="notes/a.md", version=2)
    assert (revision.author_kind, revision.author) == ("human", tenant.member)
    assert b"second" not in bytes(revision.ciphertext)


def test_list_with_prefix_and_deleted(docs):
    docs.put("notes/a.md", "a", base=0)
    docs.put("notes/b.md", "bb", base=0)
    docs.put("other.md", "c", base=0)
    docs.delete("notes/b.md", base=1)

    live = docs.list(prefix="notes/").json()["results"]
    everything = docs.list(includeDeleted="1").json()["results"]

    assert [(row["path"], row["bytes"], row["deleted"]) for row in live] == [
        ("notes/a.md", 1, False)
    ]
    assert [(row["path"], row["deleted"]) for row in everything] == [
        ("notes/a.md", False),
        ("notes/b.md", True),
        ("other.md", False),
    ]
    assert set(live[0]) == {"path", "version", "bytes", "updatedAt", "deleted"}


def test_a_person_sees_the_memory_document_in_the_list(docs, tenant, memory_revision):
    response = docs.list()

    assert [row["path"] for row in response.json()["results"]] == [MEMORY_PATH]


def test_stale_base_version_is_409_and_writes_nothing(docs, tenant):
    docs.put("notes/a.md", "one", base=0)
    docs.put("notes/a.md", "two", base=1)

    response = docs.put("notes/a.md", "stale draft", base=1)

    error = assert_error(response, 409, "VERSION_CONFLICT")
    assert error["detail"] == {"currentVersion": 2}
    assert docs.read("notes/a.md").json()["content"] == "two"


@pytest.mark.parametrize("operation", ["put", "delete", "move", "restore"])
def test_every_change_without_x_base_version_is_428(docs, tenant, operation):
    docs.put("notes/a.md", "one", base=0)
    calls = {
        "put": lambda: docs.put("notes/a.md", "two", base=None),
        "delete": lambda: docs.delete("notes/a.md", base=None),
        "move": lambda: docs.move("notes/a.md", "notes/b.md", base=None),
        "restore": lambda: docs.restore("notes/a.md", base=None),
    }

    response = calls[operation]()

    assert_error(response, 428, "BASE_VERSION_REQUIRED")
    assert stored(tenant) == [("notes/a.md", 1, False)]


def test_delete_then_restore_with_compare_and_set(docs, tenant):
    docs.put("notes/a.md", "kept", base=0)

    deleted = docs.delete("notes/a.md", base=1)
    gone = docs.read("notes/a.md")
    stale_restore = docs.restore("notes/a.md", base=2)
    restored = docs.restore("notes/a.md", base=1)

    assert (deleted.status_code, deleted.json()["deleted"]) == (200, True)
    assert_error(gone, 404, "NOT_FOUND")
    assert assert_error(stale_restore, 409, "VERSION_CONFLICT")["detail"] == {
        "currentVersion": 1,
        "deleted": True,
    }
    assert (restored.status_code, restored.json()["deleted"]) == (200, False)
    assert docs.read("notes/a.md").json()["content"] == "kept"
    assert stored(tenant) == [("notes/a.md", 1, False)]


def test_stale_delete_is_409_and_keeps_the_file(docs, tenant):
    docs.put("notes/a.md", "one", base=0)
    docs.put("notes/a.md", "two", base=1)

    response = docs.delete("notes/a.md", base=1)

    assert assert_error(response, 409, "VERSION_CONFLICT")["detail"] == {
        "currentVersion": 2,
        "deleted": False,
    }
    assert stored(tenant) == [("notes/a.md", 2, False)]


def test_move_renames_and_keeps_the_text(docs, tenant):
    docs.put("notes/a.md", "text", base=0)

    response = docs.move("notes/a.md", "done/a.md", base=1)

    assert response.status_code == 200
    assert (response.json()["path"], response.json()["version"]) == ("done/a.md", 1)
    assert docs.read("done/a.md").json()["content"] == "text"
    assert stored(tenant) == [("done/a.md", 1, False)]


def test_move_stale_or_onto_a_taken_path_is_409(docs, tenant):
    docs.put("a.md", "a", base=0)
    docs.put("a.md", "a2", base=1)
    docs.put("b.md", "b", base=0)

    stale = docs.move("a.md", "c.md", base=1)
    taken = docs.move("a.md", "b.md", base=2)

    assert assert_error(stale, 409, "VERSION_CONFLICT")["detail"]["currentVersion"] == 2
    assert assert_error(taken, 409, "DOCUMENT_EXISTS")["detail"] == {"path": "b.md"}
    assert stored(tenant) == [("a.md", 2, False), ("b.md", 1, False)]


def test_memory_path_save_goes_through_the_memory_service(docs, tenant, memory_revision):
    response = docs.put(MEMORY_PATH, "- likes coffee\n", base=1)

    assert response.json() == {
        "path": MEMORY_PATH,
        "version": 2,
        "bytes": 15,
        "changeKind": "save",
    }
    memory = memory_current_get(workspace=tenant.workspace)
    assert (memory.version, memory.content) == (2, "- likes coffee\n")
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 0


def test_memory_path_clear_advances_the_clear_generation(docs, tenant, memory_revision):
    response = docs.put(MEMORY_PATH, "", base=1, HTTP_X_MEMORY_CLEAR="1")

    assert (response.status_code, response.json()["changeKind"]) == (200, "clear")
    memory = memory_current_get(workspace=tenant.workspace)
    assert (memory.version, memory.content) == (2, "")
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 1


def test_memory_path_clear_with_a_stale_base_moves_nothing(docs, tenant, memory_revision):
    response = docs.put(MEMORY_PATH, "", base=5, HTTP_X_MEMORY_CLEAR="1")

    assert_error(response, 409, "VERSION_CONFLICT")
    assert memory_current_get(workspace=tenant.workspace).version == 1
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 0


def test_a_clear_with_content_is_400(docs, tenant, memory_revision):
    response = docs.put(MEMORY_PATH, "not empty", base=1, HTTP_X_MEMORY_CLEAR="1")

    assert_error(response, 400, "VALIDATION_FAILED")
    assert memory_current_get(workspace=tenant.workspace).version == 1


def test_x_memory_clear_on_a_note_is_refused(docs, tenant):
    docs.put("notes/a.md", "text", base=0)

    response = docs.put("notes/a.md", "", base=1, HTTP_X_MEMORY_CLEAR="1")

    assert assert_error(response, 400, "INVALID_HEADER")["detail"] == {"header": "X-Memory-Clear"}
    assert docs.read("notes/a.md").json()["content"] == "text"


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [(path, 400, "INVALID_DOCUMENT_PATH") for path in INVISIBLE_SPELLINGS]
    + [(path, 403, "MEMORY_NAMESPACE_RESERVED") for path in LOOKALIKE_SPELLINGS],
)
def test_a_path_that_displays_as_the_memory_document_is_refused_for_a_person(
    docs, tenant, memory_revision, path, status, code
):
    response = docs.put(path, "planted", base=0)

    assert_error(response, status, code)
    assert stored(tenant) == [(MEMORY_PATH, 1, False)]


@pytest.mark.parametrize(
    "path", [".zudotext/memory/other.md", ".ZUDOTEXT/memory/memory.md", ".zudotext/Memory/x.md"]
)
def test_other_memory_namespace_paths_are_403_for_a_person(docs, tenant, memory_revision, path):
    response = docs.put(path, "planted", base=0)

    assert_error(response, 403, "MEMORY_NAMESPACE_RESERVED")
    assert stored(tenant) == [(MEMORY_PATH, 1, False)]


def test_moving_into_or_out_of_the_namespace_and_other_paths_in_it_are_403(
    docs, tenant, memory_revision
):
    docs.put("notes/a.md", "note", base=0)

    responses = [
        docs.move(MEMORY_PATH, "notes/memory.md", base=1),
        docs.move("notes/a.md", ".zudotext/memory/a.md", base=1),
        docs.move("notes/a.md", MEMORY_PATH, base=1),
        docs.delete(".zudotext/memory/other.md", base=1),
        docs.restore(".zudotext/memory/other.md", base=1),
        docs.delete(".ZUDOTEXT/memory/memory.md", base=1),
    ]

    for response in responses:
        assert_error(response, 403, "MEMORY_NAMESPACE_RESERVED")
    assert stored(tenant) == [(MEMORY_PATH, 1, False), ("notes/a.md", 1, False)]
    assert memory_current_get(workspace=tenant.workspace).content == "- likes tea\n"


def test_a_person_deletes_and_restores_the_memory_document_by_compare_and_set(
    docs, tenant, memory_revision
):
    without_base = docs.delete(MEMORY_PATH, base=None)
    stale = docs.delete(MEMORY_PATH, base=2)

    deleted = docs.delete(MEMORY_PATH, base=1)

    assert_error(without_base, 428, "BASE_VERSION_REQUIRED")
    assert assert_error(stale, 409, "VERSION_CONFLICT")["detail"] == {
        "currentVersion": 1,
        "deleted": False,
    }
    assert (deleted.status_code, deleted.json()["path"], deleted.json()["deleted"]) == (
        200,
        MEMORY_PATH,
        True,
    )
    assert stored(tenant) == [(MEMORY_PATH, 1, True)]
    assert memory_current_get(workspace=tenant.workspace).version == 0
    again = docs.delete(MEMORY_PATH, base=1)
    assert assert_error(again, 409, "VERSION_CONFLICT")["detail"]["deleted"] is True

    restored = docs.restore(MEMORY_PATH, base=1)

    assert (restored.status_code, restored.json()["deleted"]) == (200, False)
    assert memory_current_get(workspace=tenant.workspace).content == "- likes tea\n"
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 0
    assert FileVersion.objects.filter(file__path=MEMORY_PATH).count() == 1


@pytest.mark.parametrize(
    ("sent", "canonical"),
    [
        ("/notes/a.md", "notes/a.md"),
        ("notes//a.md", "notes/a.md"),
        ("notes\\a.md", "notes/a.md"),
        ("\uff4e\uff4f\uff54\uff45\uff53/a.md", "notes/a.md"),
        ("./.zudotext/memory/memory.md", MEMORY_PATH),
    ],
)
def test_a_non_canonical_spelling_is_400_with_the_canonical_one(docs, tenant, sent, canonical):
    response = docs.put(sent, "text", base=0)

    error = assert_error(response, 400, "INVALID_DOCUMENT_PATH")
    assert error["detail"] == {"reason": "not_canonical", "canonical": canonical}
    assert stored(tenant) == []


@pytest.mark.parametrize(
    ("sent", "reason"),
    [("notes/../a.md", "dot_dot_segment"), ("notes/a", "not_markdown"), ("", "empty")],
)
def test_an_invalid_path_is_400_with_the_reason(docs, tenant, sent, reason):
    response = docs.put(sent, "text", base=0)

    assert assert_error(response, 400, "INVALID_DOCUMENT_PATH")["detail"] == {"reason": reason}
    assert stored(tenant) == []


def test_a_read_in_another_spelling_is_refused_too(docs):
    docs.put("notes/a.md", "text", base=0)

    response = docs.read("/notes/a.md")

    assert assert_error(response, 400, "INVALID_DOCUMENT_PATH")["detail"]["canonical"] == (
        "notes/a.md"
    )


def test_another_tenants_workspace_is_404_on_every_route(docs, make_tenant):
    other = make_tenant()
    other_docs = DocumentsApi(client=docs.client, workspace_id=other.workspace.pk)
    DocumentsApi(client=other.client_for(other.member), workspace_id=other.workspace.pk).put(
        "notes/a.md", "theirs", base=0
    )

    responses = [
        other_docs.read("notes/a.md"),
        other_docs.list(),
        other_docs.put("notes/a.md", "mine", base=1),
        other_docs.delete("notes/a.md", base=1),
        other_docs.move("notes/a.md", "b.md", base=1),
        other_docs.restore("notes/a.md", base=1),
    ]

    for response in responses:
        assert_error(response, 404, "NOT_FOUND")
    assert stored(other) == [("notes/a.md", 1, False)]


def test_memory_mode_off_does_not_restrict_a_persons_notes(docs, tenant):
    memory_policy_set(
        workspace=tenant.workspace, mode="off", expected_revision=0, actor=tenant.admin
    )

    created = docs.put("notes/a.md", "text", base=0)
    moved = docs.move("notes/a.md", "b.md", base=1)
    deleted = docs.delete("b.md", base=1)

    assert [r.status_code for r in (created, moved, deleted)] == [200, 200, 200]
    assert stored(tenant) == [("b.md", 1, True)]
