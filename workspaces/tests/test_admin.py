from __future__ import annotations

import html
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from workspaces.admin import id_link_column, workspace_column
from workspaces.models import (
    ApiToken,
    AuditEvent,
    KeySession,
    KeySessionRevocation,
    Org,
    Team,
    TeamMembership,
    User,
    WorkspaceMembership,
)
from workspaces.selectors import workspace_data_key
from workspaces.services import (
    api_token_create,
    key_session_open,
    org_deletion_request,
    team_membership_ensure,
    workspace_create,
    workspace_key_ensure,
    workspace_membership_ensure,
)

MODELS = [
    "org",
    "team",
    "teammembership",
    "workspace",
    "workspacemembership",
    "apitoken",
    "user",
    "workspacekey",
    "file",
    "fileversion",
    "keysession",
    "keysessionrevocation",
    "auditevent",
]


def org_action(client, action: str, *orgs: Org, **data: str):
    return client.post(
        reverse("admin:workspaces_org_changelist"),
        {"action": action, "_selected_action": [org.pk for org in orgs], **data},
    )


@pytest.mark.parametrize("model", MODELS)
def test_changelist_renders_with_a_bounded_number_of_queries(
    staff_client, make_tenant, model, django_assert_max_num_queries
):
    for _ in range(3):
        extra = make_tenant()
        api_token_create(user=extra.member, team=extra.team, name="x")
        key_session_open(workspace=extra.workspace, user=extra.member)

    with django_assert_max_num_queries(12):
        response = staff_client.get(reverse(f"admin:workspaces_{model}_changelist"))

    assert response.status_code == 200


def test_token_pages_never_show_the_hash(staff_client, tenant):
    token, raw = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    listing = staff_client.get(reverse("admin:workspaces_apitoken_changelist"))
    detail = staff_client.get(reverse("admin:workspaces_apitoken_change", args=[token.pk]))

    for page in (listing, detail):
        assert page.status_code == 200
        assert token.token_hash not in page.content.decode()
        assert raw not in page.content.decode()


