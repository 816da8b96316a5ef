"""/api/v1/automation/workspaces/{id}/documents: the fenced memory namespace, for the
assistant's delivery credential and for a client's token alike."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from automation.models import Admission
from automation.tokens import delivery_credential_cache_key
from conftest import assert_error
from memory.models import MEMORY_PATH
from memory.selectors import memory_current_get, memory_policy_get
from memory.services import memory_policy_set
from memory.tests.spellings import RESERVED_SPELLINGS
from workspaces.models import File, FileVersion
from workspaces.services import (
    file_write,
    key_session_revoke,
    workspace_ai_consent_set,
    workspace_key_ensure,
)


@dataclass
class AutomationDocuments:
    """The automation document routes of one workspace, through one credential."""

    client: APIClient
    workspace_id: int

    @property
    def url(self) -> str:
        return f"/api/v1/automation/workspaces/{self.workspace_id}/documents"

    @staticmethod
    def _base(base: int | None) -> dict[str, Any]:
        return {} if base is None else {"HTTP_X_BASE_VERSION": str(base)}

    def read(self, path: str) -> Any:
        return self.client.get(f"{self.url}?{urlencode({'path': path})}")

    def list(self, **query: str) -> Any:
        return self.client.get(f"{self.url}?{urlencode(query)}")

    def search(self, q: str) -> Any:
        return self.client.get(f"{self.url}/search?{urlencode({'q': q})}")

    def put(self, path: str, content: str, base: int | None) -> Any:
        return self.client.put(
            f"{self.url}?{urlencode({'path': path})}",
            {"content": content},
            format="json",
            **self._base(base),
        )

    def delete(self, path: str, base: int | None) -> Any:
        return self.client.delete(f"{self.url}?{urlencode({'path': path})}", **self._base(base))

    def move(self, source: str, destination: str, base: int | None) -> Any:
        return self.client.post(
            f"{self.url}/move",
            {"from": source, "to": destination},
            format="json",
            **self._base(base),
        )

    def restore(self, path: str, base: int | None) -> Any:
        return self.client.post(
            f"{self.url}/restore", {"path": path}, format="json", **self._base(base)
        )


def delivery_client(admission: Admission) -> APIClient:
    client = APIClient()
    raw = cache.get(delivery_credential_cache_key(admission.pk))
    assert raw, "the credential reaches the cache on commit"
    client.credentials(HTTP_AUTHORIZATION=f"Delivery {raw}")
    return client


@pytest.fixture
def admission(assistant, django_capture_on_commit_callbacks, turns_held) -> Admission:
    with django_capture_on_commit_callbacks(execute=True):
        return assistant.send()


@pytest.fixture
def runtime(assistant, admission) -> AutomationDocuments:
    """The assistant's runtime for one admitted turn (delivery credential)."""
    return AutomationDocuments(
        client=delivery_client(admission), workspace_id=assistant.tenant.workspace.pk
    )


@pytest.fixture
def external(assistant) -> AutomationDocuments:
    """An external client (an MCP server) acting as the member with a token."""
    tenant = assistant.tenant
    return AutomationDocuments(
        client=tenant.client_for(tenant.member), workspace_id=tenant.workspace.pk
    )


def note(tenant, path: str, text: str) -> FileVersion:
    return file_write(
        workspace=tenant.workspace,
        path=path,
        plaintext=text,
        base_version=0,
        data_key=workspace_key_ensure(workspace=tenant.workspace),
        author=tenant.member,
        author_kind=FileVersion.AuthorKind.HUMAN,
        change_kind=FileVersion.ChangeKind.SAVE,
    )


def stored(tenant) -> list[tuple[str, int, bool]]:
    return [
        (file.path, file.current_version, file.is_deleted)
        for file in File.objects.filter(workspace=tenant.workspace).order_by("path")
    ]


@pytest.mark.parametrize("credential", ["delivery", "token"])
def test_every_spelling_of_the_namespace_is_403_on_every_route(
    request, assistant, credential, settings
):
    # Six requests per spelling and credential: lift the write rate so that the
    # throttle is not what answers.
    rates = dict(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], write="10000/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    tenant = assistant.tenant
    api = request.getfixturevalue("runtime" if credential == "delivery" else "external")
    note(tenant, "notes/a.md", "an ordinary note")
    before_files = stored(tenant)
    before_revisions = FileVersion.objects.count()
    before_memory = memory_current_get(workspace=tenant.workspace)
    routes = {
        "put": lambda path: api.put(path, "planted", base=0),
        "put_at_current": lambda path: api.put(path, "planted", base=1),
        "delete": lambda path: api.delete(path, base=1),
        "read": lambda path: api.read(path),
        "move_source": lambda path: api.move(path, "notes/stolen.md", base=1),
        "move_destination": lambda path: api.move("notes/a.md", path, base=1),
        "restore": lambda path: api.restore(path, base=1),
    }

    wrong = []
    for spelling in RESERVED_SPELLINGS:
        for route, call in routes.items():
            response = call(spelling)
            code = response.json().get("error", {}).get("code") if response.content else None
            if (response.status_code, code) != (403, "MEMORY_NAMESPACE_RESERVED"):
                wrong.append((spelling, route, response.status_code, code))

    assert wrong == []
    assert stored(tenant) == before_files
    assert FileVersion.objects.count() == before_revisions
    assert memory_current_get(workspace=tenant.workspace) == before_memory


