"""Workspaces and their members through the API: create, list members, add, remove, leave."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from conftest import (
    assert_error,
    postgres_only,
    run_concurrently,
    wait_until_a_backend_waits_on_a_lock,
)
from workspaces.errors import LastTeamOwner, LastWorkspaceAdmin, NotFound, WorkspaceAdminRequired
from workspaces.models import (
    AuditEvent,
    KeySession,
    TeamMembership,
    User,
    Workspace,
    WorkspaceMembership,
)
from workspaces.services import (
    api_token_create,
    key_session_open,
    team_member_remove,
    team_membership_ensure,
    team_membership_staff_role_set,
    workspace_member_add,
    workspace_member_remove,
    workspace_member_role_set,
    workspace_membership_ensure,
)

WORKSPACES_URL = "/api/v1/workspaces"


def members_url(workspace_id: int, user_id: int | None = None) -> str:
    url = f"{WORKSPACES_URL}/{workspace_id}/members"
    return url if user_id is None else f"{url}/{user_id}"


def role_of(workspace: Workspace, user: User) -> str | None:
    return (
        WorkspaceMembership.objects.filter(workspace=workspace, user=user)
        .values_list("role", flat=True)
        .first()
    )


def team_newcomer(tenant, username: str = "newcomer") -> User:
    """A member of the tenant's team who is in none of its workspaces."""
    user = User.objects.create_user(username=username, password="pw-newcomer-123")
    team_membership_ensure(team=tenant.team, user=user)
    return user


# ---- create ---------------------------------------------------------------------------------


def test_a_team_member_creates_a_workspace_and_is_its_admin(tenant):
    client = tenant.client_for(tenant.member)

    response = client.post(WORKSPACES_URL, {"name": "research"}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    workspace = Workspace.objects.get(pk=body["id"])
    assert (workspace.team_id, workspace.name, workspace.ai_enabled) == (
        tenant.team.pk,
        "research",
        False,
    )
    assert body == {"id": workspace.pk, "name": "research", "aiEnabled": False}
    assert role_of(workspace, tenant.member) == "admin"
    assert list(WorkspaceMembership.objects.filter(workspace=workspace)) == [
        WorkspaceMembership.objects.get(workspace=workspace, user=tenant.member)
    ]
    event = AuditEvent.objects.get(action="workspace_created", workspace_id=workspace.pk)
    assert (event.actor, event.org_id) == (tenant.member, tenant.org.pk)
    listed = [row["id"] for row in client.get(WORKSPACES_URL).json()["results"]]
    assert listed == [tenant.workspace.pk, workspace.pk]


def test_a_workspace_may_start_with_ai_on(tenant):
    response = tenant.client_for(tenant.member).post(
        WORKSPACES_URL, {"name": "with ai", "aiEnabled": True}, format="json"
    )

    assert response.status_code == 201
    assert Workspace.objects.get(pk=response.json()["id"]).ai_enabled is True


def test_a_name_the_team_already_has_is_409_and_creates_nothing(tenant):
    client = tenant.client_for(tenant.member)
    before = Workspace.objects.count()
    audited = AuditEvent.objects.count()

    response = client.post(WORKSPACES_URL, {"name": tenant.workspace.name}, format="json")

    error = assert_error(response, 409, "NAME_TAKEN")
    assert error["detail"] == {"name": tenant.workspace.name}
    assert Workspace.objects.count() == before
    assert AuditEvent.objects.count() == audited


def test_another_team_may_use_the_same_name(make_tenant):
    mine, theirs = make_tenant(), make_tenant()

    response = mine.client_for(mine.member).post(
        WORKSPACES_URL, {"name": theirs.workspace.name}, format="json"
    )

    assert response.status_code == 201
    assert Workspace.objects.get(pk=response.json()["id"]).team == mine.team


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "x" * 201}])
def test_a_workspace_needs_a_name(tenant, body):
    before = Workspace.objects.count()

    response = tenant.client_for(tenant.member).post(WORKSPACES_URL, body, format="json")

    assert_error(response, 400, "VALIDATION_FAILED")
    assert Workspace.objects.count() == before


# ---- list members -------------------------------------------------------------------------


def test_any_member_lists_the_members(tenant):
    response = tenant.client_for(tenant.member).get(members_url(tenant.workspace.pk))

    assert response.status_code == 200
    rows = response.json()["results"]
    assert [(row["userId"], row["username"], row["role"]) for row in rows] == [
        (tenant.admin.pk, tenant.admin.username, "admin"),
        (tenant.member.pk, tenant.member.username, "member"),
    ]
    assert all(row["joinedAt"] for row in rows)


