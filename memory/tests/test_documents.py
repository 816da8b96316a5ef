"""The one document service: the same rules for every actor, in each actor's order."""

from __future__ import annotations

import pytest

from memory.documents import ActorKind, DocumentActor, document_move, document_write
from memory.errors import MemoryNamespaceReserved
from memory.models import MEMORY_PATH
from memory.selectors import memory_current_get, memory_policy_get
from workspaces.errors import InvalidDocumentPath, KeySessionUnavailable
from workspaces.models import File, FileVersion


def actor(tenant, kind: ActorKind) -> DocumentActor:
    return DocumentActor(kind=kind, workspace=tenant.workspace, user=tenant.member)


@pytest.mark.parametrize(
    ("kind", "refusal"),
    [
        # A person learns the one spelling first (and may then write the memory document).
        (ActorKind.PERSON, InvalidDocumentPath),
        # Everyone else is refused the namespace before the spelling is looked at.
        (ActorKind.CLIENT, MemoryNamespaceReserved),
        (ActorKind.ASSISTANT, MemoryNamespaceReserved),
    ],
)
def test_a_misspelt_memory_path_meets_each_actors_first_rule(tenant, kind, refusal):
    with pytest.raises(refusal):
        document_write(
            actor=actor(tenant, kind),
            raw_path="./.zudotext//memory/memory.md",
            content="planted",
            base_version=0,
        )

    assert not File.objects.filter(workspace=tenant.workspace).exists()


def test_only_a_person_writes_the_memory_document_and_then_as_a_memory_save(tenant):
    with pytest.raises(MemoryNamespaceReserved):
        document_write(
            actor=actor(tenant, ActorKind.CLIENT),
            raw_path=MEMORY_PATH,
            content="planted",
            base_version=0,
        )

    document_write(
        actor=actor(tenant, ActorKind.PERSON), raw_path=MEMORY_PATH, content="", base_version=0
    )
    cleared = document_write(
        actor=actor(tenant, ActorKind.PERSON),
        raw_path=MEMORY_PATH,
        content="",
        base_version=1,
        is_clear=True,
    )

    assert (cleared.version, cleared.change_kind) == (2, FileVersion.ChangeKind.CLEAR)
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 1
    assert memory_current_get(workspace=tenant.workspace).version == 2


def test_the_assistant_needs_its_key_session_before_any_change(tenant):
    person = actor(tenant, ActorKind.PERSON)
    document_write(actor=person, raw_path="notes/a.md", content="one", base_version=0)

    with pytest.raises(KeySessionUnavailable):
        document_move(
            actor=actor(tenant, ActorKind.ASSISTANT),
            raw_source="notes/a.md",
            raw_destination="notes/b.md",
            base_version=1,
        )

    assert list(File.objects.values_list("path", "current_version")) == [("notes/a.md", 1)]