def test_the_namespace_is_judged_before_headers_body_and_key_session(runtime, assistant):
    key_session_revoke(session=assistant.key_session, revoked_by=assistant.tenant.member)

    responses = [
        runtime.put(".zudotext/memory/x", "text", base=None),
        runtime.client.put(
            f"{runtime.url}?{urlencode({'path': '/.ZUDOTEXT/memory/x.md'})}",
            {"wrong": 1},
            format="json",
        ),
        runtime.delete("../.zudotext/memory/memory.md", base=None),
        runtime.move("/notes/a", ".zudotext/memory/a.md", base=None),
        runtime.read(".zudotext/memory/memory.md"),
    ]

    for response in responses:
        assert_error(response, 403, "MEMORY_NAMESPACE_RESERVED")


def test_list_and_search_hide_the_namespace(runtime, external, assistant):
    tenant = assistant.tenant
    assert "tea" in memory_current_get(workspace=tenant.workspace).content
    note(tenant, "notes/drinks.md", "green tea in the morning")
    note(tenant, ".ZUDOTEXT/memory/stray.md", "tea from an older import")

    for api in (runtime, external):
        listed = api.list().json()["results"]
        namespace_prefix = api.list(prefix=".zudotext/").json()["results"]
        found = api.search("tea").json()

        assert [row["path"] for row in listed] == ["notes/drinks.md"]
        assert namespace_prefix == []
        assert found == {
            "results": [
                {"path": "notes/drinks.md", "version": 1, "snippet": "green tea in the morning"}
            ],
            "truncated": False,
            "nextCursor": None,
        }


def test_lookalike_memory_notes_stored_earlier_stay_hidden_with_memory_off(
    runtime, external, assistant
):
    # Notes planted before lookalike paths were refused: the store holds them as written.
    tenant = assistant.tenant
    planted = [".zud\u043etext/memory/memory.md", ".zudotext/memory\u034f/memory.md"]
    for path in planted:
        note(tenant, path, "- likes tea (planted)")
    note(tenant, "notes/drinks.md", "green tea")
    memory_policy_set(
        workspace=tenant.workspace,
        mode="off",
        expected_revision=memory_policy_get(workspace=tenant.workspace).policy_revision,
        actor=tenant.member,
    )

    for api in (runtime, external):
        listed = [row["path"] for row in api.list().json()["results"]]
        found = [row["path"] for row in api.search("tea").json()["results"]]
        reads = [api.read(path) for path in planted]

        assert listed == ["notes/drinks.md"]
        assert found == ["notes/drinks.md"]
        for response in reads:
            assert_error(response, 403, "MEMORY_NAMESPACE_RESERVED")


def test_the_runtime_writes_notes_as_automatic_and_a_token_as_human(runtime, external, assistant):
    tenant = assistant.tenant

    by_runtime = runtime.put("notes/assistant.md", "from the assistant", base=0)
    by_client = external.put("notes/client.md", "from an MCP client", base=0)

    assert by_runtime.json() == {
        "path": "notes/assistant.md",
        "version": 1,
        "bytes": 18,
        "authorKind": "automatic",
    }
    assert by_client.json()["authorKind"] == "human"
    kinds = dict(
        FileVersion.objects.filter(file__workspace=tenant.workspace).values_list(
            "file__path", "author_kind"
        )
    )
    assert kinds["notes/assistant.md"] == "automatic"
    assert kinds["notes/client.md"] == "human"
    assert runtime.read("notes/client.md").json()["content"] == "from an MCP client"
    revision = FileVersion.objects.get(file__path="notes/assistant.md")
    assert b"assistant" not in bytes(revision.ciphertext)


def test_the_runtime_can_manage_notes_with_compare_and_set(runtime, assistant):
    tenant = assistant.tenant
    runtime.put("notes/a.md", "one", base=0)

    stale = runtime.put("notes/a.md", "stale", base=2)
    moved = runtime.move("notes/a.md", "notes/b.md", base=1)
    deleted = runtime.delete("notes/b.md", base=1)
    restored = runtime.restore("notes/b.md", base=1)

    assert assert_error(stale, 409, "VERSION_CONFLICT")["detail"] == {"currentVersion": 1}
    assert [r.status_code for r in (moved, deleted, restored)] == [200, 200, 200]
    assert stored(tenant) == [(MEMORY_PATH, 1, False), ("notes/b.md", 1, False)]


