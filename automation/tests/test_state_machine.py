"""A model of the memory's life, checked against the real services after every step.

The model only tracks which admissions may still write; the services must agree: a
capture is committed exactly when the model says its turn still has authority.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from automation.capture import capture_commit
from automation.errors import CaptureRetired
from automation.models import Admission
from automation.services import conversation_create, message_admit
from memory.edits import parse_changes
from memory.models import MEMORY_PATH
from memory.selectors import memory_current_get, memory_policy_get
from memory.services import memory_clear, memory_policy_set, memory_save
from workspaces.errors import KeySessionUnavailable
from workspaces.models import FileVersion
from workspaces.services import key_session_open, key_session_revoke


@dataclass
class Turn:
    admission: Admission
    conversation_index: int
    may_write: bool


class MemoryLife(RuleBasedStateMachine):
    def __init__(self, make_tenant) -> None:
        super().__init__()
        self.make_tenant = make_tenant
        self.turns: list[Turn] = []
        self.highest_generation = 0
        self.sent = 0

    @initialize()
    def start(self) -> None:
        self.tenant = self.make_tenant()
        self.workspace = self.tenant.workspace
        self.person = self.tenant.member
        self.mode = "auto"
        memory_policy_set(
            workspace=self.workspace, mode="auto", expected_revision=0, actor=self.person
        )
        memory_save(workspace=self.workspace, author=self.person, base_version=0, content="- a\n")
        self.conversations = [
            conversation_create(workspace=self.workspace, owner=self.person) for _ in range(2)
        ]
        self.key_session = key_session_open(workspace=self.workspace, user=self.person)

    def _retire_all(self) -> None:
        for turn in self.turns:
            turn.may_write = False

    @rule(conversation_index=st.integers(0, 1))
    def send(self, conversation_index: int) -> None:
        self.sent += 1
        admission = message_admit(
            conversation=self.conversations[conversation_index],
            sender=self.person,
            text=f"message {self.sent}",
            idempotency_key=f"k{self.sent}",
            key_session_id=self.key_session.pk,
            memory_state=None,
        ).admission
        for turn in self.turns:
            if turn.conversation_index == conversation_index:
                turn.may_write = False  # a newer turn took the credential slot
        self.turns.append(Turn(admission, conversation_index, may_write=self.mode == "auto"))

    @precondition(lambda self: self.turns)
    @rule(data=st.data())
    def capture_any(self, data: st.DataObject) -> None:
        self._capture(data.draw(st.sampled_from(self.turns)))

    @precondition(lambda self: self.turns)
    @rule()
    def capture_newest(self) -> None:
        # The newest turn is the one most often still entitled; trying it often makes
        # "retiring action, then capture" sequences common.
        self._capture(self.turns[-1])

    def _capture(self, turn: Turn) -> None:
        current = memory_current_get(workspace=self.workspace)
        line = f"- captured {self.sent}-{len(self.turns)}-{current.version}"
        admission = Admission.objects.select_related("owner", "workspace").get(pk=turn.admission.pk)
        try:
            receipt = capture_commit(
                admission=admission,
                owner=self.person,
                workspace=self.workspace,
                key_session_id=self.key_session.pk,
                expected_version=current.version,
                changes=parse_changes([{"op": "add", "line": line}]),
            )
        except (CaptureRetired, KeySessionUnavailable):
            assert not turn.may_write, "a turn with authority was refused"
            return
        assert turn.may_write, "a retired turn wrote memory"
        assert receipt.version == current.version + 1
        assert line in memory_current_get(workspace=self.workspace).content
        turn.may_write = False  # consumed: one capture per turn

    @rule(mode=st.sampled_from(["auto", "auto", "off", "read_only"]))
    def change_mode(self, mode: str) -> None:
        revision = memory_policy_get(workspace=self.workspace).policy_revision
        memory_policy_set(
            workspace=self.workspace, mode=mode, expected_revision=revision, actor=self.person
        )
        self.mode = mode
        self._retire_all()

    @rule()
    def clear(self) -> None:
        current = memory_current_get(workspace=self.workspace)
        memory_clear(workspace=self.workspace, author=self.person, base_version=current.version)
        self._retire_all()

    @rule()
    def revoke_and_reopen(self) -> None:
        key_session_revoke(session=self.key_session, revoked_by=self.person)
        self.key_session = key_session_open(workspace=self.workspace, user=self.person)
        self._retire_all()

    @rule()
    def human_save(self) -> None:
        current = memory_current_get(workspace=self.workspace)
        memory_save(
            workspace=self.workspace,
            author=self.person,
            base_version=current.version,
            content=current.content + "- a person's line\n",
        )

    @invariant()
    def versions_are_contiguous(self) -> None:
        if not hasattr(self, "workspace"):
            return
        versions = list(
            FileVersion.objects.filter(file__workspace=self.workspace, file__path=MEMORY_PATH)
            .order_by("version")
            .values_list("version", flat=True)
        )
        assert versions == list(range(1, len(versions) + 1))

    @invariant()
    def clear_generation_never_decreases(self) -> None:
        if not hasattr(self, "workspace"):
            return
        generation = memory_policy_get(workspace=self.workspace).clear_generation
        assert generation >= self.highest_generation
        self.highest_generation = generation


def test_memory_life_state_machine(make_tenant):
    class MemoryLifeHere(MemoryLife):
        def __init__(self) -> None:
            super().__init__(make_tenant)

    run_state_machine_as_test(
        MemoryLifeHere,
        settings=settings(max_examples=60, stateful_step_count=20, deadline=None),
    )
