"""/api/v1/automation/workspaces/{id}/memory: the automatic writer (PUT) and recall (GET)
over HTTP, for an agent runtime holding a turn's delivery credential."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from automation import services
from automation.api.views import AutomationMemoryApi
from automation.models import Admission, CommitFence, DeliveryCredential, RecallStatus, Turn
from automation.providers import ModelProvider, ProviderUnavailable, ScriptedProvider
from automation.runtime import turn_run
from automation.selectors import (
    admission_by_credential_digest,
    admission_with_recall_facts_by_credential_digest,
)
from automation.services import Recall
from automation.tokens import delivery_credential_cache_key
from conftest import assert_error, postgres_only
from memory.models import MEMORY_PATH, Proposal
from memory.selectors import memory_current_get
from memory.services import memory_policy_set, memory_save
from memory.tests.secret_corpus import CREDENTIALS, PROSE, fake
from workspaces import sql
from workspaces.models import FileVersion, User
from workspaces.services import key_session_open
from workspaces.tokens import bearer_secret_digest

CHANGE = {"expectedVersion": 1, "changes": [{"op": "add", "line": "- likes green tea"}]}


class Runtime:
    """An agent runtime holding the delivery credential of one admitted turn."""

    def __init__(self, assistant, admission) -> None:
        self.admission = admission
        self.url = f"/api/v1/automation/workspaces/{assistant.tenant.workspace.pk}/memory"
        self.headers = {
            "HTTP_AUTHORIZATION": (
                f"Delivery {cache.get(delivery_credential_cache_key(admission.pk))}"
            ),
            "HTTP_IDEMPOTENCY_KEY": f"memory:{admission.pk}",
            "HTTP_X_KEY_SESSION": str(assistant.key_session.pk),
        }

    def put(self, url, body, format="json", **overrides):
        return APIClient().put(url, body, format=format, **{**self.headers, **overrides})

    def get(self, url, query, **overrides):
        return APIClient().get(url, query, **{**self.headers, **overrides})


@pytest.fixture
def runtime(assistant, django_capture_on_commit_callbacks, turns_held) -> Runtime:
    with django_capture_on_commit_callbacks(execute=True):
        admission = assistant.send()
    return Runtime(assistant, admission)


def test_capture_returns_the_committed_receipt(runtime, assistant):
    response = runtime.put(runtime.url, CHANGE, format="json")

    assert response.status_code == 200
    body = response.json()
    assert (body["admissionId"], body["version"], body["replayed"]) == (
        str(runtime.admission.pk),
        2,
        False,
    )
    assert CommitFence.objects.filter(admission=runtime.admission, ok=1).exists()
    assert "green tea" in memory_current_get(workspace=assistant.tenant.workspace).content


def test_transport_retry_replays_the_same_receipt(runtime):
    first = runtime.put(runtime.url, CHANGE, format="json").json()

    again = runtime.put(runtime.url, CHANGE, format="json").json()

    assert {**again, "replayed": False} == first
    assert again["replayed"] is True


WITHOUT_WRITE_AUTHORITY = {
    "admitted while off": lambda make_assistant: (make_assistant(mode="off"), None),
    "retired by switching off": lambda make_assistant: (
        make_assistant(),
        lambda assistant: memory_policy_set(
            workspace=assistant.tenant.workspace,
            mode="off",
            expected_revision=1,
            actor=assistant.tenant.member,
        ),
    ),
    "superseded by a newer turn": lambda make_assistant: (
        make_assistant(),
        lambda assistant: assistant.send("a newer message"),
    ),
}
# Without authority, each of these would otherwise tell whether "- likes tea" is in memory.
PROBES = {
    "remove an absent line": [{"op": "remove", "target": "- likes coffee"}],
    "remove a present line": [{"op": "remove", "target": "- likes tea"}],
    "add a line already there": [{"op": "add", "line": "- likes tea"}],
}


@pytest.mark.parametrize("case", sorted(WITHOUT_WRITE_AUTHORITY))
def test_a_turn_without_write_authority_learns_nothing_about_the_content(
    make_assistant, django_capture_on_commit_callbacks, turns_held, case
):
    assistant, retire = WITHOUT_WRITE_AUTHORITY[case](make_assistant)
    with django_capture_on_commit_callbacks(execute=True):
        admission = assistant.send()
    runtime = Runtime(assistant, admission)
    if retire is not None:
        retire(assistant)

    answers = {
        probe: runtime.put(runtime.url, {"expectedVersion": 1, "changes": changes})
        for probe, changes in PROBES.items()
    }

    bodies = {(r.status_code, r.content) for r in answers.values()}
    assert len(bodies) == 1, {probe: r.content for probe, r in answers.items()}
    response = answers["remove a present line"]
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "CAPTURE_RETIRED"
    assert memory_current_get(workspace=assistant.tenant.workspace).content == "- likes tea\n"
    assert not CommitFence.objects.exists()
    assert not Proposal.objects.exists()


def test_a_different_second_capture_is_403_capture_retired(runtime):
    runtime.put(runtime.url, CHANGE, format="json")

    response = runtime.put(
        runtime.url,
        {"expectedVersion": 2, "changes": [{"op": "add", "line": "- more"}]},
        format="json",
    )

    assert response.status_code == 403
    error = response.json()["error"]
    assert (error["code"], error["detail"]["predicate"]) == (
        "CAPTURE_RETIRED",
        "admission_unconsumed",
    )


def test_retired_capture_names_the_predicate(runtime, assistant):
    memory_policy_set(
        workspace=assistant.tenant.workspace,
        mode="read_only",
        expected_revision=1,
        actor=assistant.tenant.member,
    )

    response = runtime.put(runtime.url, CHANGE, format="json")

    assert response.status_code == 403
    assert response.json()["error"]["detail"]["predicate"] == "policy_still_auto"
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1


def person_saves_version_2(assistant) -> None:
    memory_save(
        workspace=assistant.tenant.workspace,
        author=assistant.tenant.member,
        base_version=1,
        content="- person wrote this\n",
    )


def test_conflict_is_409_with_the_proposal(runtime, assistant):
    person_saves_version_2(assistant)

    response = runtime.put(runtime.url, CHANGE, format="json")

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "VERSION_CONFLICT"
    assert error["detail"]["currentVersion"] == 2
    assert "proposalId" in error["detail"]
    assert memory_current_get(workspace=assistant.tenant.workspace).content == (
        "- person wrote this\n"
    )


def test_bad_edit_is_422_naming_the_edit(runtime):
    response = runtime.put(
        runtime.url,
        {"expectedVersion": 1, "changes": [{"op": "add", "line": "ok"}, {"op": "remove"}]},
        format="json",
    )

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "MEMORY_EDIT_INVALID"
    assert response.json()["error"]["detail"]["change"] == 1


def test_idempotency_key_must_name_this_turns_admission(runtime):
    response = runtime.put(
        runtime.url, CHANGE, format="json", HTTP_IDEMPOTENCY_KEY="memory:someone-else"
    )

    assert response.status_code == 400
    assert response.json()["error"]["detail"] == {"header": "Idempotency-Key"}
    assert Admission.objects.get(pk=runtime.admission.pk).status == "admitted"


def test_missing_key_session_is_refused(runtime):
    response = runtime.put(runtime.url, CHANGE, format="json", HTTP_X_KEY_SESSION="")

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "KEY_SESSION_UNAVAILABLE"


def test_credential_cannot_reach_another_workspace(runtime, make_tenant):
    other = make_tenant()

    response = runtime.put(
        f"/api/v1/automation/workspaces/{other.workspace.pk}/memory", CHANGE, format="json"
    )

    assert response.status_code == 404


def test_unknown_delivery_credential_is_401(runtime):
    response = runtime.put(runtime.url, CHANGE, HTTP_AUTHORIZATION="Delivery dlv_forged")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "TOKEN_INVALID"


def test_a_personal_access_token_cannot_use_the_automatic_writer(assistant):
    client = assistant.tenant.client_for(assistant.tenant.member)

    response = client.put(
        f"/api/v1/automation/workspaces/{assistant.tenant.workspace.pk}/memory",
        CHANGE,
        format="json",
    )

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "CREDENTIAL_KIND_REFUSED"
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1


EXPIRE = {
    "admission": lambda admission: Admission.objects.filter(pk=admission.pk).update(
        admitted_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    ),
    "credential slot": lambda admission: DeliveryCredential.objects.filter(
        conversation_id=admission.conversation_id
    ).update(expires_at=timezone.now() - timedelta(seconds=1)),
}


@pytest.mark.parametrize("expired", sorted(EXPIRE))
def test_recall_refuses_an_expired_turn_as_the_document_routes_do(
    runtime, assistant, idle_restarts, expired
):
    workspace = assistant.tenant.workspace
    memory_save(
        workspace=workspace, author=assistant.tenant.member, base_version=1, content="- new"
    )
    EXPIRE[expired](runtime.admission)
    receipt_before = Admission.objects.values_list("recall_count", "recalled_at").get(
        pk=runtime.admission.pk
    )

    recall = runtime.get(runtime.url, {"purpose": "recall"})
    document = runtime.get(
        f"/api/v1/automation/workspaces/{workspace.pk}/documents", {"path": "notes/a.md"}
    )

    assert (recall.status_code, document.status_code) == (401, 401)
    assert recall.json()["error"]["code"] == document.json()["error"]["code"] == "TOKEN_EXPIRED"
    assert "text" not in recall.json()
    assert (
        Admission.objects.values_list("recall_count", "recalled_at").get(pk=runtime.admission.pk)
        == receipt_before
    )
    assert idle_restarts == []


class _ModelDown:
    def complete(self, **_call: Any) -> Any:
        raise ProviderUnavailable()


TURN_ENDS: dict[str, type[ModelProvider]] = {"completed": ScriptedProvider, "failed": _ModelDown}


@pytest.mark.parametrize("ending", sorted(TURN_ENDS))
def test_a_turns_credential_authorizes_nothing_once_the_turn_has_ended(
    runtime, assistant, django_capture_on_commit_callbacks, idle_restarts, ending
):
    workspace = assistant.tenant.workspace
    assert runtime.get(runtime.url, {"purpose": "recall"}).json()["status"] == "provided"
    with django_capture_on_commit_callbacks(execute=True):
        turn_run(turn_id=runtime.admission.turn.pk, provider=TURN_ENDS[ending]())
    assert Turn.objects.get(pk=runtime.admission.turn.pk).state == ending
    receipt_before = Admission.objects.values_list("recall_count", "recalled_at").get(
        pk=runtime.admission.pk
    )
    idle_restarts.clear()

    recall = runtime.get(runtime.url, {"purpose": "recall"})
    document = runtime.get(
        f"/api/v1/automation/workspaces/{workspace.pk}/documents", {"path": "notes/a.md"}
    )
    capture = runtime.put(runtime.url, CHANGE, format="json")

    for refused in (recall, document):
        error = assert_error(refused, 401, "TOKEN_EXPIRED")
        assert error["detail"] == {"reason": "turn_ended"}
    assert assert_error(capture, 403, "CAPTURE_RETIRED")["detail"]["predicate"] == (
        "credential_unexpired"
    )
    assert (
        Admission.objects.values_list("recall_count", "recalled_at").get(pk=runtime.admission.pk)
        == receipt_before
    )
    assert memory_current_get(workspace=workspace).version == 1
    assert idle_restarts == []
    assert cache.get(delivery_credential_cache_key(runtime.admission.pk)) is None


def test_a_capture_retried_after_its_turn_ended_is_refused_not_replayed(
    runtime, assistant, django_capture_on_commit_callbacks
):
    # A transport retry happens while the turn waits for the capture's answer; once the
    # turn has ended its credential authorizes nothing, a replay included.
    committed = runtime.put(runtime.url, CHANGE, format="json")
    assert committed.status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        turn_run(turn_id=runtime.admission.turn.pk, provider=ScriptedProvider())

    retried = runtime.put(runtime.url, CHANGE, format="json")

    error = assert_error(retried, 403, "CAPTURE_RETIRED")
    assert error["detail"]["predicate"] == "credential_unexpired"
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 2
    assert CommitFence.objects.count() == 1


def test_a_turns_end_leaves_a_newer_turns_credential_alone(
    runtime, assistant, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        newer_admission = assistant.send("a newer message")
    newer = Runtime(assistant, newer_admission)

    with django_capture_on_commit_callbacks(execute=True):
        turn_run(turn_id=runtime.admission.turn.pk, provider=ScriptedProvider())

    assert newer.get(newer.url, {"purpose": "recall"}).json()["status"] == "provided"
    assert runtime.get(runtime.url, {"purpose": "recall"}).json()["status"] == "superseded"


def test_a_provided_recall_restarts_the_key_sessions_idle_timeout(
    runtime, assistant, idle_restarts
):
    response = runtime.get(runtime.url, {"purpose": "recall"})

    assert response.json() == {"status": "provided", "version": 1, "text": "- likes tea\n"}
    assert idle_restarts == [assistant.key_session.cache_key]


@pytest.mark.parametrize(
    ("query", "problem"),
    [({}, "This field is required."), ({"purpose": "capture"}, '"capture" is not a valid choice.')],
)
def test_a_recall_without_purpose_recall_is_validation_failed_and_records_nothing(
    runtime, idle_restarts, query, problem
):
    receipt = Admission.objects.values_list("recall_count", "recalled_at")
    receipt_before = receipt.get(pk=runtime.admission.pk)

    response = runtime.get(runtime.url, query)

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert error["detail"]["fields"] == {"purpose": [problem]}
    assert receipt.get(pk=runtime.admission.pk) == receipt_before
    assert idle_restarts == []


@pytest.mark.parametrize(
    "recall",
    [
        Recall(RecallStatus.PROVIDED, 3, "- likes tea\n"),
        Recall(RecallStatus.EMPTY, 2),
        Recall(RecallStatus.UNAVAILABLE, None),
    ],
    ids=lambda recall: recall.status,
)
def test_a_recalls_answer_is_what_its_documented_schema_renders(runtime, monkeypatch, recall):
    # The view renders the service's Recall itself; the serializer is the schema.
    monkeypatch.setattr(services, "memory_recall", lambda **_: recall)

    response = runtime.get(runtime.url, {"purpose": "recall"})

    assert response.status_code == 200
    assert response.content == JSONRenderer().render(
        AutomationMemoryApi.RecallSerializer(recall).data
    )


def test_a_recall_reads_its_credential_and_facts_in_one_statement_then_its_receipt(runtime):
    with CaptureQueriesContext(connection) as queries:
        response = runtime.get(runtime.url, {"purpose": "recall"})

    assert response.json()["status"] == "provided"
    statements = [" ".join(query["sql"].split()) for query in queries.captured_queries]
    assert len(statements) == 2, statements
    lookup, receipt = statements
    assert lookup.startswith("SELECT")
    assert "credential_digest" in lookup
    assert Admission._meta.db_table in lookup
    assert FileVersion._meta.db_table in lookup
    assert "UPDATE" in receipt


def test_a_credentials_lookup_leaves_what_no_request_reads_and_loads_it_on_access(runtime):
    # The recall and capture above read none of it (a recall makes its two statements);
    # anything that does still reads it from the database.
    runtime.get(runtime.url, {"purpose": "recall"})  # sets the receipt's timestamp
    raw = runtime.headers["HTTP_AUTHORIZATION"].partition(" ")[2]

    admission = admission_by_credential_digest(bearer_secret_digest(raw))

    assert admission is not None
    assert admission.get_deferred_fields() == {
        "admitted_at",
        "committed_at",
        "capture_refused_at",
        "recalled_at",
    }
    owner, workspace = admission.owner, admission.workspace
    assert "email" in owner.get_deferred_fields()
    assert workspace.get_deferred_fields() == {"created_at"}
    stored = Admission.objects.select_related("owner", "workspace").get(pk=admission.pk)
    assert stored.recalled_at is not None
    with CaptureQueriesContext(connection) as loads:
        assert admission.recalled_at == stored.recalled_at
        assert admission.admitted_at == stored.admitted_at
        assert (owner.email, owner.date_joined) == (stored.owner.email, stored.owner.date_joined)
        assert workspace.created_at == stored.workspace.created_at
    assert len(loads.captured_queries) == 5


def _loaded_values(instance: Any) -> dict[str, Any]:
    deferred = instance.get_deferred_fields()
    return {
        field.attname: getattr(instance, field.attname)
        for field in type(instance)._meta.concrete_fields
        if field.attname not in deferred
    }


def test_a_recalls_lookup_reads_the_same_in_either_format(runtime, monkeypatch):
    runtime.get(runtime.url, {"purpose": "recall"})
    digest = bearer_secret_digest(runtime.headers["HTTP_AUTHORIZATION"].partition(" ")[2])
    now = timezone.now()
    found = admission_with_recall_facts_by_credential_digest(digest, now=now)
    monkeypatch.setattr(sql, "results_binary", lambda cursor: None)  # the text format

    in_text = admission_with_recall_facts_by_credential_digest(digest, now=now)

    assert found is not None
    assert in_text is not None
    (admission, facts), (text_admission, text_facts) = found, in_text
    assert facts == text_facts
    assert facts.memory_ciphertext
    for loaded, text_loaded in (
        (admission, text_admission),
        (admission.owner, text_admission.owner),
        (admission.workspace, text_admission.workspace),
        (admission.workspace.team, text_admission.workspace.team),
        (admission.workspace.team.org, text_admission.workspace.team.org),
    ):
        assert _loaded_values(loaded) == _loaded_values(text_loaded)
    assert admission.expires_at.tzinfo == text_admission.expires_at.tzinfo


@postgres_only
def test_a_recalls_lookup_reads_its_row_in_the_binary_format(runtime, monkeypatch):
    # The ciphertext then travels as it is stored, not as hex for libpq to decode.
    connection.ensure_connection()
    driver = type(connection.create_cursor())
    formats = []
    execute = driver.execute

    def recorded(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        formats.append(self.format)
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(driver, "execute", recorded)

    assert runtime.get(runtime.url, {"purpose": "recall"}).json()["status"] == "provided"

    # The lookup, then the receipt (which reads nothing back).
    assert formats == [psycopg.pq.Format.BINARY, psycopg.pq.Format.TEXT]


# The secret corpus, one line per change: a change is one line, so the corpus' multi-line
# prose is taken line by line.
CREDENTIAL_LINES = [case for case in CREDENTIALS if "\n" not in case.line]
PROSE_LINES = sorted({line for text in PROSE for line in text.split("\n") if line.strip()})


def _add(line: str) -> dict:
    return {"expectedVersion": 1, "changes": [{"op": "add", "line": line}]}


@pytest.mark.parametrize("case", CREDENTIAL_LINES, ids=lambda case: case.rule)
def test_a_capture_adding_a_credential_is_422_and_writes_nothing(runtime, assistant, case):
    response = runtime.put(runtime.url, _add(case.line))

    error = assert_error(response, 422, "SECRET_DETECTED")
    # The added line is the document's second, after "- likes tea".
    assert error["detail"] == {"path": MEMORY_PATH, "rule": case.rule, "line": 2}
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1
    assert not CommitFence.objects.exists()
    assert not Proposal.objects.exists()
    admission = Admission.objects.get(pk=runtime.admission.pk)
    assert (
        admission.status,
        admission.capture_refusal_code,
        admission.capture_refusal_reason,
    ) == ("admitted", "SECRET_DETECTED", case.rule)


@pytest.mark.parametrize("line", PROSE_LINES)
def test_a_capture_adding_prose_is_remembered(runtime, assistant, line):
    response = runtime.put(runtime.url, _add(line))

    assert response.status_code == 200, response.content
    current = memory_current_get(workspace=assistant.tenant.workspace)
    assert (current.version, current.content) == (2, f"- likes tea\n{line}\n")


def test_the_refusal_never_carries_or_logs_the_value(runtime, caplog):
    caplog.set_level(logging.DEBUG)
    case = CREDENTIAL_LINES[0]

    response = runtime.put(runtime.url, _add(case.line))

    assert response.status_code == 422
    value = case.line.split("=", 1)[1]
    assert value not in response.content.decode()
    assert value not in caplog.text


def test_after_a_refused_credential_the_turn_can_still_capture(runtime, assistant):
    refused = runtime.put(runtime.url, _add(CREDENTIAL_LINES[0].line))

    response = runtime.put(runtime.url, CHANGE)

    assert refused.status_code == 422
    assert response.status_code == 200
    current = memory_current_get(workspace=assistant.tenant.workspace)
    assert (current.version, current.content) == (2, "- likes tea\n- likes green tea\n")
    assert CommitFence.objects.filter(admission=runtime.admission, ok=1).exists()


SAVED_CREDENTIAL = f"- deploy token: ghp_{fake(36)}"


@pytest.fixture
def runtime_with_saved_credential(
    make_assistant, django_capture_on_commit_callbacks, turns_held
) -> Runtime:
    """A turn on a memory in which a person saved a credential on line 2."""
    assistant = make_assistant(memory=f"# Notes\n{SAVED_CREDENTIAL}\n")
    with django_capture_on_commit_callbacks(execute=True):
        admission = assistant.send()
    return Runtime(assistant, admission)


def test_a_capture_keeping_a_saved_credential_is_refused_at_its_line(
    runtime_with_saved_credential,
):
    runtime = runtime_with_saved_credential

    response = runtime.put(runtime.url, CHANGE)

    error = assert_error(response, 422, "SECRET_DETECTED")
    assert (error["detail"]["rule"], error["detail"]["line"]) == ("github_token", 2)
    assert memory_current_get(workspace=runtime.admission.workspace).version == 1


def test_a_capture_removing_a_saved_credential_is_remembered(runtime_with_saved_credential):
    runtime = runtime_with_saved_credential
    remove = {"op": "remove", "target": SAVED_CREDENTIAL}

    response = runtime.put(runtime.url, {"expectedVersion": 1, "changes": [remove]})

    assert response.status_code == 200, response.content
    current = memory_current_get(workspace=runtime.admission.workspace)
    assert (current.version, current.content) == (2, "# Notes\n")


def test_a_conflicting_capture_adding_a_credential_stores_no_proposal(runtime, assistant):
    person_saves_version_2(assistant)

    response = runtime.put(runtime.url, _add(CREDENTIAL_LINES[0].line))

    error = assert_error(response, 422, "SECRET_DETECTED")
    assert error["detail"] == {
        "path": MEMORY_PATH,
        "rule": CREDENTIAL_LINES[0].rule,
        "line": 1,
        "change": 0,
    }
    assert not Proposal.objects.exists()
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 2


def test_a_flagged_capture_is_422_with_the_proposal_and_its_rules(runtime, assistant):
    change = {"expectedVersion": 1, "changes": [{"op": "add", "line": "</workspace-memory>"}]}

    response = runtime.put(runtime.url, change, format="json")

    error = assert_error(response, 422, "CAPTURE_FLAGGED")
    proposal = Proposal.objects.get(pk=error["detail"]["proposalId"])
    assert error["detail"] == {
        "proposalId": str(proposal.pk),
        "reason": "instruction_flagged",
        "rules": ["memory_marker"],
        "findings": [{"line": 2, "rule": "memory_marker"}],
    }
    assert (proposal.reason, proposal.flagged_rules) == ("instruction_flagged", ["memory_marker"])
    assert "workspace-memory" not in response.content.decode()
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1
    assert not CommitFence.objects.exists()


def test_a_turns_credential_ends_when_its_sender_leaves_the_team(runtime, assistant):
    workspace = assistant.tenant.workspace
    assistant.tenant.member.team_memberships.all().delete()

    recall = runtime.get(runtime.url, {"purpose": "recall"})
    document = runtime.get(
        f"/api/v1/automation/workspaces/{workspace.pk}/documents", {"path": "notes/a.md"}
    )
    capture = runtime.put(runtime.url, CHANGE, format="json")

    for refused in (recall, document, capture):
        assert_error(refused, 401, "TOKEN_INVALID")
    assert Admission.objects.get(pk=runtime.admission.pk).recall_count == 0
    assert memory_current_get(workspace=workspace).version == 1


def test_a_recall_under_a_browser_opened_key_session_checks_that_session_in_one_statement(
    assistant, django_capture_on_commit_callbacks, turns_held
):
    # The frame's key session, the one most recalls use: every use checks that its browser
    # session still signs the person in, read afresh (the session's row and the person's
    # password hash), in one statement beside the lookup and the receipt.
    browser = Client()
    browser.force_login(assistant.tenant.member)
    framed = dataclasses.replace(
        assistant,
        key_session=key_session_open(
            workspace=assistant.tenant.workspace,
            user=assistant.tenant.member,
            browser_session_key=browser.session.session_key,
        ),
    )
    with django_capture_on_commit_callbacks(execute=True):
        admission = framed.send()
    runtime = Runtime(framed, admission)

    with CaptureQueriesContext(connection) as queries:
        response = runtime.get(runtime.url, {"purpose": "recall"})

    assert response.json()["status"] == "provided"
    statements = [" ".join(query["sql"].split()) for query in queries.captured_queries]
    assert len(statements) == 3, statements
    lookup, browser_session, receipt = statements
    assert "credential_digest" in lookup
    assert Session._meta.db_table in browser_session
    assert User._meta.db_table in browser_session
    assert "UPDATE" in receipt
