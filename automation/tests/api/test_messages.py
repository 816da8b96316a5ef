from __future__ import annotations

import pytest
from django.core.cache import cache

from automation.models import Admission, Conversation, DeliveryCredential, Turn
from automation.tokens import delivery_credential_cache_key
from memory.services import memory_policy_set
from workspaces.models import WorkspaceMembership
from workspaces.services import (
    key_session_open,
    key_session_revoke,
    workspace_ai_consent_set,
    workspace_create,
)
from workspaces.tokens import bearer_secret_digest


@pytest.fixture
def client(tenant):
    return tenant.client_for(tenant.member)


@pytest.fixture
def conversation_id(client, tenant) -> str:
    response = client.post(
        "/api/v1/agents/assistant/conversations",
        {"workspaceId": tenant.workspace.pk},
        format="json",
    )
    assert response.status_code == 201
    return response.json()["id"]


def send(client, conversation_id, text="hello", key="k1", **headers):
    return client.post(
        f"/api/v1/agents/assistant/{conversation_id}/messages",
        {"text": text},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
        **headers,
    )


def test_send_admits_the_turn_freezing_its_authority(
    client, tenant, conversation_id, django_capture_on_commit_callbacks, turns_held
):
    memory_policy_set(
        workspace=tenant.workspace, mode="auto", expected_revision=0, actor=tenant.member
    )
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)

    with django_capture_on_commit_callbacks(execute=True):
        response = send(
            client,
            conversation_id,
            HTTP_X_KEY_SESSION=str(session.pk),
            HTTP_X_MEMORY_STATE="version=3; saving=1",
        )

    assert response.status_code == 202
    body = response.json()
    admission = Admission.objects.get(pk=body["admissionId"])
    # The turn stays queued for its runtime, which the credential reaches through the cache.
    assert (body["turn"]["id"], body["turn"]["state"]) == (str(admission.turn.pk), "queued")
    assert Turn.objects.get(pk=admission.turn.pk).state == "queued"
    assert (admission.mode, admission.policy_revision, admission.clear_generation) == ("auto", 1, 0)
    assert (admission.ai_consent_revision, admission.key_session_id) == (0, session.pk)
    assert (admission.acknowledged_version, admission.save_in_flight) == (3, True)
    assert (admission.expires_at - admission.admitted_at).total_seconds() == 900
    slot = DeliveryCredential.objects.get(conversation_id=conversation_id)
    assert slot.credential_digest == admission.credential_digest
    raw = cache.get(delivery_credential_cache_key(admission.pk))
    assert bearer_secret_digest(raw) == admission.credential_digest
    assert raw not in response.content.decode()


def test_resend_with_the_same_key_reuses_the_admission_and_credential(client, conversation_id):
    first = send(client, conversation_id)
    slot_before = DeliveryCredential.objects.get(conversation_id=conversation_id).credential_digest

    again = send(client, conversation_id)

    assert again.json()["admissionId"] == first.json()["admissionId"]
    assert again.json()["replayed"] is True
    assert Admission.objects.count() == Turn.objects.count() == 1
    slot = DeliveryCredential.objects.get(conversation_id=conversation_id)
    assert slot.credential_digest == slot_before


def test_same_key_with_another_body_is_409(client, conversation_id):
    send(client, conversation_id, text="one")

    response = send(client, conversation_id, text="two")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert Admission.objects.count() == 1


def test_each_new_turn_overwrites_the_credential_slot(client, conversation_id):
    first = Admission.objects.get(pk=send(client, conversation_id, key="a").json()["admissionId"])

    second = Admission.objects.get(pk=send(client, conversation_id, key="b").json()["admissionId"])

    slot = DeliveryCredential.objects.get(conversation_id=conversation_id)
    assert slot.credential_digest == second.credential_digest != first.credential_digest


def test_send_without_idempotency_key_is_428(client, conversation_id):
    response = client.post(
        f"/api/v1/agents/assistant/{conversation_id}/messages", {"text": "hi"}, format="json"
    )

    assert response.status_code == 428
    assert response.json()["error"]["code"] == "IDEMPOTENCY_KEY_REQUIRED"
    assert not Admission.objects.exists()


@pytest.mark.parametrize("key", ["k1,k2", "k1, k2"])
def test_an_idempotency_key_sent_twice_is_refused(client, conversation_id, key):
    # A header sent twice reaches the app joined by a comma: which key was meant is a guess.
    response = send(client, conversation_id, key=key)

    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (400, "INVALID_HEADER")
    assert error["detail"]["header"] == "Idempotency-Key"
    assert not Admission.objects.exists()


