"""PUT /api/v1/automation/workspaces/{id}/memory: the automatic writer over HTTP."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from automation.models import Admission, CommitFence
from automation.tokens import delivery_credential_cache_key
from memory.selectors import memory_current_get
from memory.services import memory_policy_set, memory_save

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


@pytest.fixture
def runtime(assistant, django_capture_on_commit_callbacks) -> Runtime:
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


def test_conflict_is_409_with_the_proposal(runtime, assistant):
    memory_save(
        workspace=assistant.tenant.workspace,
        author=assistant.tenant.member,
        base_version=1,
        content="- person wrote this\n",
    )

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
