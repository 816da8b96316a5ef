"""Blame across a capture: the line the assistant added names its turn, until a person
changes it."""

from __future__ import annotations

from automation.selectors import capture_links_for_revisions
from memory import provenance
from memory.provenance import memory_blame
from memory.services import memory_undo


def origin_of(blame, number: int) -> tuple[int, str, str, object, object]:
    line = blame.lines[number - 1]
    return (
        line.origin.version,
        line.origin.change_kind,
        line.origin.author_kind,
        line.conversation_id,
        line.admission_id,
    )


def test_a_captured_line_edited_by_a_person_and_moved_by_an_undo_carries_each_origin(assistant):
    workspace = assistant.tenant.workspace
    admission = assistant.send("remember I like green tea")

    assistant.capture(admission, [{"op": "add", "line": "- likes green tea"}])
    captured = memory_blame(workspace=workspace)
    assistant.save_memory(
        "- prefers short answers\n- likes tea\n- likes jasmine tea\n", base_version=2
    )
    edited = memory_blame(workspace=workspace)
    memory_undo(
        workspace=workspace, author=assistant.tenant.admin, base_version=3, restore_version=2
    )
    undone = memory_blame(workspace=workspace)

    turn = (assistant.conversation.pk, admission.pk)
    assert origin_of(captured, 1) == (1, "save", "human", None, None)
    assert origin_of(captured, 2) == (2, "capture", "automatic", *turn)
    assert captured.lines[1].origin.author == assistant.tenant.member
    assert [origin_of(edited, n)[:3] for n in (1, 2, 3)] == [
        (3, "save", "human"),
        (1, "save", "human"),
        (3, "save", "human"),
    ]
    assert origin_of(edited, 3)[3:] == (None, None)
    # The Undo moved "- likes tea" back to line 1 (unchanged: it keeps version 1) and put
    # "- likes green tea" back: the Undo is the origin of what it changed.
    assert origin_of(undone, 1) == (1, "save", "human", None, None)
    assert origin_of(undone, 2) == (4, "undo", "human", None, None)
    assert undone.lines[1].origin.author == assistant.tenant.admin


def test_blame_over_the_api_links_a_captured_line_to_its_turn(assistant):
    admission = assistant.send("remember I like green tea")
    assistant.capture(admission, [{"op": "add", "line": "- likes green tea"}])
    client = assistant.tenant.client_for(assistant.tenant.admin)

    response = client.get(f"/api/v1/workspaces/{assistant.tenant.workspace.pk}/memory/blame")

    line = response.json()["lines"][1]
    assert (line["version"], line["changeKind"], line["authorKind"]) == (2, "capture", "automatic")
    assert line["conversationId"] == str(assistant.conversation.pk)
    assert line["admissionId"] == str(admission.pk)
    assert "green" not in response.content.decode()


def test_blame_asks_for_the_turn_behind_captured_revisions_only(assistant, monkeypatch):
    workspace = assistant.tenant.workspace
    asked: list[list[int]] = []

    def recording(revision_ids):
        asked.append(sorted(revision_ids))
        return capture_links_for_revisions(revision_ids)

    monkeypatch.setattr(provenance, "_capture_link_resolvers", [recording])
    memory_blame(workspace=workspace)
    admission = assistant.send("remember I like green tea")
    assistant.capture(admission, [{"op": "add", "line": "- likes green tea"}])

    captured = memory_blame(workspace=workspace)

    assert asked == [[captured.lines[1].origin.id]]
    assert captured.lines[1].admission_id == admission.pk