def test_revoke_action_uses_the_service(staff_client, tenant):
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="cli")

    staff_client.post(
        reverse("admin:workspaces_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_only_staff_who_may_change_tokens_may_revoke_them(client, tenant, django_user_model):
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_apitoken"))
    client.force_login(viewer)

    client.post(
        reverse("admin:workspaces_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    assert not AuditEvent.objects.filter(action="token_revoked").exists()


def test_schedule_deletion_sets_pending_with_a_grace_deadline_and_audits(
    admin_client, admin_user, tenant, settings
):
    before = timezone.now()

    response = org_action(admin_client, "schedule_deletion", tenant.org)

    assert response.status_code == 302
    tenant.org.refresh_from_db()
    assert tenant.org.status == Org.Status.PENDING_DELETION
    grace = timedelta(days=settings.ORG_DELETION_GRACE_DAYS)
    assert before + grace <= tenant.org.deletion_due_at <= timezone.now() + grace
    event = AuditEvent.objects.get(org_id=tenant.org.pk, action="org_deletion_requested")
    assert event.actor == admin_user


def test_restore_returns_a_pending_org_to_active_and_audits(admin_client, admin_user, tenant):
    org_deletion_request(org=tenant.org, actor=tenant.admin)

    response = org_action(admin_client, "restore", tenant.org)

    assert response.status_code == 302
    tenant.org.refresh_from_db()
    assert (tenant.org.status, tenant.org.deletion_due_at) == (Org.Status.ACTIVE, None)
    event = AuditEvent.objects.get(org_id=tenant.org.pk, action="org_restored")
    assert event.actor == admin_user


def test_restoring_an_active_org_is_refused_and_changes_nothing(admin_client, tenant):
    response = org_action(admin_client, "restore", tenant.org)

    assert response.status_code == 302
    tenant.org.refresh_from_db()
    assert tenant.org.status == Org.Status.ACTIVE
    assert not AuditEvent.objects.filter(org_id=tenant.org.pk, action="org_restored").exists()
    page = admin_client.get(response.url).content.decode()
    assert "not in a state that allows this" in page


def test_quota_action_asks_for_the_quota_first(admin_client, tenant):
    response = org_action(admin_client, "set_memory_quota", tenant.org)

    assert response.status_code == 200
    assert 'name="memory_quota_bytes"' in response.content.decode()
    tenant.org.refresh_from_db()
    assert tenant.org.memory_quota_bytes == 0
    assert not AuditEvent.objects.filter(action="org_quota_changed").exists()


def test_quota_action_sets_the_quota_through_the_audited_service(
    admin_client, admin_user, make_tenant
):
    first, second = make_tenant(), make_tenant()

    response = org_action(
        admin_client,
        "set_memory_quota",
        first.org,
        second.org,
        apply="Set the quota",
        memory_quota_bytes="4096",
    )

    assert response.status_code == 302
    for org in (first.org, second.org):
        org.refresh_from_db()
        assert org.memory_quota_bytes == 4096
        event = AuditEvent.objects.get(org_id=org.pk, action="org_quota_changed")
        assert (event.actor, event.detail) == (admin_user, {"from": 0, "to": 4096})


def test_quota_action_refuses_a_negative_quota(admin_client, tenant):
    response = org_action(
        admin_client, "set_memory_quota", tenant.org, apply="Set the quota", memory_quota_bytes="-1"
    )

    assert response.status_code == 200
    tenant.org.refresh_from_db()
    assert tenant.org.memory_quota_bytes == 0
    assert not AuditEvent.objects.filter(action="org_quota_changed").exists()


def test_the_org_form_edits_the_name_but_never_the_quota_or_the_status(admin_client, tenant):
    url = reverse("admin:workspaces_org_change", args=[tenant.org.pk])

    response = admin_client.post(
        url, {"name": "renamed", "memory_quota_bytes": "999", "status": "pending_deletion"}
    )

    assert response.status_code == 302
    tenant.org.refresh_from_db()
    assert tenant.org.name == "renamed"
    assert (tenant.org.memory_quota_bytes, tenant.org.status) == (0, Org.Status.ACTIVE)
    # Besides the tenant's making (its workspace's creation), the trail holds the rename
    # alone: no quota or lifecycle change.
    actions = AuditEvent.objects.filter(org_id=tenant.org.pk).order_by("pk")
    assert list(actions.values_list("action", flat=True)) == ["workspace_created", "org_renamed"]


def test_an_org_cannot_be_deleted_directly(admin_client, tenant):
    url = reverse("admin:workspaces_org_delete", args=[tenant.org.pk])

    response = admin_client.post(url, {"post": "yes"})

    assert response.status_code == 403
    assert Org.objects.filter(pk=tenant.org.pk).exists()


def test_revoke_key_session_action_records_the_revocation(admin_client, admin_user, tenant):
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)

    response = admin_client.post(
        reverse("admin:workspaces_keysession_changelist"),
        {"action": "revoke", "_selected_action": [session.pk]},
    )

    assert response.status_code == 302
    revocation = KeySessionRevocation.objects.get(key_session=session)
    assert revocation.revoked_by == admin_user
    session.refresh_from_db()
    assert session.revoked_at is not None
    event = AuditEvent.objects.get(action="key_session_revoked", target_id=str(session.pk))
    assert event.actor == admin_user


def test_workspace_key_pages_never_show_the_key(admin_client, tenant):
    workspace_key_ensure(workspace=tenant.workspace)
    key = workspace_data_key(workspace=tenant.workspace)
    assert key is not None

    listing = admin_client.get(reverse("admin:workspaces_workspacekey_changelist"))
    detail = admin_client.get(
        reverse("admin:workspaces_workspacekey_change", args=[tenant.workspace.pk])
    )

    for page in (listing, detail):
        assert page.status_code == 200
        assert tenant.workspace.name in page.content.decode()
        assert key.hex() not in page.content.decode()
        assert html.escape(repr(key)) not in page.content.decode()


@pytest.mark.parametrize("model", ["user", "team", "workspace", "apitoken", "bot"])
def test_people_teams_workspaces_tokens_and_bots_cannot_be_hard_deleted(
    staff_client, tenant, model
):
    # A token is revoked (audited), never deleted; deleting a bot would delete its tokens.
    if model == "apitoken":
        target, _ = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    elif model == "bot":
        target = tenant.bot_create("helper")
    else:
        target = {"user": tenant.member, "team": tenant.team, "workspace": tenant.workspace}[model]

    response = staff_client.post(
        reverse(f"admin:workspaces_{model}_delete", args=[target.pk]), {"post": "yes"}
    )
    listing = staff_client.get(reverse(f"admin:workspaces_{model}_changelist"))

    assert response.status_code == 403
    assert type(target).objects.filter(pk=target.pk).exists()
    assert "delete_selected" not in listing.content.decode()


def test_an_id_link_column_links_the_row_its_id_path_reaches_and_shows_the_id():
    # given: a column reaching an org id through the row's team
    column = id_link_column("Org", "workspaces.org", "team__org_id")

    # when: it renders a row whose team names org 7, and one whose team names none
    linked = column(None, SimpleNamespace(team=SimpleNamespace(org_id=7)))
    missing = column(None, SimpleNamespace(team=SimpleNamespace(org_id=None)))

    # then: a link to org 7's change page, labelled 7; a dash for none
    assert linked == f'<a href="{reverse("admin:workspaces_org_change", args=[7])}">7</a>'
    assert missing == "-"
    assert vars(column)["short_description"] == "Org"


def test_a_workspace_column_links_the_workspace_the_row_reaches_and_orders_by_its_name(tenant):
    # given: a column reaching the workspace through the row's file
    column = workspace_column("file")

    # when: it renders a row whose file is in the tenant's workspace
    linked = column(None, SimpleNamespace(file=SimpleNamespace(workspace=tenant.workspace)))

    # then: a link to that workspace, labelled with its name, sorted by the name
    url = reverse("admin:workspaces_workspace_change", args=[tenant.workspace.pk])
    assert linked == f'<a href="{url}">{html.escape(tenant.workspace.name)}</a>'
    assert vars(column)["admin_order_field"] == "file__workspace__name"


# ---- removal from a team ----------------------------------------------------------------------


def team_membership_of(tenant, user) -> TeamMembership:
    return TeamMembership.objects.get(team=tenant.team, user=user)


def remove_from_team(client, membership: TeamMembership, how: str, **kwargs):
    if how == "delete page":
        url = reverse("admin:workspaces_teammembership_delete", args=[membership.pk])
        return client.post(url, {"post": "yes"}, **kwargs)
    return client.post(
        reverse("admin:workspaces_teammembership_changelist"),
        {"action": "remove_from_team", "_selected_action": [membership.pk]},
        **kwargs,
    )


@pytest.mark.parametrize("how", ["delete page", "action"])
def test_removing_someone_from_the_team_ends_their_workspaces_and_key_sessions_there(
    staff_client, tenant, how, django_capture_on_commit_callbacks
):
    # given: the member is in two of the team's workspaces, with a key session in each,
    # and the admin has one too
    second = workspace_create(team=tenant.team, name="second", admin=tenant.admin)
    workspace_membership_ensure(workspace=second, user=tenant.member)
    theirs = [key_session_open(workspace=w, user=tenant.member) for w in (tenant.workspace, second)]
    mine = key_session_open(workspace=tenant.workspace, user=tenant.admin)
    membership = team_membership_of(tenant, tenant.member)

    # when: staff remove them from the team
    with django_capture_on_commit_callbacks(execute=True):
        response = remove_from_team(staff_client, membership, how)

    # then: no membership of the team's workspaces is left, their key sessions (and only
    # theirs) are revoked and their keys gone from the cache, and each removal is audited
    assert response.status_code == 302
    assert not TeamMembership.objects.filter(pk=membership.pk).exists()
    assert not WorkspaceMembership.objects.filter(user=tenant.member).exists()
    assert set(KeySession.objects.filter(revoked_at__isnull=False)) == set(theirs)
    assert all(cache.get(session.cache_key) is None for session in theirs)
    assert cache.get(mine.cache_key) is not None
    events = AuditEvent.objects.filter(action="member_removed", target_id=str(tenant.member.pk))
    assert {e.workspace_id for e in events} == {tenant.workspace.pk, second.pk}
    assert {e.detail["team"] for e in events} == {True}
    # and back in the team, they are in none of its workspaces until an admin adds them
    team_membership_ensure(team=tenant.team, user=tenant.member)
    assert tenant.client_for(tenant.member).get("/api/v1/workspaces").json()["results"] == []


@pytest.mark.parametrize("how", ["delete page", "action"])
def test_the_last_admin_of_a_workspace_cannot_be_removed_from_its_team(staff_client, tenant, how):
    session = key_session_open(workspace=tenant.workspace, user=tenant.admin)
    membership = team_membership_of(tenant, tenant.admin)

    response = remove_from_team(staff_client, membership, how, follow=True)

    assert response.status_code == 200
    assert "only admin" in response.content.decode()
    assert TeamMembership.objects.filter(pk=membership.pk).exists()
    assert WorkspaceMembership.objects.filter(user=tenant.admin, role="admin").count() == 1
    session.refresh_from_db()
    assert not session.is_revoked
    assert not AuditEvent.objects.filter(action="member_removed").exists()
    assert not LogEntry.objects.filter(action_flag=DELETION).exists()


def test_a_team_memberships_person_and_team_cannot_be_edited_nor_bulk_deleted(staff_client, tenant):
    membership = team_membership_of(tenant, tenant.member)
    other = Team.objects.create(org=tenant.org, name="other")

    staff_client.post(
        reverse("admin:workspaces_teammembership_change", args=[membership.pk]),
        {"user": tenant.admin.pk, "team": other.pk, "role": "member"},
    )
    listing = staff_client.get(reverse("admin:workspaces_teammembership_changelist"))

    membership.refresh_from_db()
    assert (membership.user, membership.team) == (tenant.member, tenant.team)
    assert "delete_selected" not in listing.content.decode()


def test_adding_someone_to_a_team_in_the_admin_is_audited(staff_client, tenant):
    newcomer = User.objects.create_user(username="newcomer")

    response = staff_client.post(
        reverse("admin:workspaces_teammembership_add"),
        {"user": newcomer.pk, "team": tenant.team.pk, "role": "owner"},
    )

    assert response.status_code == 302
    assert TeamMembership.objects.get(team=tenant.team, user=newcomer).role == "owner"
    [event] = AuditEvent.objects.filter(action="member_added")
    assert event.actor == tenant.admin
    assert (event.org_id, event.workspace_id) == (tenant.org.pk, None)
    assert (event.target_type, event.target_id) == ("user", str(newcomer.pk))
    assert event.detail == {"role": "owner", "teamId": tenant.team.pk, "staff": True}


@pytest.mark.parametrize("how", ["delete page", "action"])
def test_the_last_owner_of_a_team_cannot_be_removed_from_it_in_the_admin(staff_client, tenant, how):
    owner = TeamMembership.objects.get(team=tenant.team, user=tenant.member)
    TeamMembership.objects.filter(pk=owner.pk).update(role="owner")

    response = remove_from_team(staff_client, owner, how, follow=True)

    assert "only owner" in response.content.decode()
    assert TeamMembership.objects.filter(pk=owner.pk).exists()
    assert not AuditEvent.objects.filter(action="member_removed").exists()


def test_an_owner_of_a_team_with_another_owner_can_be_removed(staff_client, tenant):
    TeamMembership.objects.filter(team=tenant.team).update(role="owner")
    owner = TeamMembership.objects.get(team=tenant.team, user=tenant.member)

    response = remove_from_team(staff_client, owner, "delete page")

    assert response.status_code == 302
    assert not TeamMembership.objects.filter(pk=owner.pk).exists()


# ---- workspace memberships --------------------------------------------------------------------


def remove_from_workspace(client, membership: WorkspaceMembership, how: str, **kwargs):
    if how == "delete page":
        url = reverse("admin:workspaces_workspacemembership_delete", args=[membership.pk])
        return client.post(url, {"post": "yes"}, **kwargs)
    return client.post(
        reverse("admin:workspaces_workspacemembership_changelist"),
        {"action": "remove_from_workspace", "_selected_action": [membership.pk]},
        **kwargs,
    )


@pytest.mark.parametrize("how", ["delete page", "action"])
def test_removing_someone_from_a_workspace_revokes_their_key_sessions_there_and_audits(
    staff_client, tenant, how, django_capture_on_commit_callbacks
):
    theirs = key_session_open(workspace=tenant.workspace, user=tenant.member)
    mine = key_session_open(workspace=tenant.workspace, user=tenant.admin)
    membership = WorkspaceMembership.objects.get(workspace=tenant.workspace, user=tenant.member)

    with django_capture_on_commit_callbacks(execute=True):
        response = remove_from_workspace(staff_client, membership, how)

    assert response.status_code == 302
    assert not WorkspaceMembership.objects.filter(pk=membership.pk).exists()
    theirs.refresh_from_db()
    assert theirs.is_revoked
    assert cache.get(theirs.cache_key) is None
    assert cache.get(mine.cache_key) is not None
    event = AuditEvent.objects.get(action="member_removed", target_id=str(tenant.member.pk))
    assert event.workspace_id == tenant.workspace.pk
    assert event.detail["staff"] is True
    assert event.actor == tenant.admin
    path = f"/api/v1/workspaces/{tenant.workspace.pk}"
    assert tenant.client_for(tenant.member).get(path).status_code == 404


@pytest.mark.parametrize("how", ["delete page", "action"])
def test_the_last_admin_of_a_workspace_cannot_be_removed_from_it_in_the_admin(
    staff_client, tenant, how
):
    session = key_session_open(workspace=tenant.workspace, user=tenant.admin)
    membership = WorkspaceMembership.objects.get(workspace=tenant.workspace, user=tenant.admin)

    response = remove_from_workspace(staff_client, membership, how, follow=True)

    assert response.status_code == 200
    assert "only admin" in response.content.decode()
    assert WorkspaceMembership.objects.filter(pk=membership.pk).exists()
    session.refresh_from_db()
    assert not session.is_revoked
    assert not AuditEvent.objects.filter(action="member_removed").exists()
    assert not LogEntry.objects.filter(action_flag=DELETION).exists()


def edit_workspace_membership(client, membership: WorkspaceMembership, **data):
    url = reverse("admin:workspaces_workspacemembership_change", args=[membership.pk])
    fields = {"user": membership.user_id, "workspace": membership.workspace_id, "role": "member"}
    return client.post(url, {**fields, **data}, follow=True)


def test_a_role_changed_in_the_admin_goes_through_the_service(staff_client, tenant):
    membership = WorkspaceMembership.objects.get(workspace=tenant.workspace, user=tenant.member)

    edit_workspace_membership(staff_client, membership, role="admin")

    membership.refresh_from_db()
    assert membership.role == "admin"
    event = AuditEvent.objects.get(action="member_role_changed")
    assert event.detail == {"from": "member", "to": "admin"}
    assert event.actor == tenant.admin


def test_the_last_admin_of_a_workspace_cannot_be_demoted_in_the_admin(staff_client, tenant):
    membership = WorkspaceMembership.objects.get(workspace=tenant.workspace, user=tenant.admin)

    response = edit_workspace_membership(staff_client, membership, role="member")

    assert "only admin" in response.content.decode()
    membership.refresh_from_db()
    assert membership.role == "admin"
    assert not AuditEvent.objects.filter(action="member_role_changed").exists()


def edit_team_membership(client, membership: TeamMembership, **data):
    url = reverse("admin:workspaces_teammembership_change", args=[membership.pk])
    fields = {"user": membership.user_id, "team": membership.team_id, "role": "member"}
    return client.post(url, {**fields, **data}, follow=True)


def test_a_team_role_changed_in_the_admin_goes_through_the_service_and_is_audited(
    staff_client, tenant
):
    membership = TeamMembership.objects.get(team=tenant.team, user=tenant.member)

    edit_team_membership(staff_client, membership, role="owner")

    membership.refresh_from_db()
    assert membership.role == "owner"
    event = AuditEvent.objects.get(action="member_role_changed")
    assert event.actor == tenant.admin
    assert (event.org_id, event.workspace_id) == (tenant.team.org_id, None)
    assert (event.target_type, event.target_id) == ("user", str(tenant.member.pk))
    assert event.detail == {"from": "member", "to": "owner", "teamId": tenant.team.pk}


def test_the_last_owner_of_a_team_cannot_be_made_a_member_in_the_admin(staff_client, tenant):
    owner = TeamMembership.objects.get(team=tenant.team, user=tenant.admin)
    TeamMembership.objects.filter(pk=owner.pk).update(role="owner")

    response = edit_team_membership(staff_client, owner, role="member")

    assert "only owner" in response.content.decode()
    owner.refresh_from_db()
    assert owner.role == "owner"
    assert not AuditEvent.objects.filter(action="member_role_changed").exists()
    assert not LogEntry.objects.filter(action_flag=CHANGE).exists()


def test_a_workspace_membership_cannot_be_moved_added_nor_bulk_deleted(staff_client, tenant):
    membership = WorkspaceMembership.objects.get(workspace=tenant.workspace, user=tenant.member)
    other = workspace_create(team=tenant.team, name="other", admin=tenant.admin)

    edit_workspace_membership(staff_client, membership, user=tenant.admin.pk, workspace=other.pk)
    listing = staff_client.get(reverse("admin:workspaces_workspacemembership_changelist"))
    add = staff_client.get(reverse("admin:workspaces_workspacemembership_add"))

    membership.refresh_from_db()
    assert (membership.user, membership.workspace) == (tenant.member, tenant.workspace)
    assert "delete_selected" not in listing.content.decode()
    assert add.status_code == 403


# ---- deactivating a person --------------------------------------------------------------------


def test_deactivating_someone_in_the_admin_revokes_their_key_sessions_at_once(
    staff_client, tenant, django_capture_on_commit_callbacks
):
    second = workspace_create(team=tenant.team, name="second", admin=tenant.admin)
    workspace_membership_ensure(workspace=second, user=tenant.member)
    theirs = [key_session_open(workspace=w, user=tenant.member) for w in (tenant.workspace, second)]
    mine = key_session_open(workspace=tenant.workspace, user=tenant.admin)
    member = tenant.member
    joined = timezone.localtime(member.date_joined)

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("admin:workspaces_user_change", args=[member.pk]),
            {
                "username": member.username,
                "email": member.email,
                "date_joined_0": joined.strftime("%Y-%m-%d"),
                "date_joined_1": joined.strftime("%H:%M:%S"),
            },  # "is_active" left out: unticked
        )

    assert response.status_code == 302
    member.refresh_from_db()
    assert not member.is_active
    for session in theirs:
        session.refresh_from_db()
        assert session.is_revoked
        assert cache.get(session.cache_key) is None
    assert cache.get(mine.cache_key) is not None
    events = AuditEvent.objects.filter(action="key_session_revoked")
    assert {e.target_id for e in events} == {str(s.pk) for s in theirs}
    assert {e.actor for e in events} == {tenant.admin}


# ---- rows a service owns ----------------------------------------------------------------------


def test_a_workspace_is_neither_added_nor_moved_to_another_team_in_the_admin(staff_client, tenant):
    other = Team.objects.create(org=tenant.org, name="other")
    url = reverse("admin:workspaces_workspace_change", args=[tenant.workspace.pk])

    staff_client.post(url, {"name": "renamed", "team": other.pk})
    add = staff_client.get(reverse("admin:workspaces_workspace_add"))

    tenant.workspace.refresh_from_db()
    assert (tenant.workspace.name, tenant.workspace.team) == ("renamed", tenant.team)
    assert add.status_code == 403


def test_a_team_is_not_moved_to_another_org_in_the_admin(staff_client, tenant):
    other = Org.objects.create(name="other")
    url = reverse("admin:workspaces_team_change", args=[tenant.team.pk])

    staff_client.post(url, {"name": "renamed", "org": other.pk})

    tenant.team.refresh_from_db()
    assert (tenant.team.name, tenant.team.org) == ("renamed", tenant.org)


def updates_of(captured, table: str) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if q["sql"].startswith(f'UPDATE "{table}"')]


def test_renaming_a_workspace_writes_its_name_alone(staff_client, tenant):
    """A whole-row save would write back the AI consent as the page loaded it, undoing a
    consent change (the compare-and-set service's) made meanwhile."""
    url = reverse("admin:workspaces_workspace_change", args=[tenant.workspace.pk])

    with CaptureQueriesContext(connection) as captured:
        staff_client.post(url, {"name": "renamed"})

    updates = updates_of(captured, "workspaces_workspace")
    assert len(updates) == 1
    assert '"name"' in updates[0]
    assert "ai_enabled" not in updates[0]
    assert "ai_consent_revision" not in updates[0]


def test_a_tokens_page_is_view_only_and_writes_nothing(staff_client, tenant):
    """A token is only revoked (the action, through the service): saving its page would
    write back `revoked_at` as the page loaded it, un-revoking a token revoked meanwhile."""
    token, _ = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    url = reverse("admin:workspaces_apitoken_change", args=[token.pk])

    with CaptureQueriesContext(connection) as captured:
        saved = staff_client.post(url, {})

    assert saved.status_code == 403
    assert updates_of(captured, "workspaces_apitoken") == []
