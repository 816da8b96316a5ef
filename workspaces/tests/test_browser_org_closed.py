"""A closed org in a real browser: its owner signs in and reads when the purge is due."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from workspaces.models import TeamMembership
from workspaces.services import org_deletion_request, team_membership_ensure
from workspaces.tests.browser import open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]


def test_the_owner_of_a_closed_org_reads_when_its_purge_is_due(new_context, live_server, tenant):
    team_membership_ensure(team=tenant.team, user=tenant.admin)
    TeamMembership.objects.filter(team=tenant.team, user=tenant.admin).update(
        role=TeamMembership.Role.OWNER
    )
    due = org_deletion_request(org=tenant.org, actor=None).deletion_due_at
    assert due is not None
    context = new_context()
    sign_in(context, live_server, tenant.admin)

    page = open_page(context, f"{live_server.url}/workspaces/")

    notice = page.get_by_role("status").filter(has_text="This organisation is closed")
    expect(notice).to_contain_text(f"first nightly purge after {due:%-d %B %Y, %H:%M} UTC")
    expect(page.locator("#purge-due-at")).to_have_attribute("datetime", due.isoformat())
    expect(page.get_by_role("button", name="Create workspace")).to_have_count(0)
    screenshot(page, "org-closed-purge-due")
