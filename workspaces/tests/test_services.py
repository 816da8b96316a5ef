"""Rules the workspace services hold on their own, whichever caller reaches them."""

from __future__ import annotations

import pytest

from workspaces.errors import WorkspaceAdminRequired
from workspaces.models import AuditEvent
from workspaces.services import workspace_ai_consent_set


def test_a_plain_member_cannot_change_consent_through_the_service(tenant):
    with pytest.raises(WorkspaceAdminRequired) as refused:
        workspace_ai_consent_set(
            workspace=tenant.workspace, enabled=False, expected_revision=0, actor=tenant.member
        )

    assert refused.value.code == "WORKSPACE_ADMIN_REQUIRED"
    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.ai_enabled, tenant.workspace.ai_consent_revision) == (True, 0)
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.AI_CONSENT_CHANGED).exists()


def test_an_admin_of_another_workspace_cannot_change_consent(tenant, make_tenant):
    other = make_tenant()

    with pytest.raises(WorkspaceAdminRequired):
        workspace_ai_consent_set(
            workspace=tenant.workspace, enabled=False, expected_revision=0, actor=other.admin
        )

    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0