def test_another_teams_workspace_members_are_404_on_every_verb(make_tenant):
    mine, theirs = make_tenant(), make_tenant()
    client = mine.client_for(mine.admin)
    before = WorkspaceMembership.objects.count()

    listed = client.get(members_url(theirs.workspace.pk))
    added = client.post(members_url(theirs.workspace.pk), {"userId": mine.member.pk}, format="json")
    removed = client.delete(members_url(theirs.workspace.pk, theirs.member.pk))

    for response in (listed, added, removed):
        assert_error(response, 404, "NOT_FOUND")
    assert WorkspaceMembership.objects.count() == before


def test_a_team_member_outside_the_workspace_gets_404(tenant):
    outsider = team_newcomer(tenant)

    response = tenant.client_for(outsider).get(members_url(tenant.workspace.pk))

    assert_error(response, 404, "NOT_FOUND")


# ---- add ------------------------------------------------------------------------------------


@pytest.mark.parametrize("by", ["userId", "username"])
def test_an_admin_adds_a_team_member_by_id_or_username(tenant, by):
    newcomer = team_newcomer(tenant)
    named = newcomer.pk if by == "userId" else newcomer.username

    response = tenant.client_for(tenant.admin).post(
        members_url(tenant.workspace.pk), {by: named}, format="json"
    )

    assert response.status_code == 201, response.content
    assert response.json()["userId"] == newcomer.pk
    assert response.json()["role"] == "member"
    assert role_of(tenant.workspace, newcomer) == "member"
    event = AuditEvent.objects.get(action="member_added")
    assert (event.actor, event.workspace_id, event.target_id, event.detail) == (
        tenant.admin,
        tenant.workspace.pk,
        str(newcomer.pk),
        {"role": "member"},
    )
    assert tenant.client_for(newcomer).get(members_url(tenant.workspace.pk)).status_code == 200


def test_an_admin_may_add_another_admin(tenant):
    newcomer = team_newcomer(tenant)

    response = tenant.client_for(tenant.admin).post(
        members_url(tenant.workspace.pk), {"userId": newcomer.pk, "role": "admin"}, format="json"
    )

    assert response.status_code == 201
    assert role_of(tenant.workspace, newcomer) == "admin"


def test_a_plain_member_cannot_add_anyone(tenant):
    newcomer = team_newcomer(tenant)

    response = tenant.client_for(tenant.member).post(
        members_url(tenant.workspace.pk), {"userId": newcomer.pk}, format="json"
    )

    assert_error(response, 403, "WORKSPACE_ADMIN_REQUIRED")
    assert role_of(tenant.workspace, newcomer) is None
    assert not AuditEvent.objects.filter(action="member_added").exists()


def test_someone_outside_the_team_cannot_be_added(make_tenant):
    mine, theirs = make_tenant(), make_tenant()
    client = mine.client_for(mine.admin)

    by_id = client.post(members_url(mine.workspace.pk), {"userId": theirs.member.pk}, format="json")
    by_name = client.post(
        members_url(mine.workspace.pk), {"username": theirs.member.username}, format="json"
    )
    nobody = client.post(members_url(mine.workspace.pk), {"username": "no-such"}, format="json")

    assert assert_error(by_id, 422, "NOT_TEAM_MEMBER")["detail"] == {"userId": theirs.member.pk}
    assert assert_error(by_name, 422, "NOT_TEAM_MEMBER")["detail"] == {
        "username": theirs.member.username
    }
    assert_error(nobody, 422, "NOT_TEAM_MEMBER")
    assert role_of(mine.workspace, theirs.member) is None
    assert not theirs.member.team_memberships.filter(team=mine.team).exists()


def test_a_deactivated_team_member_cannot_be_added(tenant):
    newcomer = team_newcomer(tenant)
    User.objects.filter(pk=newcomer.pk).update(is_active=False)

    response = tenant.client_for(tenant.admin).post(
        members_url(tenant.workspace.pk), {"userId": newcomer.pk}, format="json"
    )

    assert_error(response, 422, "NOT_TEAM_MEMBER")


def test_adding_a_member_twice_is_409(tenant):
    response = tenant.client_for(tenant.admin).post(
        members_url(tenant.workspace.pk),
        {"userId": tenant.member.pk, "role": "admin"},
        format="json",
    )

    assert assert_error(response, 409, "ALREADY_MEMBER")["detail"] == {"userId": tenant.member.pk}
    assert role_of(tenant.workspace, tenant.member) == "member"