def test_a_non_canonical_spelling_is_400_with_the_canonical_one(runtime, assistant):
    response = runtime.put("/notes//a.md", "text", base=0)

    error = assert_error(response, 400, "INVALID_DOCUMENT_PATH")
    assert error["detail"] == {"reason": "not_canonical", "canonical": "notes/a.md"}
    assert stored(assistant.tenant) == [(MEMORY_PATH, 1, False)]


def test_missing_x_base_version_is_428(runtime, assistant):
    response = runtime.put("notes/a.md", "text", base=None)

    assert_error(response, 428, "BASE_VERSION_REQUIRED")
    assert stored(assistant.tenant) == [(MEMORY_PATH, 1, False)]


def test_a_delivery_credential_reaches_only_its_own_workspace(runtime, make_tenant):
    other = make_tenant()
    note(other, "notes/a.md", "theirs")
    elsewhere = AutomationDocuments(client=runtime.client, workspace_id=other.workspace.pk)

    responses = [elsewhere.read("notes/a.md"), elsewhere.put("notes/a.md", "x", base=1)]

    for response in responses:
        assert_error(response, 404, "NOT_FOUND")
    assert stored(other) == [("notes/a.md", 1, False)]


def test_a_token_cannot_reach_another_tenants_workspace(external, make_tenant):
    other = make_tenant()
    note(other, "notes/a.md", "theirs")
    elsewhere = AutomationDocuments(client=external.client, workspace_id=other.workspace.pk)

    responses = [elsewhere.read("notes/a.md"), elsewhere.list(), elsewhere.search("theirs")]

    for response in responses:
        assert_error(response, 404, "NOT_FOUND")


def test_a_revoked_key_session_withdraws_the_runtimes_access(runtime, assistant):
    tenant = assistant.tenant
    note(tenant, "notes/a.md", "text")
    key_session_revoke(session=assistant.key_session, revoked_by=tenant.member)

    responses = [
        runtime.read("notes/a.md"),
        runtime.put("notes/b.md", "x", base=0),
        runtime.delete("notes/a.md", base=1),
        runtime.list(),
        runtime.search("text"),
    ]

    for response in responses:
        assert assert_error(response, 403, "KEY_SESSION_UNAVAILABLE")["detail"] == {
            "reason": "revoked"
        }
    assert stored(tenant) == [(MEMORY_PATH, 1, False), ("notes/a.md", 1, False)]


def test_an_expired_turn_can_no_longer_act(runtime, admission, assistant):
    Admission.objects.filter(pk=admission.pk).update(
        admitted_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )

    response = runtime.put("notes/a.md", "late", base=0)

    assert_error(response, 401, "TOKEN_EXPIRED")
    assert stored(assistant.tenant) == [(MEMORY_PATH, 1, False)]


def test_a_superseded_turns_credential_can_no_longer_act(runtime, assistant):
    tenant = assistant.tenant
    note(tenant, "notes/a.md", "text")
    note(tenant, "notes/gone.md", "text")
    runtime.delete("notes/gone.md", base=1)
    assistant.send("a newer message takes the conversation's credential")

    responses = [
        runtime.read("notes/a.md"),
        runtime.list(),
        runtime.search("text"),
        runtime.put("notes/b.md", "late", base=0),
        runtime.put("notes/a.md", "late", base=1),
        runtime.delete("notes/a.md", base=1),
        runtime.move("notes/a.md", "notes/c.md", base=1),
        runtime.restore("notes/gone.md", base=1),
    ]

    for response in responses:
        assert_error(response, 403, "CREDENTIAL_SUPERSEDED")
    assert stored(tenant) == [
        (MEMORY_PATH, 1, False),
        ("notes/a.md", 1, False),
        ("notes/gone.md", 1, True),
    ]


def test_workspace_ai_switched_off_stops_the_runtime(runtime, assistant):
    workspace = assistant.tenant.workspace
    workspace_ai_consent_set(
        workspace=workspace, enabled=False, expected_revision=0, actor=assistant.tenant.admin
    )

    response = runtime.put("notes/a.md", "x", base=0)

    assert_error(response, 403, "WORKSPACE_AI_DISABLED")
    assert stored(assistant.tenant) == [(MEMORY_PATH, 1, False)]


def test_memory_mode_off_still_hides_memory_from_a_read(runtime, assistant):
    tenant = assistant.tenant
    policy = memory_policy_get(workspace=tenant.workspace)
    memory_policy_set(
        workspace=tenant.workspace,
        mode="off",
        expected_revision=policy.policy_revision,
        actor=tenant.member,
    )

    response = runtime.read(MEMORY_PATH)

    assert_error(response, 403, "MEMORY_NAMESPACE_RESERVED")
