"""The web frame's memory pages: the Memory frame, Changes and Notes, as rendered."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory import panels
from memory.models import MEMORY_PATH
from memory.panels import FramePanel
from memory.services import memory_clear, memory_save, memory_undo
from workspaces.services import file_delete, file_write, workspace_key_ensure


@pytest.fixture
def member_client(client, tenant):
    client.force_login(tenant.member)
    return client


def url(name: str, tenant, *args) -> str:
    return reverse(name, args=[tenant.workspace.pk, *args])


def test_memory_frame_shows_the_saved_text_version_and_bytes(member_client, tenant):
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="- é\n")

    response = member_client.get(url("memory:frame", tenant))

    assert response.status_code == 200
    config = response.context["frame_config"]
    assert config["memory"] == {"content": "- é\n", "version": 1, "bytes": 5}
    assert config["policy"] == {"mode": "read_only", "policyRevision": 0}
    assert b'<label for="memory-text" class="label">' in response.content
    assert b'id="memory-oversize" class="warning" hidden' in response.content


def test_memory_frame_warns_when_memory_is_over_the_recall_bound(member_client, tenant):
    text = "x" * 8193
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content=text)

    response = member_client.get(url("memory:frame", tenant))

    assert b'id="memory-oversize" class="warning" >' in response.content
    assert response.context["frame_config"]["memory"]["content"] == text


def test_changes_lists_every_revision_with_who_and_what(member_client, tenant):
    workspace, member = tenant.workspace, tenant.member
    memory_save(workspace=workspace, author=member, base_version=0, content="a\n")
    memory_clear(workspace=workspace, author=member, base_version=1)
    memory_undo(workspace=workspace, author=member, base_version=2, restore_version=1)

    response = member_client.get(url("memory:changes", tenant))

    assert [r.version for r in response.context["revisions"]] == [3, 2, 1]
    body = response.content.decode()
    for kind in ("Save", "Clear", "Undo"):
        assert f">{kind}</span>" in body
    assert f"by a person ({member.username})" in body


def test_a_revision_shows_its_line_diff_against_the_previous_one(member_client, tenant):
    workspace, member = tenant.workspace, tenant.member
    memory_save(workspace=workspace, author=member, base_version=0, content="keep\nold\n")
    memory_save(workspace=workspace, author=member, base_version=1, content="keep\nnew\n")

    response = member_client.get(url("memory:revision", tenant, 2))

    detail = response.context["detail"]
    assert [(line.kind, line.text) for line in detail["diff"] if line.kind != "hunk"] == [
        ("context", "keep"),
        ("removed", "old"),
        ("added", "new"),
    ]
    assert b'<h2 id="revisions-heading">' in response.content


def test_htmx_asks_for_only_the_revision_detail(member_client, tenant):
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="a\n")

    response = member_client.get(url("memory:revision", tenant, 1), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert b'data-revision="1"' in response.content
    assert b"<html" not in response.content
    assert "HX-Request" in response["Vary"]


def test_an_unknown_revision_is_404(member_client, tenant):
    response = member_client.get(url("memory:revision", tenant, 9))

    assert response.status_code == 404


def _note(tenant, path: str, text: str) -> None:
    file_write(
        workspace=tenant.workspace,
        path=path,
        plaintext=text,
        base_version=0,
        data_key=workspace_key_ensure(workspace=tenant.workspace),
        author=tenant.member,
        author_kind="human",
        change_kind="save",
    )


def test_notes_lists_notes_and_deleted_notes_but_never_the_memory_document(member_client, tenant):
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="m\n")
    _note(tenant, "ideas.md", "one")
    _note(tenant, "old.md", "two")
    file_delete(workspace=tenant.workspace, path="old.md", base_version=1)

    response = member_client.get(url("memory:notes", tenant))

    assert [f.path for f in response.context["live_notes"]] == ["ideas.md"]
    assert [f.path for f in response.context["deleted_notes"]] == ["old.md"]
    assert MEMORY_PATH.encode() not in response.content


def test_a_note_opens_with_its_text_and_version(member_client, tenant):
    _note(tenant, "plans/q3.md", "ship it")

    response = member_client.get(url("memory:note", tenant) + "?path=plans%2Fq3.md")

    assert response.status_code == 200
    assert response.context["frame_config"]["note"] == {
        "path": "plans/q3.md",
        "content": "ship it",
        "version": 1,
        "deleted": False,
    }


def test_the_memory_document_never_opens_as_a_note(member_client, tenant):
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="m\n")

    response = member_client.get(url("memory:note", tenant) + "?path=.ZuDoText/Memory/memory.md")

    assert response.status_code == 302
    assert response["Location"] == url("memory:frame", tenant)


def test_a_note_path_in_another_spelling_redirects_to_its_one_spelling(member_client, tenant):
    _note(tenant, "a/b.md", "x")

    response = member_client.get(url("memory:note", tenant) + "?path=a//b.md")

    assert response.status_code == 302
    assert response["Location"] == url("memory:note", tenant) + "?path=a%2Fb.md"


def test_memory_frame_shows_the_panels_registered_with_it(member_client, tenant, monkeypatch):
    panel = FramePanel(
        template_name="memory/_revision.html", api_urls=lambda: {"extra": "/api/v1/extra"}
    )
    monkeypatch.setattr(panels, "_panels", [panel])

    response = member_client.get(url("memory:frame", tenant))

    assert response.context["frame_panels"] == (panel,)
    assert response.context["frame_config"]["urls"]["extra"] == "/api/v1/extra"
    assert "conversations" not in response.context["frame_config"]["urls"]
    assert [t.name for t in response.templates].count("memory/_revision.html") == 1


def test_the_assistant_panel_gives_the_page_script_its_routes(member_client, tenant):
    response = member_client.get(url("memory:frame", tenant))

    urls = response.context["frame_config"]["urls"]
    assert urls["conversations"] == "/api/v1/agents/assistant/conversations"
    assert urls["assistant"] == "/api/v1/agents/assistant/"
    assert b'<section id="assistant"' in response.content


def test_team_memory_names_the_active_team_and_the_space_routes(member_client, tenant):
    response = member_client.get(reverse("memory:spaces"))

    assert response.status_code == 200
    assert tenant.team.name in response.content.decode()
    config = response.context["frame_config"]
    assert config["urls"] == {
        "usage": "/api/v1/memory/usage",
        "docs": "/api/v1/memory/docs",
        "doc": "/api/v1/memory/doc",
        "export": "/api/v1/memory/export",
        "import": "/api/v1/memory/import",
    }
    assert {each["value"]: each["qualifiers"] for each in config["visibilities"]} == {
        "private": ["run"],
        "bot": ["project", "bot"],
        "project": ["project"],
        "cross_project": [],
        "user": [],
        "org": [],
        "global": [],
    }


def test_team_memory_names_the_teams_members_for_the_attributions(member_client, tenant):
    response = member_client.get(reverse("memory:spaces"))

    # By id, as a document's `updatedBy` (`user:<id>`, `import:<id>`) names its writer.
    assert response.context["frame_config"]["people"] == {
        str(user.pk): user.username for user in (tenant.admin, tenant.member)
    }


def test_team_memory_is_linked_from_the_workspace_navigation(member_client, tenant):
    response = member_client.get(url("memory:frame", tenant))

    assert f'href="{reverse("memory:spaces")}"' in response.content.decode()


def test_team_memory_needs_a_signed_in_user(client):
    response = client.get(reverse("memory:spaces"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("workspaces:sign-in"))


@pytest.mark.parametrize(
    "page",
    [
        "memory:frame",
        "memory:changes",
        "memory:revision",
        "memory:notes",
        "memory:note",
        "memory:search",
        "memory:spaces",
        "memory:bots",
        "workspaces:list",
        "workspaces:settings",
        "workspaces:sign-out",
    ],
)
def test_head_answers_a_page_as_get_does_without_its_body(member_client, tenant, page):
    # Django's default for a page that reads; require_GET answered HEAD 405.
    _note(tenant, "notes/a.md", "# A\n")
    memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="- a\n")
    arguments = {
        "memory:revision": [tenant.workspace.pk, 1],
        "memory:spaces": [],
        "memory:bots": [],
        "workspaces:list": [],
        "workspaces:sign-out": [],
    }.get(page, [tenant.workspace.pk])
    address = reverse(page, args=arguments) + ("?path=notes/a.md" if page == "memory:note" else "")

    got = member_client.get(address)
    head = member_client.head(address)

    assert got.status_code == 200
    assert head.status_code == 200
    assert head.content == b""
    assert head["Content-Type"] == got["Content-Type"]
    assert member_client.session["_auth_user_id"] == str(tenant.member.pk)


def test_search_refuses_a_cursor_it_did_not_give_out_with_a_page_not_an_error(
    member_client, tenant
):
    """A search's cursor is signed (memory.documents): a forged one, which skipped documents,
    is refused, and the page says so and offers the search again rather than failing."""
    response = member_client.get(url("memory:search", tenant), {"q": "tea", "cursor": "a.md"})

    assert response.status_code == 400
    assert response.context["results"] is None
    assert b"Search further" not in response.content
    assert b"not one this search gave out" in response.content
