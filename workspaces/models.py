"""Tenancy and identity: orgs, teams (the tenant), workspaces, memberships and API tokens."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact
from django.utils import timezone


class User(AbstractUser):
    is_super_admin = models.BooleanField(
        default=False,
        help_text="May write tenant-less (global) spaces. Unrelated to Django admin access.",
    )


class Org(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        PENDING_DELETION = "pending_deletion", "Pending deletion"

    name = models.CharField(max_length=200, unique=True)
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.ACTIVE)
    deletion_due_at = models.DateTimeField(null=True, blank=True)
    memory_quota_bytes = models.BigIntegerField(
        default=0, help_text="Ceiling on memory bytes across the org's teams; 0 means unlimited."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["active", "pending_deletion"]),
                name="workspaces_org_status_valid",
                violation_error_code="ORG_STATUS_INVALID",
            ),
            models.CheckConstraint(
                condition=(
                    Q(status="pending_deletion", deletion_due_at__isnull=False)
                    | (~Q(status="pending_deletion") & Q(deletion_due_at__isnull=True))
                ),
                name="workspaces_org_deletion_due_iff_pending",
                violation_error_code="ORG_STATUS_INVALID",
            ),
            models.CheckConstraint(
                condition=Q(memory_quota_bytes__gte=0),
                name="workspaces_org_memory_quota_non_negative",
                violation_error_code="QUOTA_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "name"],
                name="workspaces_team_name_unique_in_org",
                violation_error_code="NAME_TAKEN",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class TeamMembership(models.Model):
    """Belonging to a team: what lets a user hold credentials scoped to it."""

    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        MEMBER = "member", "Member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="team_memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "user"],
                name="workspaces_teammembership_unique",
                violation_error_code="ALREADY_MEMBER",
            ),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "member"]),
                name="workspaces_teammembership_role_valid",
                violation_error_code="ROLE_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Workspace(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="workspaces")
    name = models.CharField(max_length=200)
    ai_enabled = models.BooleanField(default=False)
    # Bumped by every accepted consent change, so work admitted under an older
    # consent can tell that consent moved even if it moved back.
    ai_consent_revision = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"],
                name="workspaces_workspace_name_unique_in_team",
                violation_error_code="NAME_TAKEN",
            ),
            models.CheckConstraint(
                condition=Q(ai_consent_revision__gte=0),
                name="workspaces_workspace_consent_revision_non_negative",
                violation_error_code="REVISION_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class WorkspaceMembership(models.Model):
    """Normal authenticated workspace access; admins may also change workspace AI consent."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        MEMBER = "member", "Member"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="workspace_memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "user"],
                name="workspaces_workspacemembership_unique",
                violation_error_code="ALREADY_MEMBER",
            ),
            models.CheckConstraint(
                condition=Q(role__in=["admin", "member"]),
                name="workspaces_workspacemembership_role_valid",
                violation_error_code="ROLE_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} ({self.role})"

    @property
    def is_admin(self) -> bool:
        return self.role == self.Role.ADMIN


class ApiToken(models.Model):
    """A personal access token (iap_...). Only its SHA-256 is stored; the token is shown once."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")),
                name="workspaces_apitoken_expires_after_created",
                violation_error_code="TOKEN_EXPIRY_INVALID",
            ),
            models.CheckConstraint(
                condition=Exact(Length("token_hash"), 64),
                name="workspaces_apitoken_hash_is_sha256",
                violation_error_code="TOKEN_HASH_INVALID",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None
