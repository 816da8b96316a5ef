"""Every state change of tenancy, membership, tokens and workspace AI consent."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from workspaces.errors import ConsentRevisionConflict
from workspaces.models import (
    ApiToken,
    Org,
    Team,
    TeamMembership,
    User,
    Workspace,
    WorkspaceMembership,
)
from workspaces.tokens import pat_generate


def workspace_create(*, team: Team, name: str, admin: User, ai_enabled: bool = False) -> Workspace:
    """Create a workspace in a team, with `admin` as its first admin."""
    with transaction.atomic():
        workspace = Workspace.objects.create(team=team, name=name, ai_enabled=ai_enabled)
        team_membership_ensure(team=team, user=admin)
        WorkspaceMembership.objects.create(
            workspace=workspace, user=admin, role=WorkspaceMembership.Role.ADMIN
        )
    return workspace


def team_membership_ensure(
    *, team: Team, user: User, role: str = TeamMembership.Role.MEMBER
) -> TeamMembership:
    membership, _ = TeamMembership.objects.get_or_create(
        team=team, user=user, defaults={"role": role}
    )
    return membership


def workspace_membership_ensure(
    *, workspace: Workspace, user: User, role: str = WorkspaceMembership.Role.MEMBER
) -> WorkspaceMembership:
    """Make `user` a member of `workspace` (and so of its team)."""
    with transaction.atomic():
        team_membership_ensure(team=workspace.team, user=user)
        membership, _ = WorkspaceMembership.objects.get_or_create(
            workspace=workspace, user=user, defaults={"role": role}
        )
    return membership


def api_token_create(
    *, user: User, team: Team, name: str, ttl_days: int | None = None
) -> tuple[ApiToken, str]:
    """Mint a personal access token. Returns the row and the token, which is never stored."""
    raw, digest = pat_generate()
    now = timezone.now()
    days = ttl_days if ttl_days is not None else settings.API_TOKEN_DEFAULT_TTL_DAYS
    token = ApiToken.objects.create(
        user=user,
        team=team,
        name=name,
        token_hash=digest,
        created_at=now,
        expires_at=now + timedelta(days=days),
    )
    return token, raw


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke a token; revoking a revoked token keeps its first revocation time."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db(fields=["revoked_at"])
    return token


def workspace_ai_consent_set(
    *, workspace: Workspace, enabled: bool, expected_revision: int
) -> Workspace:
    """Set workspace AI consent by compare-and-set on the consent revision.

    Every accepted change bumps the revision, even one that re-states the current
    value: an admission frozen under the old revision is retired either way.
    """
    updated = Workspace.objects.filter(
        pk=workspace.pk, ai_consent_revision=expected_revision
    ).update(ai_enabled=enabled, ai_consent_revision=F("ai_consent_revision") + 1)
    workspace.refresh_from_db(fields=["ai_enabled", "ai_consent_revision"])
    if updated != 1:
        raise ConsentRevisionConflict(currentRevision=workspace.ai_consent_revision)
    return workspace


@dataclass(frozen=True)
class DemoCredentials:
    username: str
    password: str
    token: str
    org_id: int
    team_id: int
    workspace_id: int


def demo_tenant_seed(*, name: str = "demo") -> DemoCredentials:
    """Create (or find) a demo org, team, AI-enabled workspace and admin user.

    Idempotent: a second run creates no new org, team, workspace or user. It sets a
    fresh password and mints a fresh token, because neither can be read back from
    what is stored, and the credentials it prints must work.
    """
    password = secrets.token_urlsafe(12)
    with transaction.atomic():
        org, _ = Org.objects.get_or_create(name=f"{name} org")
        team, _ = Team.objects.get_or_create(org=org, name=f"{name} team")
        user, _ = User.objects.get_or_create(username=name)
        user.set_password(password)
        user.save(update_fields=["password"])
        team_membership_ensure(team=team, user=user, role=TeamMembership.Role.OWNER)
        workspace, _ = Workspace.objects.get_or_create(
            team=team, name=f"{name} workspace", defaults={"ai_enabled": True}
        )
        workspace_membership_ensure(
            workspace=workspace, user=user, role=WorkspaceMembership.Role.ADMIN
        )
        _, token = api_token_create(user=user, team=team, name=f"{name} (seed_demo)")
    return DemoCredentials(
        username=user.username,
        password=password,
        token=token,
        org_id=org.pk,
        team_id=team.pk,
        workspace_id=workspace.pk,
    )
