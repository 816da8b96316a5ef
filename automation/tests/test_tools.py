"""remember_in_memory: commit in Auto, propose in Read only, nothing when Off."""

from __future__ import annotations

import pytest

from automation.models import Admission
from automation.tools import TurnContext, remember_in_memory
from memory.errors import SecretDetected
from memory.models import MEMORY_PATH, Proposal
from memory.selectors import memory_current_get
from memory.services import memory_clear, memory_policy_set, memory_save
from memory.tests.secret_corpus import fake

ADD = [{"op": "add", "line": "- likes green tea"}]


def context(assistant, admission, recalled_version=1):
    admission = Admission.objects.select_related("owner", "workspace").get(pk=admission.pk)
    return TurnContext(
        admission=admission,
        key_session_id=admission.key_session_id,
        recalled_version=recalled_version,
    )


def test_auto_says_remembered_only_with_a_committed_receipt(assistant):
    result = remember_in_memory(context(assistant, assistant.send()), ADD)

    assert result == {"status": "remembered", "version": 2, "replayed": False}
    assert "green tea" in memory_current_get(workspace=assistant.tenant.workspace).content


def test_read_only_returns_a_stored_proposal_and_writes_nothing(make_assistant):
    assistant = make_assistant(mode="read_only")

    result = remember_in_memory(context(assistant, assistant.send()), ADD)

    assert result["status"] == "proposed"
    proposal = Proposal.objects.get(pk=result["proposalId"])
    assert (proposal.reason, proposal.base_version, proposal.clear_generation) == (
        "read_only",
        1,
        0,
    )
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1


READ_ONLY_RETIREMENTS = {
    "switched off": (
        lambda a: memory_policy_set(
            workspace=a.tenant.workspace, mode="off", expected_revision=0, actor=a.tenant.admin
        ),
        "policy_revision_unchanged",
    ),
    "superseded by a newer turn": (lambda a: a.send("a newer message"), "credential_current"),
}


@pytest.mark.parametrize("retirement", sorted(READ_ONLY_RETIREMENTS))
def test_a_read_only_turn_stores_no_proposal_once_retired(make_assistant, retirement):
    assistant = make_assistant(mode="read_only")
    admission = assistant.send()
    retire, predicate = READ_ONLY_RETIREMENTS[retirement]
    retire(assistant)

    result = remember_in_memory(context(assistant, admission), ADD)

    assert (result["status"], result["code"], result["predicate"]) == (
        "refused",
        "CAPTURE_RETIRED",
        predicate,
    )
    assert not Proposal.objects.exists()
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1


def test_off_does_nothing(make_assistant):
    assistant = make_assistant(mode="off")

    result = remember_in_memory(context(assistant, assistant.send()), ADD)

    assert result["status"] == "off"
    assert not Proposal.objects.exists()
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1


def test_conflict_comes_back_as_a_proposal_never_a_rebase(assistant):
    admission = assistant.send()
    memory_save(
        workspace=assistant.tenant.workspace,
        author=assistant.tenant.member,
        base_version=1,
        content="- likes tea\n- person's newer line\n",
    )

    result = remember_in_memory(context(assistant, admission, recalled_version=1), ADD)

    assert (result["status"], result["reason"], result["currentVersion"]) == (
        "proposed",
        "version_conflict",
        2,
    )
    assert memory_current_get(workspace=assistant.tenant.workspace).content == (
        "- likes tea\n- person's newer line\n"
    )


def test_without_a_key_session_capture_is_refused(assistant):
    admission = assistant.send(key_session=None)

    result = remember_in_memory(context(assistant, admission), ADD)

    assert (result["status"], result["code"]) == ("refused", "KEY_SESSION_UNAVAILABLE")


def test_retired_turn_is_refused_with_the_predicate(assistant):
    admission = assistant.send()
    memory_clear(
        workspace=assistant.tenant.workspace, author=assistant.tenant.member, base_version=1
    )

    result = remember_in_memory(context(assistant, admission, recalled_version=2), ADD)

    assert (result["status"], result["code"], result["predicate"]) == (
        "refused",
        "CAPTURE_RETIRED",
        "clear_generation_unchanged",
    )


def test_malformed_edits_are_refused_not_raised(assistant):
    result = remember_in_memory(context(assistant, assistant.send()), [{"op": "shout"}])

    assert (result["status"], result["code"], result["reason"]) == (
        "refused",
        "MEMORY_EDIT_INVALID",
        "unknown_op",
    )


def test_read_only_stores_no_proposal_adding_a_credential(make_assistant):
    assistant = make_assistant(mode="read_only")
    changes = [*ADD, {"op": "add", "line": f"- token ghp_{fake(36)}", "heading": "# Keys"}]

    result = remember_in_memory(context(assistant, assistant.send()), changes)

    assert result == {
        "status": "refused",
        "code": "SECRET_DETECTED",
        "message": SecretDetected.default_message,
        "path": MEMORY_PATH,
        "rule": "github_token",
        "line": 1,
        "change": 1,
    }
    assert not Proposal.objects.exists()


def test_read_only_proposes_removing_a_saved_credential(make_assistant):
    saved = f"- token ghp_{fake(36)}"
    assistant = make_assistant(mode="read_only", memory=f"{saved}\n")

    result = remember_in_memory(
        context(assistant, assistant.send()), [{"op": "remove", "target": saved}]
    )

    assert result["status"] == "proposed"
    assert Proposal.objects.filter(pk=result["proposalId"]).exists()


def test_auto_refuses_a_credential_without_raising(assistant):
    result = remember_in_memory(
        context(assistant, assistant.send()), [{"op": "add", "line": f"npm_{fake(36)}"}]
    )

    assert (result["status"], result["code"], result["rule"], result["line"]) == (
        "refused",
        "SECRET_DETECTED",
        "npm_token",
        2,
    )
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1
