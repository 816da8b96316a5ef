"""Memory spaces in the admin: metadata only, and the team quota through the audited
service."""

from __future__ import annotations

import pytest
from django.urls import reverse

from memory.models import SpaceDocument, TenantSpaceUsage
from memory.spaces.database import DatabaseStore
from memory.spaces.quotas import quotas_for
from memory.tests.spaces.conftest import handle_of, store_write
from workspaces.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_staff_set_a_team_override_in_the_admin_through_the_audited_service(admin_client, team):
    response = admin_client.post(
        reverse("admin:memory_tenantspaceusage_add"),
        {"team": team.pk, "quota_override_bytes": 4096},
    )

    assert response.status_code == 302, response.content
    assert TenantSpaceUsage.objects.get(team=team).quota_override_bytes == 4096
    assert AuditEvent.objects.get(action="space_quota_overridden").detail == {
        "from": None,
        "to": 4096,
    }


def test_space_and_document_pages_never_show_a_body(admin_client, team):
    handle = handle_of(team)
    store = DatabaseStore()
    marker = "HERON-93b1-admin-marker"
    store_write(store, handle, "notes/a.md", marker.encode(), expected=0, quotas=quotas_for(handle))
    document = SpaceDocument.objects.get()

    pages = [
        admin_client.get(reverse("admin:memory_memoryspace_changelist")),
        admin_client.get(reverse("admin:memory_memoryspace_change", args=[document.space_id])),
        admin_client.get(reverse("admin:memory_spacedocument_changelist")),
        admin_client.get(reverse("admin:memory_spacedocument_change", args=[document.pk])),
        admin_client.get(reverse("admin:memory_tenantspaceusage_changelist")),
        admin_client.get(reverse("admin:memory_spacekey_changelist")),
    ]

    for page in pages:
        assert page.status_code == 200
        assert marker not in page.content.decode()
    assert "notes/a.md" in pages[3].content.decode()
    assert str(len(marker)) in pages[4].content.decode()
