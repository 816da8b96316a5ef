from __future__ import annotations

from memory.models import MemoryPolicy
from workspaces.models import KeySession


def url(tenant) -> str:
    return f"/api/v1/workspaces/{tenant.workspace.pk}/memory/policy"


def test_missing_policy_reads_as_read_only(tenant):
    response = tenant.client_for(tenant.member).get(url(tenant))

    assert response.json() == {"mode": "read_only", "policyRevision": 0, "clearGeneration": 0}


def test_any_member_changes_the_mode_by_compare_and_set(tenant):
    client = tenant.client_for(tenant.member)

    response = client.put(url(tenant), {"mode": "auto", "expectedRevision": 0}, format="json")

    assert response.json() == {"mode": "auto", "policyRevision": 1, "clearGeneration": 0}
    policy = MemoryPolicy.objects.get(workspace=tenant.workspace)
    assert (policy.mode, policy.policy_revision, policy.updated_by) == ("auto", 1, tenant.member)


def test_stale_revision_is_409_and_changes_nothing(tenant):
    client = tenant.client_for(tenant.member)
    client.put(url(tenant), {"mode": "auto", "expectedRevision": 0}, format="json")

    response = client.put(url(tenant), {"mode": "off", "expectedRevision": 0}, format="json")

    assert response.status_code == 409
    error = response.json()["error"]
    assert (error["code"], error["detail"]) == ("POLICY_REVISION_CONFLICT", {"currentRevision": 1})
    policy = MemoryPolicy.objects.get(workspace=tenant.workspace)
    assert (policy.mode, policy.policy_revision) == ("auto", 1)


def test_changing_the_mode_never_enables_ai_or_opens_a_key_session(make_tenant):
    tenant = make_tenant(ai_enabled=False)

    response = tenant.client_for(tenant.member).put(
        url(tenant), {"mode": "auto", "expectedRevision": 0}, format="json"
    )

    assert response.status_code == 200, response.content
    assert response.json() == {"mode": "auto", "policyRevision": 1, "clearGeneration": 0}
    policy = MemoryPolicy.objects.get(workspace=tenant.workspace)
    assert (policy.mode, policy.policy_revision) == ("auto", 1)
    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (False, 0)
    assert not KeySession.objects.exists()


def test_unknown_mode_is_400(tenant):
    response = tenant.client_for(tenant.member).put(
        url(tenant), {"mode": "always", "expectedRevision": 0}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_FAILED"
    assert not MemoryPolicy.objects.exists()
