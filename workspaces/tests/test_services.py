"""Rules the workspace services hold on their own, whichever caller reaches them."""

from __future__ import annotations

import pytest

from workspaces.authentication import Credential
from workspaces.errors import CredentialKindRefused, WorkspaceAdminRequired
from workspaces.models import ApiToken, AuditEvent
from workspaces.services import api_token_create, jwt_issue, workspace_ai_consent_set
from workspaces.tokens import JwtClaims, jwt_decode


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


@pytest.mark.parametrize("kind", ["pat", "jwt"])
def test_a_token_cannot_mint_a_personal_access_token(tenant, kind):
    with pytest.raises(CredentialKindRefused) as refused:
        api_token_create(user=tenant.member, team=tenant.team, name="minted", minted_with=kind)

    assert refused.value.code == "CREDENTIAL_KIND_REFUSED"
    assert not ApiToken.objects.filter(user=tenant.member).exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.TOKEN_CREATED).exists()


def test_a_browser_session_mints_a_personal_access_token(tenant):
    token, raw = api_token_create(
        user=tenant.member, team=tenant.team, name="cli", minted_with="session"
    )

    assert ApiToken.objects.get(user=tenant.member) == token
    assert raw.startswith("iap_")


def test_a_jwt_cannot_renew_itself(tenant):
    credential = Credential(kind="jwt", user=tenant.member, team=tenant.team)

    with pytest.raises(CredentialKindRefused) as refused:
        jwt_issue(credential=credential)

    assert refused.value.code == "CREDENTIAL_KIND_REFUSED"


def test_a_jwt_minted_from_a_pat_names_it(tenant):
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    credential = Credential(kind="pat", user=tenant.member, team=tenant.team, token_id=token.pk)

    raw, _ = jwt_issue(credential=credential)

    assert jwt_decode(raw) == JwtClaims(
        user_id=tenant.member.pk, team_id=tenant.team.pk, token_id=token.pk
    )
