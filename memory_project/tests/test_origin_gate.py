from __future__ import annotations

import pytest

WRITE = {"enabled": False, "expectedRevision": 0}


def url(tenant) -> str:
    return f"/api/v1/workspaces/{tenant.workspace.pk}/ai"


def test_untrusted_origin_is_refused_before_authentication(tenant, client):
    # No credential at all: a 401 here would mean authentication ran first.
    response = client.put(
        url(tenant), WRITE, content_type="application/json", HTTP_ORIGIN="https://evil.example"
    )

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "CROSS_ORIGIN_REJECTED"


def test_untrusted_origin_with_valid_token_changes_nothing(tenant):
    client = tenant.client_for(tenant.admin)

    response = client.put(url(tenant), WRITE, format="json", HTTP_ORIGIN="https://evil.example")

    assert response.json()["error"]["code"] == "CROSS_ORIGIN_REJECTED"
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0


@pytest.mark.parametrize("origin", ["null", "http://127.0.0.1:8001", "https://127.0.0.1:8000"])
def test_near_miss_origins_are_refused(tenant, origin):
    response = tenant.client_for(tenant.admin).put(
        url(tenant), WRITE, format="json", HTTP_ORIGIN=origin
    )

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "CROSS_ORIGIN_REJECTED"


def test_trusted_origin_passes(tenant):
    response = tenant.client_for(tenant.admin).put(
        url(tenant), WRITE, format="json", HTTP_ORIGIN="http://127.0.0.1:8000"
    )

    assert response.status_code == 200
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 1


def test_same_origin_as_the_request_host_passes(tenant, settings):
    settings.ALLOWED_HOSTS = ["memory.example.org"]

    response = tenant.client_for(tenant.admin).put(
        url(tenant),
        WRITE,
        format="json",
        HTTP_HOST="memory.example.org",
        HTTP_ORIGIN="http://memory.example.org",
    )

    assert response.status_code == 200


def test_absent_origin_passes(tenant):
    response = tenant.client_for(tenant.admin).put(url(tenant), WRITE, format="json")

    assert response.status_code == 200


def test_reads_are_not_gated(tenant):
    response = tenant.client_for(tenant.admin).get(url(tenant), HTTP_ORIGIN="https://evil.example")

    assert response.status_code == 200


def test_gate_switched_off_lets_any_origin_through(tenant, settings):
    settings.REQUIRE_ORIGIN = False

    response = tenant.client_for(tenant.admin).put(
        url(tenant), WRITE, format="json", HTTP_ORIGIN="https://evil.example"
    )

    assert response.status_code == 200
