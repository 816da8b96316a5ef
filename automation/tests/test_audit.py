"""Security-relevant actions leave an audit event: actor, action, target ids, no content."""

from __future__ import annotations

import json

from memory.services import memory_clear, memory_policy_set
from workspaces.models import AuditEvent
from workspaces.services import key_session_revoke, org_quota_set


def events(tenant) -> list[tuple[str, str]]:
    return list(
        AuditEvent.objects.filter(org_id=tenant.org.pk)
        .order_by("pk")
        .values_list("action", "actor_username")
    )


def test_each_security_relevant_action_is_audited_without_content(assistant):
    tenant = assistant.tenant
    admin_client = tenant.client_for(tenant.admin)

    admin_client.put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/ai",
        {"enabled": True, "expectedRevision": 0},
        format="json",
    )
    memory_policy_set(
        workspace=tenant.workspace, mode="read_only", expected_revision=1, actor=tenant.member
    )
    memory_clear(workspace=tenant.workspace, author=tenant.member, base_version=1)
    key_session_revoke(session=assistant.key_session, revoked_by=tenant.member)
    key_session_revoke(session=assistant.key_session, revoked_by=tenant.member)
    org_quota_set(org=tenant.org, memory_quota_bytes=1_000_000, actor=tenant.admin)

    assert events(tenant) == [
        ("workspace_created", tenant.admin.username),  # the fixture's workspace
        ("policy_changed", tenant.member.username),  # the fixture's switch to Auto
        ("token_created", tenant.admin.username),  # the admin client's token
        ("ai_consent_changed", tenant.admin.username),
        ("policy_changed", tenant.member.username),
        ("memory_cleared", tenant.member.username),
        ("key_session_revoked", tenant.member.username),
        ("org_quota_changed", tenant.admin.username),
    ]
    revoked = AuditEvent.objects.get(action="key_session_revoked")
    assert (revoked.target_type, revoked.target_id) == (
        "key_session",
        str(assistant.key_session.pk),
    )
    assert (revoked.workspace_id, revoked.org_id) == (tenant.workspace.pk, tenant.org.pk)
    everything = json.dumps(list(AuditEvent.objects.values("detail")))
    assert "likes tea" not in everything
