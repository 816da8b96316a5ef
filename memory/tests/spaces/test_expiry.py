"""The nightly expiry of private spaces, through the service and its beat task: what the
lifetime setting removes, on both stores, and the audit trail it leaves."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery import current_app
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from automation.tasks import PRIVATE_EXPIRY_TASK, space_private_expire_sweep
from memory.models import MemorySpace
from memory.spaces.handle import Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, space_document_write, space_private_expire
from memory.tests.spaces.conftest import handle_of
from workspaces.models import AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["database", "filesystem"])
def store_setting(request, settings, tmp_path):
    settings.MEMORY_STORE = request.param
    settings.DATA_DIR = tmp_path
    settings.MEMORY_PRIVATE_TTL_DAYS = 7
    return request.param


def write(tenant, handle, body=b"note"):
    writer = SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk)
    space_document_write(
        handle=handle, path="a.md", body=body, expected_revision=None, writer=writer
    )


def test_a_private_space_lives_its_lifetime_after_its_last_write_and_no_longer(
    tenant, store_setting
):
    private = handle_of(tenant.team, Visibility.PRIVATE)
    project = handle_of(tenant.team, Visibility.PROJECT)
    write(tenant, private)
    write(tenant, project)
    now = timezone.now()

    within = space_private_expire(now=now + timedelta(days=6, hours=23))
    kept = store_get().read(private, "a.md")
    past = space_private_expire(now=now + timedelta(days=7, minutes=1))

    assert within == []
    assert kept is not None
    assert [each.handle for each in past] == [private]
    assert store_get().read(private, "a.md") is None
    assert store_get().read(project, "a.md") is not None
    assert space_private_expire(now=now + timedelta(days=100)) == []


def test_each_expired_space_is_audited_with_what_it_held_and_no_path(tenant, store_setting):
    handle = handle_of(tenant.team, Visibility.PRIVATE)
    write(tenant, handle, b"12345")

    space_private_expire(now=timezone.now() + timedelta(days=8))

    event = AuditEvent.objects.get(action=AuditEvent.Action.SPACE_PRIVATE_EXPIRED)
    assert (event.actor, event.org_id, event.target_type) == (
        None,
        tenant.team.org_id,
        "memory_space",
    )
    assert {key: event.detail[key] for key in ("space", "teamId", "userId", "documents")} == {
        "space": handle.id,
        "teamId": tenant.team.pk,
        "userId": handle.user_id,
        "documents": 1,
    }
    assert event.detail["freedBytes"] == 5
    assert "a.md" not in str(event.detail)


def test_the_lifetime_is_the_setting(tenant, store_setting, settings):
    settings.MEMORY_PRIVATE_TTL_DAYS = 1
    handle = handle_of(tenant.team, Visibility.PRIVATE)
    write(tenant, handle)

    expired = space_private_expire(now=timezone.now() + timedelta(days=1, minutes=1))

    assert [each.handle for each in expired] == [handle]


def test_the_expiry_task_is_scheduled_nightly_at_two_utc_and_runs_the_service(tenant, settings):
    settings.MEMORY_PRIVATE_TTL_DAYS = 7
    handle = handle_of(tenant.team, Visibility.PRIVATE)
    write(tenant, handle)
    MemorySpace.objects.update(last_written_at=timezone.now() - timedelta(days=8))

    removed = space_private_expire_sweep()

    task = PeriodicTask.objects.select_related("crontab").get(task=PRIVATE_EXPIRY_TASK)
    assert task.enabled
    crontab = task.crontab
    assert (crontab.minute, crontab.hour, str(crontab.timezone)) == ("0", "2", "UTC")
    assert PRIVATE_EXPIRY_TASK in current_app.tasks
    assert removed == 1
    assert not MemorySpace.objects.exists()
