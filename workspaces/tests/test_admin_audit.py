"""Every write staff make in the admin goes through a service and leaves an audit event."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from workspaces.errors import ValidationFailed
from workspaces.models import (
    ApiToken,
    AuditEvent,
    KeySession,
    Org,
    Team,
    User,
)
from workspaces.services import api_token_create, key_session_open, org_create, team_rename


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("pk"))


def changes() -> list[str]:
    """The actions audited, but the tenant's making and the staff member's own sign-in."""
    made = ["workspace_created", "sign_in_succeeded"]
    return list(AuditEvent.objects.exclude(action__in=made).values_list("action", flat=True))


# ---- orgs and teams ---------------------------------------------------------------------------


def test_adding_an_org_in_the_admin_is_audited(staff_client, tenant):
    response = staff_client.post(reverse("admin:workspaces_org_add"), {"name": "Acme"})

    assert response.status_code == 302
    org = Org.objects.get(name="Acme")
    [event] = events("org_created")
    assert (event.actor, event.org_id) == (tenant.admin, org.pk)
    assert event.detail == {"name": "Acme"}


def test_renaming_an_org_in_the_admin_is_audited(staff_client, tenant):
    url = reverse("admin:workspaces_org_change", args=[tenant.org.pk])

    response = staff_client.post(url, {"name": "Renamed"})

    assert response.status_code == 302
    tenant.org.refresh_from_db()
    assert tenant.org.name == "Renamed"
    [event] = events("org_renamed")
    assert (event.actor, event.org_id) == (tenant.admin, tenant.org.pk)
    assert event.detail["to"] == "Renamed"


def test_adding_a_team_in_the_admin_is_audited(staff_client, tenant):
    response = staff_client.post(
        reverse("admin:workspaces_team_add"),
        {"org": tenant.org.pk, "name": "Platform", "auto_memory_default": ""},
    )

    assert response.status_code == 302
    team = Team.objects.get(org=tenant.org, name="Platform")
    [event] = events("team_created")
    assert (event.actor, event.org_id) == (tenant.admin, tenant.org.pk)
    assert (event.target_type, event.target_id) == ("team", str(team.pk))


def test_renaming_a_team_in_the_admin_is_audited(staff_client, tenant):
    url = reverse("admin:workspaces_team_change", args=[tenant.team.pk])
    before = tenant.team.name

    response = staff_client.post(url, {"name": "Renamed", "auto_memory_default": ""})

    assert response.status_code == 302
    tenant.team.refresh_from_db()
    assert tenant.team.name == "Renamed"
    [event] = events("team_renamed")
    assert (event.target_type, event.target_id) == ("team", str(tenant.team.pk))
    assert event.detail == {"from": before, "to": "Renamed"}


@pytest.mark.parametrize("name", ["Re\u200bsearch", "  ", "\u202etxt.exe"])
def test_an_org_or_team_name_the_api_refuses_is_refused_in_the_admin(staff_client, tenant, name):
    org = staff_client.post(reverse("admin:workspaces_org_add"), {"name": name})
    team = staff_client.post(
        reverse("admin:workspaces_team_change", args=[tenant.team.pk]),
        {"name": name, "auto_memory_default": ""},
    )

    assert (org.status_code, team.status_code) == (200, 200)  # the form, with its errors
    assert not Org.objects.exclude(pk=tenant.org.pk).exists()
    assert Team.objects.get(pk=tenant.team.pk).name == tenant.team.name
    assert changes() == []


# ---- people -----------------------------------------------------------------------------------


def user_form(user: User, **data):
    joined = timezone.localtime(user.date_joined)
    return {
        "username": user.username,
        "email": user.email,
        "date_joined_0": joined.strftime("%Y-%m-%d"),
        "date_joined_1": joined.strftime("%H:%M:%S"),
        **data,
    }


def test_making_someone_staff_or_superuser_or_granting_groups_and_permissions_is_audited(
    staff_client, tenant
):
    group = Group.objects.create(name="support")
    permission = Permission.objects.get(codename="view_org")
    member = tenant.member

    response = staff_client.post(
        reverse("admin:workspaces_user_change", args=[member.pk]),
        user_form(
            member,
            is_active="on",
            is_staff="on",
            is_superuser="on",
            groups=[group.pk],
            user_permissions=[permission.pk],
        ),
    )

    assert response.status_code == 302
    [event] = events("user_access_changed")
    assert event.actor == tenant.admin
    assert (event.target_type, event.target_id) == ("user", str(member.pk))
    assert event.detail == {
        "isStaff": {"from": False, "to": True},
        "isSuperuser": {"from": False, "to": True},
        "groupsAdded": ["support"],
        "permissionsAdded": ["workspaces.view_org"],
    }


def test_saving_a_person_unchanged_records_nothing(staff_client, tenant):
    response = staff_client.post(
        reverse("admin:workspaces_user_change", args=[tenant.member.pk]),
        user_form(tenant.member, is_active="on"),
    )

    assert response.status_code == 302
    assert changes() == []


def test_creating_a_person_in_the_admin_is_audited(staff_client, tenant):
    response = staff_client.post(
        reverse("admin:workspaces_user_add"),
        {
            "username": "ada",
            "password1": "a-long-pass-phrase-1",
            "password2": "a-long-pass-phrase-1",
        },
    )

    assert response.status_code == 302
    ada = User.objects.get(username="ada")
    [event] = events("user_created")
    assert event.actor == tenant.admin
    assert (event.target_type, event.target_id) == ("user", str(ada.pk))


def test_deactivating_and_reactivating_someone_is_audited_and_brings_back_no_credential(
    staff_client, tenant, django_capture_on_commit_callbacks
):
    member = tenant.member
    session = key_session_open(workspace=tenant.workspace, user=member)
    token, secret = api_token_create(user=member, team=tenant.team, name="cli")
    url = reverse("admin:workspaces_user_change", args=[member.pk])

    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(url, user_form(member))  # unticked: deactivated
        member.refresh_from_db()
        response = staff_client.post(url, user_form(member, is_active="on"))

    assert response.status_code == 302
    member.refresh_from_db()
    assert member.is_active
    assert [e.detail for e in events("user_active_changed")] == [
        {"isActive": False},
        {"isActive": True},
    ]
    session.refresh_from_db()
    assert session.is_revoked
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/workspaces").status_code == 401
    assert KeySession.objects.filter(user=member, revoked_at__isnull=True).count() == 0


@pytest.mark.parametrize("name", ["Re\u200bsearch", " ", "\u202etxt.exe"])
def test_the_services_refuse_a_name_the_api_refuses_whichever_writer_sends_it(tenant, name):
    """The admin's form refuses these first; a command or a shell has no form."""
    with pytest.raises(ValidationFailed) as refused:
        org_create(name=name, actor=tenant.admin)
    with pytest.raises(ValidationFailed):
        team_rename(team=tenant.team, name=name, actor=tenant.admin)

    assert list(refused.value.detail["fields"]) == ["name"]
    assert list(Org.objects.all()) == [tenant.org]
    assert Team.objects.get(pk=tenant.team.pk).name == tenant.team.name
    assert changes() == []
