from __future__ import annotations

from rest_framework.test import APIClient


def url(tenant) -> str:
    return f"/api/v1/workspaces/{tenant.workspace.pk}/ai"


def test_member_reads_consent(tenant):
    response = tenant.client_for(tenant.member).get(url(tenant))

    assert response.status_code == 200
    assert response.json() == {"enabled": True, "consentRevision": 0}


def test_admin_change_bumps_the_revision(tenant):
    response = tenant.client_for(tenant.admin).put(
        url(tenant), {"enabled": False, "expectedRevision": 0}, format="json"
    )

    assert response.status_code == 200
    assert response.json() == {"enabled": False, "consentRevision": 1}
    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (False, 1)


def test_restating_the_same_value_still_bumps_the_revision(tenant):
    response = tenant.client_for(tenant.admin).put(
        url(tenant), {"enabled": True, "expectedRevision": 0}, format="json"
    )

    assert response.json() == {"enabled": True, "consentRevision": 1}
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 1


def test_stale_revision_is_409_and_changes_nothing(tenant):
    client = tenant.client_for(tenant.admin)
    client.put(url(tenant), {"enabled": False, "expectedRevision": 0}, format="json")

    stale = client.put(url(tenant), {"enabled": True, "expectedRevision": 0}, format="json")

    assert stale.status_code == 409
    body = stale.json()["error"]
    assert body["code"] == "CONSENT_REVISION_CONFLICT"
    assert body["detail"] == {"currentRevision": 1}
    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (False, 1)


def test_plain_member_cannot_change_consent(tenant):
    response = tenant.client_for(tenant.member).put(
        url(tenant), {"enabled": False, "expectedRevision": 0}, format="json"
    )

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "WORKSPACE_ADMIN_REQUIRED"
    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (True, 0)


def test_session_write_without_csrf_token_is_refused(tenant):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(tenant.admin)

    response = client.put(url(tenant), {"enabled": False, "expectedRevision": 0}, format="json")

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "PERMISSION_DENIED"
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0


def test_missing_fields_are_400_with_field_detail(tenant):
    response = tenant.client_for(tenant.admin).put(url(tenant), {"enabled": False}, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_FAILED"
    assert "expectedRevision" in error["detail"]["fields"]
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0
