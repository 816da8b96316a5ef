"""Quotas resolved at write time, the audited per-team override, and the store setting."""

from __future__ import annotations

import pytest

from memory.models import TenantSpaceUsage
from memory.spaces.database import DatabaseStore
from memory.spaces.filesystem import FilesystemStore
from memory.spaces.handle import Visibility
from memory.spaces.quotas import quotas_for, space_tenant_quota_override_set, store_get
from memory.spaces.store import Quotas
from memory.tests.spaces.conftest import handle_of
from workspaces.models import AuditEvent

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


@pytest.mark.parametrize(
    ("visibility", "space_bytes"),
    [
        (Visibility.PRIVATE, 64 * MIB),
        (Visibility.BOT, 256 * MIB),
        (Visibility.PROJECT, 256 * MIB),
        (Visibility.CROSS_PROJECT, 512 * MIB),
        (Visibility.USER, 128 * MIB),
        (Visibility.ORG, 1024 * MIB),
    ],
)
def test_the_default_quotas_by_visibility(team, visibility, space_bytes):
    assert quotas_for(handle_of(team, visibility)) == Quotas(space_bytes, 1024 * MIB)


def test_the_global_space_has_its_quota_and_no_tenant_quota():
    assert quotas_for(handle_of(None, Visibility.GLOBAL)) == Quotas(1024 * MIB, 0)


def test_a_changed_setting_applies_to_an_existing_space_at_its_next_write(team, settings):
    handle = handle_of(team)
    quotas_for(handle)

    settings.MEMORY_QUOTA_SPACE_BYTES = {**settings.MEMORY_QUOTA_SPACE_BYTES, "project": 10}
    settings.MEMORY_QUOTA_TENANT_BYTES = 0

    assert quotas_for(handle) == Quotas(space_bytes=10, tenant_bytes=0)


def test_a_team_override_replaces_the_tenant_quota_and_is_audited(team, make_team, admin_user):
    other = make_team()

    space_tenant_quota_override_set(team=team, quota_bytes=5000, actor=admin_user)
    space_tenant_quota_override_set(team=team, quota_bytes=0, actor=admin_user)

    assert quotas_for(handle_of(team)).tenant_bytes == 0
    assert quotas_for(handle_of(other)).tenant_bytes == 1024 * MIB
    events = AuditEvent.objects.filter(action="space_quota_overridden").order_by("pk")
    assert [event.detail for event in events] == [
        {"from": None, "to": 5000},
        {"from": 5000, "to": 0},
    ]
    assert {(event.org_id, event.target_id, event.actor_id) for event in events} == {
        (team.org_id, str(team.pk), admin_user.pk)
    }

    space_tenant_quota_override_set(team=team, quota_bytes=None, actor=admin_user)

    assert quotas_for(handle_of(team)).tenant_bytes == 1024 * MIB
    assert TenantSpaceUsage.objects.get(team=team).used_bytes == 0


@pytest.mark.parametrize(
    ("name", "kind"), [("database", DatabaseStore), ("filesystem", FilesystemStore)]
)
def test_the_store_setting_picks_the_adapter(settings, name, kind):
    settings.MEMORY_STORE = name

    assert isinstance(store_get(), kind)
