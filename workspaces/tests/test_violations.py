"""A violation is read by its constraint's name, on PostgreSQL and on SQLite alike."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from workspaces.errors import DocumentExists, VersionConflict
from workspaces.models import ApiToken, File, FileVersion, Org, WorkspaceKey
from workspaces.services import api_token_create, workspace_key_ensure
from workspaces.tests.test_document_store import write
from workspaces.violations import violated_constraint, violation_code


def caught(bad_write: Callable[[], object]) -> IntegrityError:
    """The IntegrityError a write past Python validation raises, its savepoint rolled back."""
    with pytest.raises(IntegrityError) as raised, transaction.atomic():
        bad_write()
    return raised.value


def test_a_taken_path_is_read_as_document_exists(tenant):
    write(tenant, "a.md", "a")
    write(tenant, "b.md", "b")

    error = caught(
        lambda: File.objects.filter(workspace=tenant.workspace, path="b.md").update(path="a.md")
    )

    assert violated_constraint(error) == "workspaces_file_path_unique_in_workspace"
    assert violation_code(error) == DocumentExists.code


def test_a_taken_revision_number_is_read_as_version_conflict(tenant):
    write(tenant, "a.md", "first")
    write(tenant, "a.md", "second", base=1)

    error = caught(
        lambda: FileVersion.objects.filter(file__workspace=tenant.workspace, version=2).update(
            version=1
        )
    )

    assert violated_constraint(error) == "workspaces_fileversion_unique"
    assert violation_code(error) == VersionConflict.code


def test_a_taken_org_name_is_read_by_its_named_constraint(tenant):
    error = caught(lambda: Org.objects.create(name=tenant.org.name))

    assert violated_constraint(error) == "workspaces_org_name_unique"
    assert violation_code(error) == "NAME_TAKEN"


def test_a_taken_token_hash_is_read_by_its_named_constraint(tenant):
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="t")

    error = caught(
        lambda: ApiToken.objects.create(
            user=tenant.member,
            team=tenant.team,
            name="copy",
            token_hash=token.token_hash,
            expires_at=timezone.now() + timedelta(days=1),
        )
    )

    assert violated_constraint(error) == "workspaces_apitoken_hash_unique"
    assert violation_code(error) == "TOKEN_HASH_TAKEN"


def test_a_check_is_read_by_its_name(tenant):
    error = caught(lambda: Org.objects.filter(pk=tenant.org.pk).update(status="gone"))

    assert violated_constraint(error) == "workspaces_org_status_valid"
    assert violation_code(error) == "ORG_STATUS_INVALID"


def test_a_violation_of_no_named_constraint_has_no_code(tenant):
    workspace_key_ensure(workspace=tenant.workspace)

    # A second data key for the workspace: its primary key, which carries no domain code.
    error = caught(
        lambda: WorkspaceKey.objects.create(
            workspace=tenant.workspace, wrapped_key=b"k" * 32, wrapping_key_id="0" * 16
        )
    )

    assert violated_constraint(error) is None
    assert violation_code(error) is None
