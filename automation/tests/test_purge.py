"""The org purge: complete, on schedule, idempotent, and exclusive with a restore."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.cache import cache
from django.utils import timezone

from automation.bot_memory import bot_memory_access, memory_read
from automation.purge import PURGE_PLAN, PURGE_RECLAIM_AFTER, RETAINED, org_purge, org_purge_due
from automation.tools import TurnContext, create_note, remember_in_memory
from conftest import postgres_only, run_concurrently
from memory.services import memory_line_keep, memory_policy_set
from memory.spaces.database import DatabaseStore
from memory.spaces.filesystem import FilesystemStore
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import quotas_for
from memory.spaces.store import MemoryStore
from memory.tests.spaces.conftest import store_write
from workspaces.errors import OrgStateConflict
from workspaces.models import AuditEvent, KeySession, Org, User
from workspaces.services import (
    api_token_create,
    bot_token_issue,
    key_session_open,
    key_session_revoke,
    org_deletion_request,
    org_quota_set,
    org_restore,
)

PROJECT_APPS = ("workspaces", "memory", "automation")


def populate(assistant) -> None:
    """Give the assistant's org at least one row of every kind the product stores."""
    tenant = assistant.tenant
    # A team's storage usage is kept only under a quota.
    org_quota_set(org=tenant.org, memory_quota_bytes=1_000_000, actor=None)
    committed = assistant.send("remember x")
    remember_in_memory(
        TurnContext(committed, assistant.key_session.pk, 1), [{"op": "add", "line": "- x"}]
    )
    create_note(
        TurnContext(assistant.send("note"), assistant.key_session.pk, 2),
        path="notes/a.md",
        content="a note\n",
    )
    memory_policy_set(
        workspace=tenant.workspace, mode="read_only", expected_revision=1, actor=tenant.member
    )
    proposing = assistant.send("remember y")
    remember_in_memory(
        TurnContext(proposing, assistant.key_session.pk, 2), [{"op": "add", "line": "- y"}]
    )
    revoked = key_session_open(workspace=tenant.workspace, user=tenant.member)
    key_session_revoke(session=revoked, revoked_by=tenant.member)
    api_token_create(user=tenant.member, team=tenant.team, name="cli")
    bot_token_issue(bot=tenant.bot_create("helper"), actor=tenant.admin, name="ci")
    space_write(DatabaseStore(), org_space(tenant.team), b"a space document")
    reader = tenant.bot_create("reader", memory={"visibility": "org", "name": "notes"})
    memory_read(access=bot_memory_access(issuer=tenant.admin, bot=reader), path="a.md")
    memory_line_keep(workspace=tenant.workspace, reviewer=tenant.member, base_version=2, line=1)


def org_space(team) -> SpaceHandle:
    return SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=team.pk)


def space_write(store: MemoryStore, handle: SpaceHandle, body: bytes) -> SpaceHandle:
    store_write(store, handle, "a.md", body, expected=0, quotas=quotas_for(handle))
    return handle


def rows_of(org_id: int) -> dict[str, int]:
    return {
        step.model._meta.label: step.model._base_manager.filter(**{step.org_path: org_id}).count()
        for step in PURGE_PLAN
    }


def make_due(org: Org) -> None:
    org_deletion_request(org=org, actor=None)
    Org.objects.filter(pk=org.pk).update(deletion_due_at=timezone.now() - timedelta(seconds=1))


def test_every_model_is_purged_or_deliberately_retained():
    planned = {step.model for step in PURGE_PLAN}
    for label in PROJECT_APPS:
        for model in apps.get_app_config(label).get_models():
            assert model in planned or model._meta.label in RETAINED, (
                f"{model._meta.label} holds rows the org purge would miss"
            )


def test_purge_removes_every_row_of_the_org_and_nothing_of_another(make_assistant, make_tenant):
    assistant = make_assistant()
    populate(assistant)
    bystander = make_tenant()
    org_id = assistant.tenant.org.pk
    assert all(count > 0 for count in rows_of(org_id).values()), rows_of(org_id)
    others_before = rows_of(bystander.org.pk)
    make_due(assistant.tenant.org)

    purged = org_purge_due()

    assert purged == [org_id]
    assert set(rows_of(org_id).values()) == {0}
    assert not Org.objects.filter(pk=org_id).exists()
    assert rows_of(bystander.org.pk) == others_before
    assert Org.objects.filter(pk=bystander.org.pk, status="active").exists()
    event = AuditEvent.objects.get(org_id=org_id, action="org_purged")
    assert event.detail["deletedRows"]["workspaces.FileVersion"] >= 3


def test_purge_removes_the_admin_history_of_the_orgs_rows_only(make_tenant):
    # The admin's history names each object it records (`object_repr`: an org's, a team's,
    # a workspace's name) and what changed; it must not outlive the rows it is about.
    doomed, bystander = make_tenant(), make_tenant()
    staff = User.objects.create(username="staff", is_staff=True)
    history: dict[int, set[int]] = {}
    for tenant in (doomed, bystander):
        before = set(LogEntry.objects.values_list("pk", flat=True))
        for row in (tenant.org, tenant.team, tenant.workspace):
            LogEntry.objects.log_actions(
                user_id=staff.pk, queryset=[row], action_flag=CHANGE, change_message="renamed"
            )
        history[tenant.org.pk] = set(LogEntry.objects.values_list("pk", flat=True)) - before
    make_due(doomed.org)

    org_purge_due()

    assert set(LogEntry.objects.values_list("pk", flat=True)) == history[bystander.org.pk]
    assert len(history[doomed.org.pk]) == 3


