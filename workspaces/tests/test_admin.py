from __future__ import annotations

import pytest
from django.urls import reverse

from workspaces.models import ApiToken
from workspaces.services import api_token_create

MODELS = ["org", "team", "teammembership", "workspace", "workspacemembership", "apitoken", "user"]


@pytest.fixture
def staff_client(client, tenant):
    tenant.admin.is_staff = tenant.admin.is_superuser = True
    tenant.admin.save(update_fields=["is_staff", "is_superuser"])
    client.force_login(tenant.admin)
    return client


@pytest.mark.parametrize("model", MODELS)
def test_changelist_renders_with_a_bounded_number_of_queries(
    staff_client, make_tenant, model, django_assert_max_num_queries
):
    for _ in range(3):
        extra = make_tenant()
        api_token_create(user=extra.member, team=extra.team, name="x")

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
