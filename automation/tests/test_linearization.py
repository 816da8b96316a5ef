"""The commit fence linearizes against every retiring action, on PostgreSQL.

For each action, two interleavings with real concurrent connections:
- the action commits first (the capture is held until it has): the capture is refused;
- the capture holds its fence locks first: the action waits, then finds it done.
Each test checks that the second party really waited on a lock, so the order is the one
the locks impose, not an accident of scheduling.
"""

from __future__ import annotations

import pytest

from automation import capture as capture_module
from automation.capture import CaptureReceipt, capture_propose
from automation.errors import CaptureRetired
from automation.models import Admission, CommitFence
from conftest import Interleaving, postgres_only, run_concurrently
from memory.edits import parse_changes
from memory.models import MEMORY_PATH, Proposal
from memory.selectors import memory_current_get, memory_policy_get
from memory.services import memory_clear, memory_policy_set
from workspaces.errors import VersionConflict
from workspaces.models import FileVersion, KeySession, KeySessionRevocation, Workspace
from workspaces.services import key_session_revoke, workspace_ai_consent_set

# The captures here stand in for the turn's runtime, so the turn stays queued: a turn run to
# its end (the eager worker, once the send commits) would retire its credential first.
pytestmark = [
    postgres_only,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("turns_held"),
]


class FenceInterleaving(Interleaving):
    """An interleaving that can also hold a capture inside its fence."""

    def held_inside_the_fence(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Hold the first capture to take all of the fence's locks, right there."""

        def checkpoint(stage: str) -> None:
            if stage == "locked" and not self.holding.is_set():
                self._hold()

        monkeypatch.setattr(capture_module, "_checkpoint", checkpoint)


def mode_change(assistant):
    return memory_policy_set(
        workspace=assistant.tenant.workspace,
        mode="off",
        expected_revision=1,
        actor=assistant.tenant.member,
    )


def clear(assistant):
    return memory_clear(
        workspace=assistant.tenant.workspace, author=assistant.tenant.member, base_version=1
    )


def consent_change(assistant):
    return workspace_ai_consent_set(
        workspace=assistant.tenant.workspace,
        enabled=False,
        expected_revision=0,
        actor=assistant.tenant.admin,
    )


def new_turn(assistant):
    return assistant.send("a newer message")


def revocation(assistant):
    return key_session_revoke(session=assistant.key_session, revoked_by=assistant.tenant.member)


ACTIONS = {
    "mode_change": (mode_change, "policy_still_auto"),
    "clear": (clear, "clear_generation_unchanged"),
    "consent_change": (consent_change, "ai_still_enabled"),
    "new_turn": (new_turn, "credential_current"),
    "revocation": (revocation, "key_session_unrevoked"),
}


@pytest.mark.parametrize("action_name", sorted(ACTIONS))
def test_action_that_commits_first_retires_the_capture(assistant, action_name):
    action, predicate = ACTIONS[action_name]
    admission = assistant.send()
    interleaving = FenceInterleaving()

    results = run_concurrently(
        interleaving.held_in_its_transaction(lambda: action(assistant)),
        interleaving.once_held(lambda: assistant.capture(admission)),
        interleaving.referee,
    )

    assert results[0] is None or not isinstance(results[0], BaseException), results[0]
    assert isinstance(results[1], CaptureRetired), results[1]
    assert predicate in results[1].detail["failed"]
    assert not CommitFence.objects.filter(admission=admission).exists()
    assert Admission.objects.get(pk=admission.pk).status == "admitted"
    assert memory_current_get(workspace=assistant.tenant.workspace).content != (
        "- likes tea\n- likes green tea\n"
    )


@pytest.mark.parametrize("action_name", sorted(ACTIONS))
def test_capture_that_commits_first_stands_and_the_action_sees_it(
    assistant, monkeypatch, action_name
):
    action, _ = ACTIONS[action_name]
    admission = assistant.send()
    interleaving = FenceInterleaving()
    interleaving.held_inside_the_fence(monkeypatch)

    results = run_concurrently(
        lambda: assistant.capture(admission),
        interleaving.once_held(lambda: action(assistant)),
        interleaving.referee,
    )

    assert isinstance(results[0], CaptureReceipt), results[0]
    assert CommitFence.objects.get(admission=admission).ok == 1
    assert Admission.objects.get(pk=admission.pk).status == "committed"
    workspace = Workspace.objects.get(pk=assistant.tenant.workspace.pk)
    if action_name == "clear":
        # The Clear was based on version 1; the capture made version 2 first.
        assert isinstance(results[1], VersionConflict)
        assert results[1].detail == {"currentVersion": 2}
        assert memory_policy_get(workspace=workspace).clear_generation == 0
        assert "green tea" in memory_current_get(workspace=workspace).content
        return
    assert not isinstance(results[1], BaseException), results[1]
    if action_name == "mode_change":
        assert memory_policy_get(workspace=workspace).mode == "off"
    elif action_name == "consent_change":
        assert workspace.ai_enabled is False
    elif action_name == "new_turn":
        assert Admission.objects.filter(conversation=assistant.conversation).count() == 2
    else:
        assert KeySessionRevocation.objects.filter(key_session=assistant.key_session).exists()
        assert KeySession.objects.get(pk=assistant.key_session.pk).revoked_at is not None
    assert "green tea" in memory_current_get(workspace=workspace).content


def test_a_transport_retry_overlapping_the_original_waits_and_replays_its_receipt(
    assistant, monkeypatch
):
    admission = assistant.send()
    interleaving = FenceInterleaving()
    interleaving.held_inside_the_fence(monkeypatch)

    first, again, _ = run_concurrently(
        lambda: assistant.capture(admission),
        interleaving.once_held(lambda: assistant.capture(admission)),
        interleaving.referee,
    )

    assert isinstance(first, CaptureReceipt), first
    assert isinstance(again, CaptureReceipt), again
    assert (first.is_replay, again.is_replay) == (False, True)
    assert (again.version, again.bytes, again.committed_at) == (
        first.version,
        first.bytes,
        first.committed_at,
    )
    assert list(
        FileVersion.objects.filter(file__path=MEMORY_PATH)
        .order_by("version")
        .values_list("version", "change_kind")
    ) == [(1, "save"), (2, "capture")]
    assert CommitFence.objects.get(admission=admission).revision.version == 2
    assert not Proposal.objects.exists()


READ_ONLY_RETIREMENTS = {
    "switched_off": lambda assistant: memory_policy_set(
        workspace=assistant.tenant.workspace,
        mode="off",
        expected_revision=0,
        actor=assistant.tenant.member,
    ),
    "new_turn": new_turn,
}


@pytest.mark.parametrize("action_name", sorted(READ_ONLY_RETIREMENTS))
def test_a_retirement_that_commits_first_leaves_a_read_only_turn_no_proposal(
    make_assistant, action_name
):
    assistant = make_assistant(mode="read_only")
    admission = Admission.objects.select_related("owner", "workspace").get(pk=assistant.send().pk)
    interleaving = FenceInterleaving()

    results = run_concurrently(
        interleaving.held_in_its_transaction(lambda: READ_ONLY_RETIREMENTS[action_name](assistant)),
        interleaving.once_held(
            lambda: capture_propose(
                admission=admission,
                key_session_id=assistant.key_session.pk,
                changes=parse_changes([{"op": "add", "line": "- likes green tea"}]),
            )
        ),
        interleaving.referee,
    )

    assert not isinstance(results[0], BaseException), results[0]
    assert isinstance(results[1], CaptureRetired), results[1]
    assert not Proposal.objects.exists()