@pytest.mark.parametrize(
    "body", [{}, {"userId": 1, "username": "x"}, {"userId": "x"}, {"username": "x", "role": "boss"}]
)
def test_an_add_names_one_person_with_a_known_role(tenant, body):
    before = WorkspaceMembership.objects.count()

    response = tenant.client_for(tenant.admin).post(
        members_url(tenant.workspace.pk), body, format="json"
    )

    assert_error(response, 400, "VALIDATION_FAILED")
    assert WorkspaceMembership.objects.count() == before


# ---- remove and leave -----------------------------------------------------------------------


def test_an_admin_removes_a_member_who_then_sees_nothing_of_the_workspace(tenant):
    member_client = tenant.client_for(tenant.member)
    conversation = member_client.post(
        "/api/v1/agents/assistant/conversations",
        {"workspaceId": tenant.workspace.pk},
        format="json",
    ).json()
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)

    response = tenant.client_for(tenant.admin).delete(
        members_url(tenant.workspace.pk, tenant.member.pk)
    )

    assert response.status_code == 204
    assert role_of(tenant.workspace, tenant.member) is None
    session.refresh_from_db()
    assert session.is_revoked
    event = AuditEvent.objects.get(action="member_removed")
    assert (event.actor, event.target_id, event.detail) == (
        tenant.admin,
        str(tenant.member.pk),
        {"role": "member", "left": False},
    )
    assert member_client.get(WORKSPACES_URL).json()["results"] == []
    assert_error(member_client.get(members_url(tenant.workspace.pk)), 404, "NOT_FOUND")
    assert_error(
        member_client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/memory"), 404, "NOT_FOUND"
    )
    assert member_client.get("/api/v1/agents/assistant/conversations").json()["results"] == []
    receipts = member_client.get(f"/api/v1/agents/assistant/{conversation['id']}/memory-receipts")
    assert_error(receipts, 404, "NOT_FOUND")
    # Still a member of the team: only the workspace is gone from their reach.
    assert tenant.member.team_memberships.filter(team=tenant.team).exists()


def test_a_plain_member_cannot_remove_another(tenant):
    other = team_newcomer(tenant)
    workspace_membership_ensure(workspace=tenant.workspace, user=other)

    response = tenant.client_for(tenant.member).delete(members_url(tenant.workspace.pk, other.pk))

    assert_error(response, 403, "WORKSPACE_ADMIN_REQUIRED")
    assert role_of(tenant.workspace, other) == "member"


def test_a_plain_member_cannot_remove_the_admin(tenant):
    response = tenant.client_for(tenant.member).delete(
        members_url(tenant.workspace.pk, tenant.admin.pk)
    )

    assert_error(response, 403, "WORKSPACE_ADMIN_REQUIRED")
    assert role_of(tenant.workspace, tenant.admin) == "admin"


def test_a_member_leaves_by_removing_themselves(tenant):
    client = tenant.client_for(tenant.member)

    response = client.delete(members_url(tenant.workspace.pk, tenant.member.pk))

    assert response.status_code == 204
    assert role_of(tenant.workspace, tenant.member) is None
    assert AuditEvent.objects.get(action="member_removed").detail == {
        "role": "member",
        "left": True,
    }
    assert_error(client.get(members_url(tenant.workspace.pk)), 404, "NOT_FOUND")


def test_the_last_admin_can_neither_leave_nor_be_removed(tenant):
    second = team_newcomer(tenant)
    workspace_membership_ensure(
        workspace=tenant.workspace, user=second, role=WorkspaceMembership.Role.ADMIN
    )
    client = tenant.client_for(tenant.admin)
    assert client.delete(members_url(tenant.workspace.pk, second.pk)).status_code == 204

    leave = client.delete(members_url(tenant.workspace.pk, tenant.admin.pk))

    assert_error(leave, 409, "LAST_WORKSPACE_ADMIN")
    assert role_of(tenant.workspace, tenant.admin) == "admin"
    assert AuditEvent.objects.filter(action="member_removed").count() == 1


def test_removing_someone_who_is_not_a_member_is_404(tenant):
    newcomer = team_newcomer(tenant)

    response = tenant.client_for(tenant.admin).delete(members_url(tenant.workspace.pk, newcomer.pk))

    assert_error(response, 404, "NOT_FOUND")


def test_an_mcp_token_manages_no_workspace(tenant):
    _, raw = api_token_create(user=tenant.admin, team=tenant.team, name="mcp", scope="mcp")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    created = client.post(WORKSPACES_URL, {"name": "via mcp"}, format="json")
    removed = client.delete(members_url(tenant.workspace.pk, tenant.member.pk))

    assert_error(created, 403, "TOKEN_SCOPE_REFUSED")
    assert_error(removed, 403, "TOKEN_SCOPE_REFUSED")
    assert role_of(tenant.workspace, tenant.member) == "member"
    assert not Workspace.objects.filter(name="via mcp").exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["each removes the other", "both leave"])
