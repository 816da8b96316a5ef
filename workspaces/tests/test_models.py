"""Every named constraint refuses a bad row written past Python validation."""

from __future__ import annotations

from datetime import timedelta

from django.apps import apps
from django.db import models
from django.utils import timezone

from conftest import violates
from workspaces.models import (
    ApiToken,
    AuditEvent,
    Bot,
    File,
    FileVersion,
    Org,
    Team,
    TeamMembership,
    TeamStorageUsage,
    Workspace,
    WorkspaceKey,
    WorkspaceMembership,
)
from workspaces.services import api_token_create, bot_token_issue

PROJECT_APPS = ("workspaces", "memory", "automation")


def test_org_status_must_be_a_known_choice(tenant):
    violates(
        "workspaces_org_status_valid",
        lambda: Org.objects.filter(pk=tenant.org.pk).update(status="gone"),
    )


def test_pending_org_needs_a_deletion_deadline(tenant):
    violates(
        "workspaces_org_deletion_due_iff_pending",
        lambda: Org.objects.filter(pk=tenant.org.pk).update(status="pending_deletion"),
    )


def test_active_org_has_no_deletion_deadline(tenant):
    violates(
        "workspaces_org_deletion_due_iff_pending",
        lambda: Org.objects.filter(pk=tenant.org.pk).update(deletion_due_at=timezone.now()),
    )


def test_org_quota_is_not_negative(tenant):
    violates(
        "workspaces_org_memory_quota_non_negative",
        lambda: Org.objects.filter(pk=tenant.org.pk).update(memory_quota_bytes=-1),
    )


def test_team_role_must_be_a_known_choice(tenant):
    violates(
        "workspaces_teammembership_role_valid",
        lambda: TeamMembership.objects.filter(team=tenant.team).update(role="king"),
    )


def test_workspace_role_must_be_a_known_choice(tenant):
    violates(
        "workspaces_workspacemembership_role_valid",
        lambda: WorkspaceMembership.objects.filter(workspace=tenant.workspace).update(role="root"),
    )


def test_consent_revision_is_not_negative(tenant):
    violates(
        "workspaces_workspace_consent_revision_non_negative",
        lambda: Workspace.objects.filter(pk=tenant.workspace.pk).update(ai_consent_revision=-1),
    )


def test_token_expires_after_it_was_created(tenant):
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="t")
    violates(
        "workspaces_apitoken_expires_after_created",
        lambda: ApiToken.objects.filter(pk=token.pk).update(
            expires_at=token.created_at - timedelta(seconds=1)
        ),
    )


def test_token_hash_is_a_sha256_hex_digest(tenant):
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="t")
    violates(
        "workspaces_apitoken_hash_is_sha256",
        lambda: ApiToken.objects.filter(pk=token.pk).update(token_hash="short"),
    )


def test_a_token_names_a_bot_exactly_when_its_scope_is_bot(tenant):
    token, _ = bot_token_issue(bot=tenant.bot_create("helper"), actor=tenant.admin, name="b")
    own, _ = api_token_create(user=tenant.admin, team=tenant.team, name="mine")

    for write in (
        lambda: ApiToken.objects.filter(pk=token.pk).update(bot=None),
        lambda: ApiToken.objects.filter(pk=own.pk).update(bot=token.bot),
        lambda: ApiToken.objects.filter(pk=own.pk).update(scope="bot"),
    ):
        violates("workspaces_apitoken_bot_iff_bot_scope", write)


def test_a_bots_runtime_and_auto_memory_are_known_choices_and_its_id_unique_in_its_team(tenant):
    bot = tenant.bot_create("helper")

    violates(
        "workspaces_bot_runtime_valid",
        lambda: Bot.objects.filter(pk=bot.pk).update(runtime="gpt"),
    )
    violates(
        "workspaces_bot_auto_memory_valid",
        lambda: Bot.objects.filter(pk=bot.pk).update(auto_memory="yes"),
    )
    violates(
        "workspaces_team_auto_memory_default_valid",
        lambda: Team.objects.filter(pk=tenant.team.pk).update(auto_memory_default="yes"),
    )
    violates(
        "workspaces_bot_slug_unique_in_team",
        lambda: Bot.objects.create(team=tenant.team, slug="helper", name="x", runtime="claw"),
    )


def test_token_scope_must_be_a_known_choice(tenant):
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="t")
    violates(
        "workspaces_apitoken_scope_valid",
        lambda: ApiToken.objects.filter(pk=token.pk).update(scope="admin"),
    )


def test_team_storage_usage_is_not_negative(tenant):
    violates(
        "workspaces_teamstorageusage_used_non_negative",
        lambda: TeamStorageUsage.objects.create(team=tenant.team, used_bytes=-1),
    )


