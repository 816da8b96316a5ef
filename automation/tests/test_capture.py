"""The automatic writer and its commit fence: one test per predicate, each false alone."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from automation import capture
from automation.errors import CaptureConflict, CaptureRetired, MemoryOversized
from automation.models import Admission, CommitFence, DeliveryCredential
from memory.edits import MemoryChange, parse_changes
from memory.errors import MemoryEditInvalid
from memory.models import MEMORY_PATH, MemoryPolicy, Proposal
from memory.selectors import memory_current_get, memory_policy_get
from memory.services import memory_clear, memory_policy_set, memory_save, memory_undo
from workspaces.models import FileVersion, KeySessionRevocation, Workspace
from workspaces.services import key_session_open, key_session_revoke, workspace_ai_consent_set


def revisions(tenant) -> list[tuple[int, str]]:
    return list(
        FileVersion.objects.filter(file__workspace=tenant.workspace, file__path=MEMORY_PATH)
        .order_by("version")
        .values_list("version", "change_kind")
    )


@pytest.fixture
def at_checkpoint(monkeypatch):
    """Run `action` when the capture reaches `stage` (after its checks, before its fence)."""

    def install(stage: str, action) -> None:
        def checkpoint(reached: str) -> None:
            if reached == stage:
                action()

        monkeypatch.setattr(capture, "_checkpoint", checkpoint)

    return install


def test_capture_commits_a_revision_with_its_fence_and_receipt(assistant):
    admission = assistant.send()

    receipt = assistant.capture(admission)

    assert (receipt.version, receipt.is_replay) == (2, False)
    text = memory_current_get(workspace=assistant.tenant.workspace)
    assert text.content == "- likes tea\n- likes green tea\n"
    fence = CommitFence.objects.get(admission=admission)
    assert (fence.ok, fence.revision.version, fence.presented_key_session_id) == (
        1,
        2,
        assistant.key_session.pk,
    )
    admission.refresh_from_db()
    assert (admission.status, admission.committed_revision_id) == ("committed", fence.revision_id)
    revision = fence.revision
    assert (revision.author_kind, revision.change_kind, revision.author) == (
        "automatic",
        "capture",
        assistant.tenant.member,
    )


def test_retry_with_the_same_body_replays_the_receipt_without_a_new_revision(assistant):
    admission = assistant.send()
    first = assistant.capture(admission)

    again = assistant.capture(admission)

    assert (again.version, again.bytes, again.is_replay) == (first.version, first.bytes, True)
    assert revisions(assistant.tenant) == [(1, "save"), (2, "capture")]
    assert CommitFence.objects.count() == 1


def test_a_second_capture_in_the_same_turn_is_refused(assistant):
    admission = assistant.send()
    assistant.capture(admission)

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission, [{"op": "add", "line": "- another"}], expected_version=2)

    assert refused.value.detail["predicate"] == "admission_unconsumed"
    assert revisions(assistant.tenant) == [(1, "save"), (2, "capture")]


def test_capture_into_a_never_written_memory_creates_it(make_assistant):
    assistant = make_assistant(memory=None)

    receipt = assistant.capture(assistant.send(), expected_version=0)

    assert receipt.version == 1
    assert memory_current_get(workspace=assistant.tenant.workspace).content == (
        "- likes green tea\n"
    )


def test_an_add_already_present_writes_nothing(assistant):
    admission = assistant.send()

    receipt = assistant.capture(admission, [{"op": "add", "line": "- likes tea"}])

    assert (receipt.is_unchanged, receipt.version) == (True, 1)
    assert revisions(assistant.tenant) == [(1, "save")]
    assert not CommitFence.objects.exists()


def test_an_unchanged_capture_leaves_the_turn_its_one_capture(assistant):
    # Only a committed capture consumes the admission (docs/architecture.md, the commit
    # fence): a no-op writes no revision and no fence row, so the turn may still capture once.
    admission = assistant.send()
    assistant.capture(admission, [{"op": "add", "line": "- likes tea"}])

    assert Admission.objects.get(pk=admission.pk).status == "admitted"
    receipt = assistant.capture(admission, [{"op": "add", "line": "- likes cake"}])

    assert (receipt.is_unchanged, receipt.version) == (False, 2)
    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission, [{"op": "add", "line": "- likes pie"}], expected_version=2)
    assert refused.value.detail["failed"] == ["admission_unconsumed"]


# Each case makes exactly one clause of the fence false, after the capture's own checks
# have passed and before its transaction, so the fence itself must refuse it.
def _move_to_a_twin_workspace(assistant, admission) -> None:
    """Re-home the admission in a workspace whose policy and consent match exactly."""
    live = Workspace.objects.get(pk=assistant.tenant.workspace.pk)
    twin = Workspace.objects.create(
        team=live.team,
        name="twin",
        ai_enabled=live.ai_enabled,
        ai_consent_revision=live.ai_consent_revision,
    )
    policy = MemoryPolicy.objects.get(workspace=live)
    MemoryPolicy.objects.create(
        workspace=twin,
        mode=policy.mode,
        policy_revision=policy.policy_revision,
        clear_generation=policy.clear_generation,
    )
    Admission.objects.filter(pk=admission.pk).update(workspace=twin)


PREDICATE_CASES = {
    "owner_matches": lambda a, adm: Admission.objects.filter(pk=adm.pk).update(
        owner=a.tenant.admin
    ),
    "workspace_matches": _move_to_a_twin_workspace,
    "admission_unconsumed": lambda a, adm: Admission.objects.filter(pk=adm.pk).update(
        status="committed", committed_at=timezone.now(), capture_digest="x" * 64
    ),
    "admission_unexpired": lambda a, adm: Admission.objects.filter(pk=adm.pk).update(
        admitted_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(seconds=1),
    ),
    "policy_still_auto": lambda a, adm: MemoryPolicy.objects.filter(
        workspace=a.tenant.workspace
    ).update(mode="read_only"),
    "policy_revision_unchanged": lambda a, adm: memory_policy_set(
        workspace=a.tenant.workspace, mode="auto", expected_revision=1, actor=a.tenant.member
    ),
    "clear_generation_unchanged": lambda a, adm: MemoryPolicy.objects.filter(
        workspace=a.tenant.workspace
    ).update(clear_generation=1),
    "ai_still_enabled": lambda a, adm: Workspace.objects.filter(pk=a.tenant.workspace.pk).update(
        ai_enabled=False
    ),
    "consent_revision_unchanged": lambda a, adm: workspace_ai_consent_set(
        workspace=a.tenant.workspace, enabled=True, expected_revision=0, actor=a.tenant.admin
    ),
    "credential_current": lambda a, adm: DeliveryCredential.objects.filter(
        conversation=a.conversation
    ).update(credential_digest="f" * 64),
    "credential_unexpired": lambda a, adm: DeliveryCredential.objects.filter(
        conversation=a.conversation
    ).update(expires_at=timezone.now() - timedelta(seconds=1)),
    "key_session_unrevoked": lambda a, adm: KeySessionRevocation.objects.create(
        key_session=a.key_session
    ),
}


@pytest.mark.parametrize("predicate", sorted(PREDICATE_CASES))
def test_each_false_predicate_alone_rolls_the_revision_back(assistant, at_checkpoint, predicate):
    admission = assistant.send()
    at_checkpoint("validated", lambda: PREDICATE_CASES[predicate](assistant, admission))

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission)

    assert refused.value.detail["failed"] == [predicate]
    assert refused.value.detail["predicate"] == predicate
    assert revisions(assistant.tenant) == [(1, "save")]
    assert not CommitFence.objects.exists()
    assert Admission.objects.get(pk=admission.pk).committed_revision_id is None


def test_key_session_other_than_the_admissions_is_refused_by_the_fence(assistant):
    admission = assistant.send()
    other = key_session_open(workspace=assistant.tenant.workspace, user=assistant.tenant.member)

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission, key_session_id=other.pk)

    assert refused.value.detail["failed"] == ["key_session_matches"]
    assert revisions(assistant.tenant) == [(1, "save")]


def test_turn_admitted_in_read_only_cannot_capture(make_assistant):
    assistant = make_assistant(mode="read_only")
    admission = assistant.send()

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission)

    assert refused.value.detail["failed"][0] == "admitted_in_auto"
    assert revisions(assistant.tenant) == [(1, "save")]


def test_mode_change_after_admission_retires_the_capture(assistant):
    admission = assistant.send()
    memory_policy_set(
        workspace=assistant.tenant.workspace,
        mode="off",
        expected_revision=1,
        actor=assistant.tenant.member,
    )

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission)

    assert set(refused.value.detail["failed"]) == {"policy_still_auto", "policy_revision_unchanged"}
    assert revisions(assistant.tenant) == [(1, "save")]


def test_a_newer_turn_retires_the_older_turns_capture(assistant):
    older = assistant.send("first")
    newer = assistant.send("second")

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(older)
    receipt = assistant.capture(newer)

    assert refused.value.detail["failed"] == ["credential_current"]
    assert receipt.version == 2


def test_revoked_key_session_is_refused_as_the_fence_clause_before_the_fence(assistant):
    admission = assistant.send()
    key_session_revoke(session=assistant.key_session, revoked_by=assistant.tenant.member)

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission)

    assert refused.value.detail["failed"] == ["key_session_unrevoked"]
    assert revisions(assistant.tenant) == [(1, "save")]


def test_clear_after_admission_retires_the_capture_and_makes_no_proposal(assistant):
    admission = assistant.send()
    memory_clear(
        workspace=assistant.tenant.workspace, author=assistant.tenant.member, base_version=1
    )

    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admission)

    assert "clear_generation_unchanged" in refused.value.detail["failed"]
    assert memory_current_get(workspace=assistant.tenant.workspace).content == ""
    assert not Proposal.objects.exists()


def test_a_version_conflict_keeps_the_newer_text_and_returns_a_proposal(assistant):
    admission = assistant.send()
    memory_save(
        workspace=assistant.tenant.workspace,
        author=assistant.tenant.member,
        base_version=1,
        content="- likes tea\n- edited by a person\n",
    )

    with pytest.raises(CaptureConflict) as conflict:
        assistant.capture(admission, expected_version=1)

    assert conflict.value.code == "VERSION_CONFLICT"
    proposal = Proposal.objects.get(pk=conflict.value.detail["proposalId"])
    assert (proposal.base_version, proposal.reason, proposal.status) == (
        2,
        "version_conflict",
        "open",
    )
    assert memory_current_get(workspace=assistant.tenant.workspace).content == (
        "- likes tea\n- edited by a person\n"
    )
    assert Admission.objects.get(pk=admission.pk).status == "admitted"


@pytest.mark.parametrize("same_size", [True, False])
def test_a_save_between_the_captures_read_and_its_fence_is_a_conflict_and_a_proposal(
    assistant, at_checkpoint, same_size
):
    # The capture's write reuses its memory read (the file and the replaced size) instead
    # of reading the file again in its transaction: the compare-and-set alone must refuse.
    admission = assistant.send()
    person = "- likes tee\n" if same_size else "- likes tea\n- edited by a person\n"
    at_checkpoint(
        "validated",
        lambda: memory_save(
            workspace=assistant.tenant.workspace,
            author=assistant.tenant.member,
            base_version=1,
            content=person,
        ),
    )

    with pytest.raises(CaptureConflict) as conflict:
        assistant.capture(admission, expected_version=1)

    proposal = Proposal.objects.get(pk=conflict.value.detail["proposalId"])
    assert (proposal.base_version, proposal.reason) == (2, "version_conflict")
    assert memory_current_get(workspace=assistant.tenant.workspace).content == person
    assert revisions(assistant.tenant) == [(1, "save"), (2, "save")]
    assert not CommitFence.objects.exists()
    assert Admission.objects.get(pk=admission.pk).status == "admitted"


def test_capture_into_memory_over_the_recall_bound_is_refused(assistant, settings):
    memory_save(
        workspace=assistant.tenant.workspace,
        author=assistant.tenant.member,
        base_version=1,
        content="x" * 8193,
    )
    admission = assistant.send()

    with pytest.raises(MemoryOversized) as refused:
        assistant.capture(admission, expected_version=2)

    assert refused.value.detail["reason"] == "memory_over_bound"
    assert len(memory_current_get(workspace=assistant.tenant.workspace).content) == 8193


def test_capture_that_would_cross_the_recall_bound_is_refused(assistant):
    memory_save(
        workspace=assistant.tenant.workspace,
        author=assistant.tenant.member,
        base_version=1,
        content="x" * 8000 + "\n",
    )
    admission = assistant.send()

    with pytest.raises(MemoryOversized) as refused:
        assistant.capture(admission, [{"op": "add", "line": "y" * 300}], expected_version=2)

    assert refused.value.detail["reason"] == "result_over_bound"
    assert revisions(assistant.tenant) == [(1, "save"), (2, "save")]


def test_an_edit_that_does_not_match_exactly_once_writes_nothing(assistant):
    admission = assistant.send()

    with pytest.raises(MemoryEditInvalid) as refused:
        assistant.capture(admission, [{"op": "remove", "target": "- likes coffee"}])

    assert refused.value.detail == {"change": 0, "reason": "no_match"}
    assert revisions(assistant.tenant) == [(1, "save")]
    assert Admission.objects.get(pk=admission.pk).status == "admitted"


def test_undo_and_clear_never_rewind_generation_after_captures(assistant):
    workspace, person = assistant.tenant.workspace, assistant.tenant.member
    assistant.capture(assistant.send())
    admitted_before_the_clear = assistant.send()
    memory_clear(workspace=workspace, author=person, base_version=2)

    undone = memory_undo(workspace=workspace, author=person, base_version=3, restore_version=2)

    assert (undone.version, undone.change_kind) == (4, "undo")
    assert memory_current_get(workspace=workspace).content == "- likes tea\n- likes green tea\n"
    policy = memory_policy_get(workspace=workspace)
    assert (policy.clear_generation, policy.policy_revision) == (1, 1)
    # Undo brought the captured text back, not the authority the Clear retired.
    with pytest.raises(CaptureRetired) as refused:
        assistant.capture(admitted_before_the_clear, expected_version=4)
    assert refused.value.detail["failed"] == ["clear_generation_unchanged"]
    assert revisions(assistant.tenant) == [(1, "save"), (2, "capture"), (3, "clear"), (4, "undo")]


def test_a_refused_capture_leaves_its_reason_on_the_admission(assistant):
    admission = assistant.send()
    memory_policy_set(
        workspace=assistant.tenant.workspace,
        mode="off",
        expected_revision=1,
        actor=assistant.tenant.member,
    )

    with pytest.raises(CaptureRetired):
        assistant.capture(admission)

    stored = Admission.objects.get(pk=admission.pk)
    assert (stored.capture_refusal_code, stored.capture_refusal_reason) == (
        "CAPTURE_RETIRED",
        "policy_still_auto",
    )
    assert stored.capture_refused_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_capture_sends_a_fixed_number_of_statements_and_no_savepoint(assistant, turns_held):
    admission = Admission.objects.select_related("owner", "workspace").get(pk=assistant.send().pk)

    with CaptureQueriesContext(connection) as captured:
        capture.capture_commit(
            admission=admission,
            owner=admission.owner,
            workspace=admission.workspace,
            key_session_id=assistant.key_session.pk,
            expected_version=1,
            changes=[MemoryChange(op="add", line="- likes green tea")],
        )

    # The judge, the key session's row and the memory read; then, on PostgreSQL, BEGIN, the
    # fence's locks, the compare-and-set with the revision and the quota's read, one
    # statement for the fence row and the admission's commit, COMMIT: eight round trips.
    # The write reads no file row of its own (the memory read gave it). On SQLite (no
    # locks: the transaction is IMMEDIATE, and no INSERT inside WITH) the compare-and-set,
    # the revision and the quota's read apart, and the fence row and the admission's commit
    # apart. One more fails this test.
    sent = [query["sql"] for query in captured.captured_queries]
    work = [sql for sql in sent if sql.split()[0].upper() not in ("BEGIN", "COMMIT")]
    if connection.vendor == "postgresql":
        assert len(sent) == 8, sent
        assert len(work) == 6, work
    else:
        assert len(work) == 8, work
    assert not any("SAVEPOINT" in sql for sql in sent)
    assert revisions(assistant.tenant) == [(1, "save"), (2, "capture")]


def test_the_stored_digests_do_not_confirm_a_guess_of_the_text(assistant):
    """The admission's digests of the message and of the captured change are keyed: a plain
    SHA-256 of a short text in an operational table tells whoever reads the table whether
    a guessed message or memory line is the one sent."""
    admission = assistant.send("my PIN is 4321")
    assistant.capture(admission)

    admission.refresh_from_db()
    changes = parse_changes([{"op": "add", "line": "- likes green tea"}])
    guessed_change = {"expectedVersion": 1, "changes": [c.as_dict() for c in changes]}
    unkeyed = {
        hashlib.sha256(b"my PIN is 4321").hexdigest(),
        hashlib.sha256(json.dumps(guessed_change, sort_keys=True).encode()).hexdigest(),
    }
    assert len(admission.request_digest) == len(admission.capture_digest) == 64
    assert {admission.request_digest, admission.capture_digest}.isdisjoint(unkeyed)