def test_two_admins_at_once_leave_exactly_one_admin(make_tenant, how):
    tenant = make_tenant()
    second = team_newcomer(tenant)
    workspace_membership_ensure(
        workspace=tenant.workspace, user=second, role=WorkspaceMembership.Role.ADMIN
    )
    each_other = how == "each removes the other"
    first_target = second.pk if each_other else tenant.admin.pk
    second_target = tenant.admin.pk if each_other else second.pk

    results = run_concurrently(
        lambda: workspace_member_remove(
            workspace=tenant.workspace, actor=tenant.admin, user_id=first_target
        ),
        lambda: workspace_member_remove(
            workspace=tenant.workspace, actor=second, user_id=second_target
        ),
    )

    # The second to take the lock sees the first's removal: removed itself (not a member
    # any more) or now the only admin.
    loser = NotFound if each_other else LastWorkspaceAdmin
    assert sorted(type(result).__name__ for result in results) == sorted(
        ["NoneType", loser.__name__]
    )
    admins = WorkspaceMembership.objects.filter(workspace=tenant.workspace, role="admin")
    assert admins.count() == 1


# ---- roles ----------------------------------------------------------------------------------


def test_an_admin_makes_a_member_an_admin_and_back(tenant):
    client = tenant.client_for(tenant.admin)
    url = members_url(tenant.workspace.pk, tenant.member.pk)

    promoted = client.patch(url, {"role": "admin"}, format="json")
    assert promoted.status_code == 200
    assert promoted.json()["role"] == "admin"
    assert role_of(tenant.workspace, tenant.member) == "admin"

    demoted = client.patch(url, {"role": "member"}, format="json")
    assert demoted.json()["role"] == "member"
    assert role_of(tenant.workspace, tenant.member) == "member"
    assert [event.detail for event in AuditEvent.objects.filter(action="member_role_changed")] == [
        {"from": "member", "to": "admin"},
        {"from": "admin", "to": "member"},
    ]


def test_a_promoted_member_may_then_let_the_first_admin_leave(tenant):
    client = tenant.client_for(tenant.admin)
    client.patch(
        members_url(tenant.workspace.pk, tenant.member.pk), {"role": "admin"}, format="json"
    )

    response = client.delete(members_url(tenant.workspace.pk, tenant.admin.pk))

    assert response.status_code == 204
    assert role_of(tenant.workspace, tenant.member) == "admin"


def test_setting_the_role_a_member_has_changes_and_records_nothing(tenant):
    response = tenant.client_for(tenant.admin).patch(
        members_url(tenant.workspace.pk, tenant.member.pk), {"role": "member"}, format="json"
    )

    assert response.json()["role"] == "member"
    assert not AuditEvent.objects.filter(action="member_role_changed").exists()


def test_a_plain_member_changes_no_role_not_even_their_own(tenant):
    client = tenant.client_for(tenant.member)

    for user in (tenant.member, tenant.admin):
        response = client.patch(
            members_url(tenant.workspace.pk, user.pk), {"role": "admin"}, format="json"
        )
        assert_error(response, 403, "WORKSPACE_ADMIN_REQUIRED")
    assert role_of(tenant.workspace, tenant.member) == "member"
    assert role_of(tenant.workspace, tenant.admin) == "admin"


def test_the_last_admin_cannot_make_themselves_a_member(tenant):
    response = tenant.client_for(tenant.admin).patch(
        members_url(tenant.workspace.pk, tenant.admin.pk), {"role": "member"}, format="json"
    )

    assert_error(response, 409, "LAST_WORKSPACE_ADMIN")
    assert role_of(tenant.workspace, tenant.admin) == "admin"


@pytest.mark.parametrize("body", [{}, {"role": "owner"}, {"role": "admin", "extra": 1}])
def test_a_role_change_names_a_known_role_and_nothing_else(tenant, body):
    response = tenant.client_for(tenant.admin).patch(
        members_url(tenant.workspace.pk, tenant.member.pk), body, format="json"
    )

    assert_error(response, 400, "VALIDATION_FAILED")
    assert role_of(tenant.workspace, tenant.member) == "member"


