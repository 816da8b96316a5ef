from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, cast

import pytest
from django.core.cache import cache
from django.utils.dateparse import parse_datetime

from workspaces.errors import KeySessionUnavailable
from workspaces.models import KeySession, KeySessionRevocation
from workspaces.services import key_session_open, key_session_resolve, workspace_key_ensure


def sessions_url(tenant) -> str:
    return f"/api/v1/workspaces/{tenant.workspace.pk}/key-sessions"


def revoke_url(session_id) -> str:
    return f"/api/v1/automation/key-sessions/{session_id}"


def test_member_opens_a_key_session_holding_the_key_only_in_the_cache(tenant):
    response = tenant.client_for(tenant.member).post(sessions_url(tenant))

    assert response.status_code == 201
    session = KeySession.objects.get(pk=response.json()["id"])
    assert (session.user, session.workspace) == (tenant.member, tenant.workspace)
    assert cache.get(session.cache_key)["key"] == workspace_key_ensure(workspace=tenant.workspace)
    assert key_session_resolve(
        session_id=session.pk, workspace=tenant.workspace, user=tenant.member
    ) == workspace_key_ensure(workspace=tenant.workspace)


def test_opened_key_session_answers_when_its_key_idles_out_unused(tenant, settings):
    settings.KEY_SESSION_IDLE_SECONDS = 600

    response = tenant.client_for(tenant.member).post(sessions_url(tenant))

    body = response.json()
    session = KeySession.objects.get(pk=body["id"])
    expires_at = session.created_at + timedelta(seconds=600)
    assert parse_datetime(body["expiresAt"]) == expires_at
    assert body["idleTimeoutSeconds"] == 600


def test_listing_shows_the_callers_sessions_and_whether_they_are_live(tenant):
    client = tenant.client_for(tenant.member)
    live = client.post(sessions_url(tenant)).json()["id"]
    evicted = client.post(sessions_url(tenant)).json()["id"]
    cache.delete(KeySession.objects.get(pk=evicted).cache_key)
    key_session_open(workspace=tenant.workspace, user=tenant.admin)

    listed = {row["id"]: row["live"] for row in client.get(sessions_url(tenant)).json()["results"]}

    assert listed == {live: True, evicted: False}


def test_revocation_writes_the_durable_row_then_discards_the_key(
    tenant, django_capture_on_commit_callbacks
):
    client = tenant.client_for(tenant.member)
    session_id = client.post(sessions_url(tenant)).json()["id"]
    session = KeySession.objects.get(pk=session_id)

    with django_capture_on_commit_callbacks(execute=True) as discards:
        response = client.delete(revoke_url(session_id))

    assert response.status_code == 204
    assert len(discards) == 1
    revocation = KeySessionRevocation.objects.get(key_session_id=session_id)
    assert revocation.revoked_by == tenant.member
    session.refresh_from_db()
    assert session.revoked_at is not None
    assert cache.get(session.cache_key) is None


def test_revoked_session_cannot_reach_the_key_even_if_the_cache_still_held_it(tenant):
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)
    # The discard runs on commit, which the test transaction never reaches: the key
    # stays cached, as if the process had died between commit and discard.
    tenant.client_for(tenant.member).delete(revoke_url(session.pk))
    assert cache.get(session.cache_key) is not None

    with pytest.raises(KeySessionUnavailable) as refused:
        key_session_resolve(session_id=session.pk, workspace=tenant.workspace, user=tenant.member)

    assert refused.value.detail == {"reason": "revoked"}


def test_idle_eviction_is_not_a_revocation(tenant):
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)

    cache.delete(session.cache_key)

    with pytest.raises(KeySessionUnavailable) as refused:
        key_session_resolve(session_id=session.pk, workspace=tenant.workspace, user=tenant.member)
    assert refused.value.detail == {"reason": "expired"}
    assert not KeySessionRevocation.objects.filter(key_session=session).exists()
    session.refresh_from_db()
    assert session.revoked_at is None


def test_session_of_another_member_or_workspace_does_not_resolve(make_tenant):
    tenant, other = make_tenant(), make_tenant()
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)

    for workspace, user in [
        (tenant.workspace, tenant.admin),
        (other.workspace, tenant.member),
    ]:
        with pytest.raises(KeySessionUnavailable) as refused:
            key_session_resolve(session_id=session.pk, workspace=workspace, user=user)
        assert refused.value.detail == {"reason": "unknown"}
    with pytest.raises(KeySessionUnavailable):
        key_session_resolve(session_id=uuid.uuid4(), workspace=tenant.workspace, user=tenant.member)


def test_only_the_owner_can_revoke_and_others_get_404(tenant):
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)

    response = tenant.client_for(tenant.admin).delete(revoke_url(session.pk))

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"
    assert not KeySessionRevocation.objects.filter(key_session=session).exists()
    assert cache.get(session.cache_key) is not None


def test_revoking_twice_keeps_the_first_revocation(tenant):
    client = tenant.client_for(tenant.member)
    session_id = client.post(sessions_url(tenant)).json()["id"]
    client.delete(revoke_url(session_id))
    first = KeySession.objects.get(pk=session_id).revoked_at

    again = client.delete(revoke_url(session_id))

    assert again.status_code == 204
    assert KeySession.objects.get(pk=session_id).revoked_at == first
    assert KeySessionRevocation.objects.filter(key_session_id=session_id).count() == 1


def test_opening_a_key_session_on_another_teams_workspace_is_404(make_tenant):
    home, other = make_tenant(), make_tenant()

    response = home.client_for(home.member).post(sessions_url(other))

    assert response.status_code == 404
    assert not KeySession.objects.exists()


def test_use_restarts_the_idle_timeout(tenant, settings, monkeypatch):
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)
    touched: list[tuple[str, int]] = []
    read_and_touch = cast(Any, cache).get_and_touch

    def spy(key: str, timeout: int) -> object:
        touched.append((key, timeout))
        return read_and_touch(key, timeout)

    monkeypatch.setattr(cache, "get_and_touch", spy)

    data_key = key_session_resolve(
        session_id=session.pk, workspace=tenant.workspace, user=tenant.member
    )

    assert data_key == workspace_key_ensure(workspace=tenant.workspace)
    assert touched == [(session.cache_key, settings.KEY_SESSION_IDLE_SECONDS)]
