"""The assistant's document tools: the memory namespace is refused before any request."""

from __future__ import annotations

import pytest

from automation import tools
from automation.models import Admission
from automation.tools import TurnContext
from workspaces.models import File

SPELLINGS = [
    ".zudotext/memory/memory.md",
    ".ZUDOTEXT/Memory/memory.md",
    "./.zudotext//memory/memory.md",
    ".zudotext\\memory\\memory.md",
    "%2Ezudotext%2Fmemory%2Fmemory.md",
    "\uff0ezudotext/memory/memory.md",
]


def context(assistant):
    admission = Admission.objects.select_related("owner", "workspace__team").get(
        pk=assistant.send().pk
    )
    return TurnContext(
        admission=admission, key_session_id=admission.key_session_id, recalled_version=1
    )


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize(
    ("tool", "extra"),
    [("read_document", {}), ("create_note", {"content": "x"}), ("propose_edit", {"content": "x"})],
)
def test_memory_namespace_is_refused_without_making_a_request(
    assistant, monkeypatch, tool, extra, spelling
):
    def no_request(**_):
        raise AssertionError("the tool reached the document store")

    for name in ("document_read", "document_write", "document_actor_for_turn"):
        monkeypatch.setattr(tools, name, no_request)

    result = tools.TOOLS[tool](context(assistant), path=spelling, **extra)

    assert (result["status"], result["code"]) == ("refused", "MEMORY_NAMESPACE_RESERVED")


def test_create_read_list_and_search_a_note(assistant):
    turn = context(assistant)

    created = tools.create_note(turn, path="notes/plan.md", content="ship the ferret feature\n")
    read = tools.read_document(turn, path="notes/plan.md")
    listed = tools.list_documents(turn)
    found = tools.search_documents(turn, query="ferret")

    assert created == {"status": "created", "path": "notes/plan.md", "version": 1}
    assert read["content"] == "ship the ferret feature\n"
    assert [d["path"] for d in listed["documents"]] == ["notes/plan.md"]
    assert [r["path"] for r in found["results"]] == ["notes/plan.md"]
    assert File.objects.get(path="notes/plan.md").versions.get().author_kind == "automatic"


def test_list_and_search_never_show_memory(assistant):
    turn = context(assistant)

    listed = tools.list_documents(turn)
    found = tools.search_documents(turn, query="likes tea")

    assert listed["documents"] == []
    assert found["results"] == []


def test_create_note_never_overwrites(assistant):
    turn = context(assistant)
    tools.create_note(turn, path="notes/a.md", content="first\n")

    again = tools.create_note(turn, path="notes/a.md", content="second\n")

    assert (again["status"], again["code"]) == ("refused", "VERSION_CONFLICT")
    assert tools.read_document(turn, path="notes/a.md")["content"] == "first\n"


def test_propose_edit_writes_nothing(assistant):
    turn = context(assistant)
    tools.create_note(turn, path="notes/a.md", content="first\n")

    result = tools.propose_edit(turn, path="notes/a.md", content="better\n")

    assert result["status"] == "proposed"
    assert tools.read_document(turn, path="notes/a.md")["content"] == "first\n"