def test_send_when_workspace_ai_is_off_is_refused(client, tenant, conversation_id):
    workspace_ai_consent_set(
        workspace=tenant.workspace, enabled=False, expected_revision=0, actor=tenant.admin
    )

    response = send(client, conversation_id)

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "WORKSPACE_AI_DISABLED"
    assert not Admission.objects.exists()


def test_naming_someone_elses_key_session_is_refused(client, tenant, conversation_id):
    theirs = key_session_open(workspace=tenant.workspace, user=tenant.admin)

    response = send(client, conversation_id, HTTP_X_KEY_SESSION=str(theirs.pk))

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "KEY_SESSION_UNAVAILABLE"
    assert not Admission.objects.exists()


def test_naming_your_revoked_key_session_is_refused_as_revoked(client, tenant, conversation_id):
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)
    key_session_revoke(session=session, revoked_by=tenant.member)

    response = send(client, conversation_id, HTTP_X_KEY_SESSION=str(session.pk))

    assert response.status_code == 403
    error = response.json()["error"]
    assert (error["code"], error["detail"]) == ("KEY_SESSION_UNAVAILABLE", {"reason": "revoked"})
    assert not Admission.objects.exists()


def test_no_key_session_admits_without_one(client, conversation_id):
    response = send(client, conversation_id)

    assert Admission.objects.get(pk=response.json()["admissionId"]).key_session_id is None


def test_mcp_style_turn_without_memory_state_records_none(client, conversation_id):
    response = send(client, conversation_id)

    admission = Admission.objects.get(pk=response.json()["admissionId"])
    assert (admission.acknowledged_version, admission.save_in_flight) == (None, None)


@pytest.mark.parametrize(
    "state",
    [
        "3",
        "version=abc",
        "version=3; saving=2",
        "version=3; draft=1",
        "saving=1",
        # Past a 64-bit column, and past int()'s digit limit: both were a 500.
        f"version={2**63}",
        f"version={'9' * 5000}",
        # A field named twice: which value was meant is a guess.
        "version=1; version=2",
        "version=3; saving=0; saving=1",
        "version=3; conflict=1; conflict=1",
    ],
)
def test_malformed_memory_state_is_400(client, conversation_id, state):
    response = send(client, conversation_id, HTTP_X_MEMORY_STATE=state)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_HEADER"
    assert response.json()["error"]["detail"] == {"header": "X-Memory-State"}
    assert not Admission.objects.exists()


def test_another_members_conversation_is_404(tenant, conversation_id):
    response = send(tenant.client_for(tenant.admin), conversation_id)

    assert response.status_code == 404
    assert not Admission.objects.exists()


def test_conversation_in_another_teams_workspace_cannot_be_created(make_tenant):
    home, other = make_tenant(), make_tenant()

    response = home.client_for(home.member).post(
        "/api/v1/agents/assistant/conversations",
        {"workspaceId": other.workspace.pk},
        format="json",
    )

    assert response.status_code == 404
    assert not Conversation.objects.exists()


def test_conversation_list_shows_only_the_callers(client, tenant, conversation_id):
    tenant.client_for(tenant.admin).post(
        "/api/v1/agents/assistant/conversations",
        {"workspaceId": tenant.workspace.pk},
        format="json",
    )

    listed = client.get("/api/v1/agents/assistant/conversations").json()["results"]

    assert [row["id"] for row in listed] == [conversation_id]


def test_conversation_list_filters_by_workspace(client, tenant, conversation_id):
    other = workspace_create(team=tenant.team, name="other", admin=tenant.member)
    elsewhere = client.post(
        "/api/v1/agents/assistant/conversations", {"workspaceId": other.pk}, format="json"
    ).json()["id"]
    url = "/api/v1/agents/assistant/conversations"

    def listed(workspace_id):
        response = client.get(url, {"workspaceId": workspace_id})
        assert response.status_code == 200
        return [row["id"] for row in response.json()["results"]]

    assert listed(tenant.workspace.pk) == [conversation_id]
    assert listed(other.pk) == [elsewhere]
    assert listed(other.pk + 1000) == []
    error = client.get(url, {"workspaceId": "abc"}).json()["error"]
    assert (error["code"], list(error["detail"]["fields"])) == (
        "VALIDATION_FAILED",
        ["workspaceId"],
    )


def test_a_member_who_left_the_workspace_no_longer_sees_its_conversations(
    client, tenant, conversation_id
):
    WorkspaceMembership.objects.filter(workspace=tenant.workspace, user=tenant.member).delete()

    listed = client.get("/api/v1/agents/assistant/conversations")

    assert listed.status_code == 200
    assert listed.json()["results"] == []
    assert Conversation.objects.filter(pk=conversation_id, owner=tenant.member).exists()
