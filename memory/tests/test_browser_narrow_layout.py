"""Every page of the web frame at a phone's 375 px: nothing widens the page past the screen,
so nothing needs a sideways scroll to be read, whatever names people chose."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from memory.documents import ActorKind, DocumentActor, document_write
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.services import SpaceWriter, space_document_write
from workspaces.models import WorkspaceMembership
from workspaces.tests.browser import NARROW, open_page, requires_chromium, screenshot, sign_in

pytestmark = [requires_chromium, pytest.mark.django_db(transaction=True)]

# A name with no place to break a line: an identifier, a pasted hash, a path without spaces.
UNBROKEN = "quarterly_planning_" * 8
LONG_PATH = f"{'averyverylongfoldername' * 4}/{UNBROKEN}.md"


def pages(workspace_id: int) -> list[str]:
    return [
        "/workspaces/",
        f"/workspaces/{workspace_id}/memory/",
        f"/workspaces/{workspace_id}/changes/",
        f"/workspaces/{workspace_id}/notes/",
        f"/workspaces/{workspace_id}/notes/edit/?path={quote(LONG_PATH)}",
        f"/workspaces/{workspace_id}/search/?q=planning",
        f"/workspaces/{workspace_id}/settings/",
        "/team/memory/",
        "/team/bots/",
    ]


def overflowing(context, paths: list[str], shot: str) -> dict[str, int]:
    """The pages wider than the screen, with their width."""
    wider = {}
    for number, path in enumerate(paths):
        page = open_page(context, path)
        page.wait_for_load_state("networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > NARROW["width"]:
            wider[path] = width
            screenshot(page, f"{shot}-{number}")
        page.close()
    return wider


def test_every_page_fits_a_narrow_screen(new_context, live_server, tenant):
    context = new_context(viewport=NARROW)
    sign_in(context, live_server, tenant.admin)

    paths = [path for path in pages(tenant.workspace.pk) if "path=" not in path]

    assert overflowing(context, paths, "narrow") == {}


def test_very_long_names_wrap_instead_of_widening_the_page(new_context, live_server, tenant):
    tenant.workspace.name = UNBROKEN
    tenant.workspace.save(update_fields=["name"])
    membership = WorkspaceMembership.objects.get(workspace=tenant.workspace, user=tenant.admin)
    document_write(
        actor=DocumentActor.of_member(membership, ActorKind.PERSON),
        raw_path=LONG_PATH,
        content=f"{UNBROKEN}\n",
        base_version=0,
    )
    space_document_write(
        handle=SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk),
        path=LONG_PATH,
        body=f"# {UNBROKEN}\n".encode(),
        expected_revision=0,
        writer=SpaceWriter.of_user(tenant.admin, tenant_id=tenant.team.pk),
    )
    context = new_context(viewport=NARROW)
    sign_in(context, live_server, tenant.admin)

    assert overflowing(context, pages(tenant.workspace.pk), "narrow-long-names") == {}

    page = open_page(context, "/team/memory/")
    page.get_by_role("button", name=LONG_PATH).click()
    page.get_by_role("heading", name=LONG_PATH).wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
    screenshot(page, "narrow-long-names-space-document")