def test_workspace_names_are_unique_in_a_team(tenant):
    violates(
        "workspaces_workspace_name_unique_in_team",
        lambda: Workspace.objects.create(team=tenant.team, name=tenant.workspace.name),
    )


def test_file_version_numbers_start_at_one(memory_revision):
    violates(
        "workspaces_fileversion_version_positive",
        lambda: FileVersion.objects.filter(pk=memory_revision.pk).update(version=0),
    )


def test_file_current_version_starts_at_one(memory_revision):
    violates(
        "workspaces_file_current_version_positive",
        lambda: File.objects.filter(pk=memory_revision.file_id).update(current_version=0),
    )


def test_file_version_size_is_not_negative(memory_revision):
    violates(
        "workspaces_fileversion_size_non_negative",
        lambda: FileVersion.objects.filter(pk=memory_revision.pk).update(size_bytes=-1),
    )


def test_file_version_digest_is_sha256(memory_revision):
    violates(
        "workspaces_fileversion_digest_is_sha256",
        lambda: FileVersion.objects.filter(pk=memory_revision.pk).update(ciphertext_sha256="x"),
    )


def test_file_version_author_kind_is_a_known_choice(memory_revision):
    violates(
        "workspaces_fileversion_author_kind_valid",
        lambda: FileVersion.objects.filter(pk=memory_revision.pk).update(author_kind="robot"),
    )


def test_file_version_change_kind_is_a_known_choice(memory_revision):
    violates(
        "workspaces_fileversion_change_kind_valid",
        lambda: FileVersion.objects.filter(pk=memory_revision.pk).update(change_kind="merge"),
    )


def test_file_versions_are_unique_per_file(memory_revision):
    violates(
        "workspaces_fileversion_unique",
        lambda: FileVersion.objects.create(
            file_id=memory_revision.file_id,
            version=memory_revision.version,
            ciphertext=b"x",
            ciphertext_sha256="0" * 64,
            size_bytes=0,
            author_kind="human",
            change_kind="save",
        ),
    )


def test_wrapping_key_id_is_a_fingerprint(memory_revision, tenant):
    violates(
        "workspaces_workspacekey_wrapping_key_id_valid",
        lambda: WorkspaceKey.objects.filter(workspace=tenant.workspace).update(wrapping_key_id=""),
    )


def test_purging_org_carries_its_claim_time(tenant):
    violates(
        "workspaces_org_purge_claim_iff_purging",
        lambda: Org.objects.filter(pk=tenant.org.pk).update(
            status="purging", deletion_due_at=timezone.now()
        ),
    )


def test_audit_action_is_a_known_choice(tenant):
    event = AuditEvent.objects.create(action="org_restored", org_id=tenant.org.pk)

    violates(
        "workspaces_auditevent_action_valid",
        lambda: AuditEvent.objects.filter(pk=event.pk).update(action="org_sold"),
    )


TESTED_HERE = {
    "workspaces_org_purge_claim_iff_purging",
    "workspaces_auditevent_action_valid",
    "workspaces_fileversion_version_positive",
    "workspaces_file_current_version_positive",
    "workspaces_fileversion_size_non_negative",
    "workspaces_fileversion_digest_is_sha256",
    "workspaces_fileversion_author_kind_valid",
    "workspaces_fileversion_change_kind_valid",
    "workspaces_workspacekey_wrapping_key_id_valid",
    "workspaces_org_status_valid",
    "workspaces_org_deletion_due_iff_pending",
    "workspaces_org_memory_quota_non_negative",
    "workspaces_teammembership_role_valid",
    "workspaces_workspacemembership_role_valid",
    "workspaces_workspace_consent_revision_non_negative",
    "workspaces_apitoken_expires_after_created",
    "workspaces_apitoken_hash_is_sha256",
    "workspaces_apitoken_scope_valid",
    "workspaces_apitoken_bot_iff_bot_scope",
    "workspaces_bot_runtime_valid",
    "workspaces_bot_auto_memory_valid",
    "workspaces_team_auto_memory_default_valid",
    "workspaces_teamstorageusage_used_non_negative",
}


def test_every_check_constraint_of_this_app_has_a_test_above():
    declared = {
        constraint.name
        for model in apps.get_app_config("workspaces").get_models()
        for constraint in model._meta.constraints
        if isinstance(constraint, models.CheckConstraint)
    }

    assert declared == TESTED_HERE


def test_every_choices_field_has_a_check_constraint():
    for label in PROJECT_APPS:
        for model in apps.get_app_config(label).get_models():
            checked = " ".join(
                str(c.condition)
                for c in model._meta.constraints
                if isinstance(c, models.CheckConstraint)
            )
            for field in model._meta.get_fields():
                if getattr(field, "choices", None) and field.concrete:
                    assert f"'{field.name}__in'" in checked, f"{model.__name__}.{field.name}"
