"""Writers of memory against retiring actions that commit while a request is in flight.

A request checks its credential and its org when it arrives; a retiring action may commit
after that check and before the request writes. The write must then either commit first
(and the action wait for it) or be refused with the code a request arriving after the
action gets. Races run on PostgreSQL with real concurrent connections (TESTING.md); the
ones that need no second connection run on SQLite too.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from automation import purge as purge_module
from automation.purge import org_purge
from conftest import (
    Interleaving,
    assert_error,
    postgres_only,
    run_concurrently,
)
from memory import services as memory_services
from memory.models import MEMORY_PATH
from memory.services import memory_clear, memory_save
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory.spaces.services import SpaceWriter, space_document_write
from memory.spaces.store import DocumentMeta
from workspaces.errors import CredentialOwnerInactive, OrgPendingDeletion, VersionConflict
from workspaces.models import File, FileVersion, KeySession, Org, Workspace
from workspaces.services import (
    key_session_open,
    org_deletion_request,
    org_quota_set,
    org_restore,
    user_deactivate,
)


def revisions(workspace: Workspace) -> int:
    return FileVersion.objects.filter(file__workspace=workspace, file__path=MEMORY_PATH).count()


# --- the org deletion request against a person's Save ------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("content", ["- likes tea\n", "- likes green tea, a larger text\n"])
def test_a_save_that_authenticated_before_an_org_deletion_request_is_refused(
    tenant, memory_api, memory_revision, monkeypatch, content
):
    # Same size (the statement alone, in autocommit) and a new size (charged, a transaction)
    # under a quota, so that both shapes of the write are judged.
    org_quota_set(org=tenant.org, memory_quota_bytes=1_000_000, actor=None)
    write = memory_services.memory_write

    def deletion_lands_after_the_check(**kwargs: Any) -> Any:
        org_deletion_request(org=Org.objects.get(pk=tenant.org.pk), actor=tenant.admin)
        return write(**kwargs)

    monkeypatch.setattr(memory_services, "memory_write", deletion_lands_after_the_check)

    response = memory_api.save(content, base=1)

    assert_error(response, 403, "ORG_PENDING_DELETION")
    assert revisions(tenant.workspace) == 1


@pytest.mark.django_db(transaction=True)
def test_a_first_write_after_an_org_deletion_request_is_refused(tenant):
    org_deletion_request(org=tenant.org, actor=tenant.admin)

    with pytest.raises(OrgPendingDeletion):
        memory_save(workspace=tenant.workspace, author=tenant.member, base_version=0, content="x\n")

    assert not File.objects.filter(workspace=tenant.workspace).exists()


@pytest.mark.django_db(transaction=True)
def test_a_save_after_an_org_deletion_request_is_refused_by_its_write(tenant, memory_revision):
    org_deletion_request(org=tenant.org, actor=tenant.admin)

    with pytest.raises(OrgPendingDeletion):
        memory_save(workspace=tenant.workspace, author=tenant.member, base_version=1, content="y\n")


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("content", ["- likes tea\n", "- likes green tea, a larger text\n"])
def test_an_org_deletion_request_waits_for_a_save_in_flight(tenant, memory_revision, content):
    org_quota_set(org=tenant.org, memory_quota_bytes=1_000_000, actor=None)
    interleaving = Interleaving()

    saved, requested, waited = run_concurrently(
        interleaving.held_in_its_transaction(
            lambda: memory_save(
                workspace=tenant.workspace, author=tenant.member, base_version=1, content=content
            )
        ),
        interleaving.once_held(lambda: org_deletion_request(org=tenant.org, actor=tenant.admin)),
        interleaving.referee,
    )

    assert waited is None, waited  # the request really waited for the Save's lock
    assert isinstance(saved, FileVersion), saved
    assert isinstance(requested, Org), requested
    assert requested.status == Org.Status.PENDING_DELETION
    assert revisions(tenant.workspace) == 2


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_saves_clears_and_org_deletion_requests_race_without_deadlock(tenant, memory_revision):
    """Many rounds of a Save, a Clear (policy row first) and a deletion request at once:
    each write either commits before the request or is refused as pending deletion."""
    org_quota_set(org=tenant.org, memory_quota_bytes=1_000_000, actor=None)
    for round_ in range(25):
        _save_clear_and_deletion_request(tenant, content=f"- round {round_}\n" * (1 + round_ % 3))
        org_restore(org=Org.objects.get(pk=tenant.org.pk), actor=None)


def _save_clear_and_deletion_request(tenant, *, content: str) -> None:
    workspace = tenant.workspace
    version = File.objects.get(workspace=workspace, path=MEMORY_PATH).current_version
    before = revisions(workspace)

    save, clear, requested = run_concurrently(
        lambda: memory_save(
            workspace=workspace, author=tenant.member, base_version=version, content=content
        ),
        lambda: memory_clear(workspace=workspace, author=tenant.member, base_version=version),
        lambda: org_deletion_request(org=tenant.org, actor=tenant.admin),
    )

    assert isinstance(requested, Org), requested
    for result in (save, clear):
        assert isinstance(result, FileVersion | OrgPendingDeletion | VersionConflict), result
    written = [result for result in (save, clear) if isinstance(result, FileVersion)]
    assert len(written) <= 1
    assert revisions(workspace) == before + len(written)


# --- the org deletion request against a space document's write (every writer's seam) -----


def space_write(tenant, body: bytes = b"# A\n", base: int = 0) -> DocumentMeta:
    return space_document_write(
        handle=SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk),
        path="a.md",
        body=body,
        expected_revision=base,
        writer=SpaceWriter.of_user(tenant.member, tenant_id=tenant.team.pk),
    )


@pytest.mark.django_db(transaction=True)
def test_a_space_write_after_an_org_deletion_request_is_refused(tenant, every_store):
    space_write(tenant)  # the team's space key exists: the write itself must refuse
    org_deletion_request(org=tenant.org, actor=tenant.admin)

    with pytest.raises(OrgPendingDeletion):
        space_write(tenant, b"# B\n", base=1)

    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)
    stored = store_get().read(handle, "a.md")
    assert stored is not None
    assert stored.meta.revision == 1


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_an_org_deletion_request_waits_for_a_space_write_in_flight(tenant, every_store):
    interleaving = Interleaving()

    written, requested, waited = run_concurrently(
        interleaving.held_in_its_transaction(lambda: space_write(tenant)),
        interleaving.once_held(lambda: org_deletion_request(org=tenant.org, actor=tenant.admin)),
        interleaving.referee,
    )

    assert waited is None, waited
    assert isinstance(written, DocumentMeta), written
    assert isinstance(requested, Org), requested


# --- the purge against a write that authenticated before the org was retired -----------


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_write_arriving_during_the_purge_neither_lands_nor_stalls_it(
    tenant, memory_revision, monkeypatch
):
    org_deletion_request(org=tenant.org, actor=tenant.admin)
    Org.objects.filter(pk=tenant.org.pk).update(deletion_due_at=timezone.now())
    purge_step = purge_module._purge_step
    written: list[Any] = []

    def a_save_lands_after_the_revisions_went(step, org_id, history):
        if step.label == "workspaces.File":
            # The request authenticated before the deletion request; it writes now.
            written.extend(
                run_concurrently(
                    lambda: memory_save(
                        workspace=tenant.workspace,
                        author=tenant.member,
                        base_version=1,
                        content="- late\n",
                    )
                )
            )
        return purge_step(step, org_id, history)

    monkeypatch.setattr(purge_module, "_purge_step", a_save_lands_after_the_revisions_went)

    assert org_purge(org_id=tenant.org.pk) is True
    assert isinstance(written[0], OrgPendingDeletion), written
    assert not Org.objects.filter(pk=tenant.org.pk).exists()


# --- a user deactivation against a key session being opened -----------------------------


@pytest.mark.django_db(transaction=True)
def test_a_key_session_opened_after_the_person_was_deactivated_is_refused(tenant, admin_user):
    member = tenant.member  # as the request authenticated it, still active
    user_deactivate(user=member, actor=admin_user)

    with pytest.raises(CredentialOwnerInactive):
        key_session_open(workspace=tenant.workspace, user=member)

    assert not KeySession.objects.filter(user=member, revoked_at__isnull=True).exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_deactivation_waits_for_a_key_session_being_opened_and_revokes_it(tenant, admin_user):
    interleaving = Interleaving()

    opened, deactivated, waited = run_concurrently(
        interleaving.held_in_its_transaction(
            lambda: key_session_open(workspace=tenant.workspace, user=tenant.member)
        ),
        interleaving.once_held(lambda: user_deactivate(user=tenant.member, actor=admin_user)),
        interleaving.referee,
    )

    assert waited is None, waited  # the deactivation really waited for the open's lock
    assert isinstance(opened, KeySession), opened
    assert deactivated is None, deactivated
    assert KeySession.objects.get(pk=opened.pk).revoked_at is not None


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_key_session_opens_and_deactivations_race_without_a_live_session_left(
    make_tenant, admin_user
):
    for _ in range(15):
        _two_opens_and_a_deactivation(make_tenant(), admin_user)


def _two_opens_and_a_deactivation(tenant, actor) -> None:
    member = tenant.member

    results = run_concurrently(
        lambda: key_session_open(workspace=tenant.workspace, user=member),
        lambda: key_session_open(workspace=tenant.workspace, user=member),
        lambda: user_deactivate(user=member, actor=actor),
    )

    for result in results[:2]:
        assert isinstance(result, KeySession | CredentialOwnerInactive), result
    assert results[2] is None, results[2]
    assert not KeySession.objects.filter(user=member, revoked_at__isnull=True).exists()