def test_a_role_change_for_a_non_member_or_another_teams_workspace_is_404(make_tenant):
    tenant, other = make_tenant(), make_tenant()
    client = tenant.client_for(tenant.admin)

    not_member = client.patch(
        members_url(tenant.workspace.pk, team_newcomer(tenant).pk), {"role": "admin"}, format="json"
    )
    elsewhere = client.patch(
        members_url(other.workspace.pk, other.member.pk), {"role": "admin"}, format="json"
    )

    assert_error(not_member, 404, "NOT_FOUND")
    assert_error(elsewhere, 404, "NOT_FOUND")
    assert role_of(other.workspace, other.member) == "member"


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["each demotes the other", "both demote themselves"])
def test_two_admins_demoting_at_once_leave_exactly_one_admin(make_tenant, how):
    tenant = make_tenant()
    second = team_newcomer(tenant)
    workspace_membership_ensure(
        workspace=tenant.workspace, user=second, role=WorkspaceMembership.Role.ADMIN
    )
    each_other = how == "each demotes the other"
    first_target = second.pk if each_other else tenant.admin.pk
    second_target = tenant.admin.pk if each_other else second.pk

    results = run_concurrently(
        lambda: workspace_member_role_set(
            workspace=tenant.workspace, actor=tenant.admin, user_id=first_target, role="member"
        ),
        lambda: workspace_member_role_set(
            workspace=tenant.workspace, actor=second, user_id=second_target, role="member"
        ),
    )

    # The second to take the lock sees the first's change: no longer an admin, or now the
    # only one.
    loser = WorkspaceAdminRequired if each_other else LastWorkspaceAdmin
    assert sorted(type(result).__name__ for result in results) == sorted(
        ["WorkspaceMembership", loser.__name__]
    )
    admins = WorkspaceMembership.objects.filter(workspace=tenant.workspace, role="admin")
    assert admins.count() == 1


def test_removing_a_member_revokes_only_their_key_sessions_there(tenant):
    theirs = key_session_open(workspace=tenant.workspace, user=tenant.member)
    mine = key_session_open(workspace=tenant.workspace, user=tenant.admin)

    workspace_member_remove(
        workspace=tenant.workspace, actor=tenant.admin, user_id=tenant.member.pk
    )

    assert set(KeySession.objects.filter(revoked_at__isnull=False)) == {theirs}
    mine.refresh_from_db()
    assert not mine.is_revoked


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_an_add_racing_a_removal_from_the_team_leaves_no_membership(make_tenant):
    # given: an admin's add of a team member is written but not yet committed
    tenant = make_tenant()
    newcomer = team_newcomer(tenant)
    added, release = threading.Event(), threading.Event()

    def add() -> None:
        with transaction.atomic():
            workspace_member_add(
                workspace=tenant.workspace, actor=tenant.admin, user_id=newcomer.pk
            )
            added.set()
            release.wait(timeout=30)

    def remove() -> None:
        added.wait(timeout=30)
        team_member_remove(
            membership=TeamMembership.objects.get(team=tenant.team, user=newcomer),
            actor=tenant.admin,
        )

    def referee() -> None:
        # when: staff remove them from the team meanwhile, which waits for the add
        try:
            wait_until_a_backend_waits_on_a_lock(timeout=5)
        finally:
            release.set()

    results = run_concurrently(add, remove, referee)

    # then: the removal ends the membership the add made
    assert results == [None, None, None]
    assert not WorkspaceMembership.objects.filter(user=newcomer).exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("then", ["removed", "demoted"])
def test_removing_one_of_two_owners_while_the_other_is_removed_or_demoted_keeps_one(
    make_tenant, then
):
    # given: a team with two owners, one of whom staff are removing (not yet committed)
    tenant = make_tenant()
    TeamMembership.objects.filter(team=tenant.team).update(role=TeamMembership.Role.OWNER)
    first, second = TeamMembership.objects.filter(team=tenant.team).order_by("pk")
    removed, release = threading.Event(), threading.Event()

    def remove_first() -> None:
        with transaction.atomic():
            team_member_remove(membership=second, actor=tenant.admin)
            removed.set()
            release.wait(timeout=30)

    def change_second() -> None:
        # when: the other owner is removed or demoted meanwhile, which waits for it
        removed.wait(timeout=30)
        if then == "removed":
            team_member_remove(membership=first, actor=tenant.admin)
        else:
            team_membership_staff_role_set(membership=first, actor=tenant.admin, role="member")

    def referee() -> None:
        try:
            wait_until_a_backend_waits_on_a_lock(timeout=5)
        finally:
            release.set()

    results = run_concurrently(remove_first, change_second, referee)

    # then: the second sees the first's removal and is refused: the team keeps an owner
    assert isinstance(results[1], LastTeamOwner)
    assert results[::2] == [None, None]
    assert list(TeamMembership.objects.filter(team=tenant.team).values_list("role", flat=True)) == [
        "owner"
    ]