def test_no_key_has_admin_history_for_the_purge_to_miss(rf, admin_user):
    # The purge deletes the admin's history of every row but the keys': their admins are
    # view-only, so no LogEntry can name a key.
    request = rf.get("/admin/")
    request.user = admin_user
    for step in PURGE_PLAN:
        if step.destroys_keys:
            model_admin = admin.site._registry[step.model]
            assert not model_admin.has_add_permission(request)
            assert not model_admin.has_change_permission(request)
            assert not model_admin.has_delete_permission(request)


def test_purge_removes_the_filesystem_spaces_of_the_orgs_teams_only(
    make_tenant, settings, tmp_path
):
    settings.DATA_DIR = tmp_path
    store = FilesystemStore(root=tmp_path / "spaces")
    doomed, bystander = make_tenant(), make_tenant()
    doomed_space = space_write(store, org_space(doomed.team), b"doomed")
    kept_space = space_write(store, org_space(bystander.team), b"kept")
    global_space = space_write(
        store, SpaceHandle(visibility=Visibility.GLOBAL, name="notes", tenant_id=None), b"global"
    )
    make_due(doomed.org)

    org_purge_due()

    assert not (tmp_path / "spaces" / "tenants" / str(doomed.team.pk)).exists()
    assert store.list(doomed_space) == []
    for space, body in ((kept_space, b"kept"), (global_space, b"global")):
        stored = store.read(space, "a.md")
        assert stored is not None
        assert stored.body == body
    event = AuditEvent.objects.get(org_id=doomed.org.pk, action="org_purged")
    assert event.detail["filesystemSpaceDocuments"] == 1


def test_purge_forgets_the_cached_keys_of_the_orgs_key_sessions(assistant):
    session = assistant.key_session
    assert cache.get(session.cache_key) is not None
    make_due(assistant.tenant.org)

    org_purge_due()

    assert cache.get(session.cache_key) is None
    assert not KeySession.objects.filter(pk=session.pk).exists()


def test_an_org_inside_its_grace_is_not_purged(assistant):
    org_deletion_request(org=assistant.tenant.org, actor=assistant.tenant.admin)

    assert org_purge_due() == []
    assert rows_of(assistant.tenant.org.pk)["workspaces.Workspace"] == 1


def test_restore_inside_grace_keeps_everything(make_assistant):
    assistant = make_assistant()
    populate(assistant)
    org = assistant.tenant.org
    before = rows_of(org.pk)
    org_deletion_request(org=org, actor=assistant.tenant.admin)

    org_restore(org=org, actor=assistant.tenant.admin)

    assert org_purge_due(now=timezone.now() + timedelta(days=365)) == []
    assert rows_of(org.pk) == before
    org.refresh_from_db()
    assert (org.status, org.deletion_due_at) == ("active", None)
    actions = list(AuditEvent.objects.filter(org_id=org.pk).values_list("action", flat=True))
    assert "org_deletion_requested" in actions
    assert "org_restored" in actions


@pytest.mark.parametrize(
    "route", ["/api/v1/workspaces/{workspace}/memory", "/api/v1/workspaces", "/api/v1/tokens"]
)
def test_members_of_a_pending_org_are_refused_with_a_clear_code(tenant, route):
    client = tenant.client_for(tenant.member)
    org_deletion_request(org=tenant.org, actor=tenant.admin)

    response = client.get(route.format(workspace=tenant.workspace.pk))

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "ORG_PENDING_DELETION"


def test_a_stalled_purge_is_taken_over_later(assistant):
    org = assistant.tenant.org
    make_due(org)
    stalled_at = timezone.now() - PURGE_RECLAIM_AFTER - timedelta(minutes=1)
    Org.objects.filter(pk=org.pk).update(status="purging", purge_claimed_at=stalled_at)

    assert org_purge(org_id=org.pk) is True
    assert not Org.objects.filter(pk=org.pk).exists()


def test_a_purge_in_progress_is_not_taken_over(assistant):
    org = assistant.tenant.org
    make_due(org)
    Org.objects.filter(pk=org.pk).update(status="purging", purge_claimed_at=timezone.now())

    assert org_purge(org_id=org.pk) is False
    assert Org.objects.filter(pk=org.pk).exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_purge_racing_a_restore_exactly_one_wins(assistant):
    org = assistant.tenant.org
    make_due(org)

    def restore():
        try:
            org_restore(org=Org.objects.get(pk=org.pk), actor=None)
        except OrgStateConflict as error:
            return error
        return True

    results = run_concurrently(lambda: org_purge(org_id=org.pk), restore)

    purged, restored = results[0] is True, results[1] is True
    assert purged != restored, results
    if purged:
        assert not Org.objects.filter(pk=org.pk).exists()
        assert isinstance(results[1], OrgStateConflict)
    else:
        assert Org.objects.get(pk=org.pk).status == "active"
        assert rows_of(org.pk)["workspaces.Workspace"] == 1


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_purges_at_once_do_the_work_once(make_assistant):
    assistant = make_assistant()
    populate(assistant)
    org_id = assistant.tenant.org.pk
    make_due(assistant.tenant.org)

    results = run_concurrently(org_purge_due, org_purge_due)

    assert not any(isinstance(r, BaseException) for r in results), results
    assert sorted(results, key=len) == [[], [org_id]]
    assert set(rows_of(org_id).values()) == {0}
    assert AuditEvent.objects.filter(org_id=org_id, action="org_purged").count() == 1
