"""Every named constraint of the space models refuses a bad row past Python."""

from __future__ import annotations

import pytest

from conftest import violates
from memory.models import MemorySpace, SpaceDocument, SpaceKey, TenantSpaceUsage

pytestmark = pytest.mark.django_db


@pytest.fixture
def space(team) -> MemorySpace:
    return MemorySpace.objects.create(
        handle_id="v1:org:1:::::n", visibility="org", name="n", tenant=team
    )


def document(space: MemorySpace, **fields) -> SpaceDocument:
    values = {
        "space": space,
        "path": "a.md",
        "revision": 1,
        "size": 1,
        "body_ciphertext": b"c",
        "checksum_ciphertext": b"c",
        "updated_by": "user:1",
        **fields,
    }
    return SpaceDocument.objects.create(**values)


def test_a_handle_names_one_space(space, team):
    violates(
        "memory_memoryspace_handle_unique",
        lambda: MemorySpace.objects.create(
            handle_id=space.handle_id, visibility="org", name="n", tenant=team
        ),
    )


def test_a_space_has_a_known_visibility(space):
    violates(
        "memory_memoryspace_visibility_valid",
        lambda: MemorySpace.objects.filter(pk=space.pk).update(visibility="public"),
    )


def test_only_the_global_space_has_no_tenant(space, team):
    violates(
        "memory_memoryspace_tenant_iff_not_global",
        lambda: MemorySpace.objects.filter(pk=space.pk).update(tenant=None),
    )
    violates(
        "memory_memoryspace_tenant_iff_not_global",
        lambda: MemorySpace.objects.create(
            handle_id="v1:global::::::g", visibility="global", name="g", tenant=team
        ),
    )


def test_only_private_and_user_spaces_have_a_user(space, team):
    violates(
        "memory_memoryspace_user_iff_user_bound",
        lambda: MemorySpace.objects.filter(pk=space.pk).update(user_id=3),
    )
    violates(
        "memory_memoryspace_user_iff_user_bound",
        lambda: MemorySpace.objects.create(
            handle_id="v1:user:1::::::n", visibility="user", name="n", tenant=team
        ),
    )


def test_a_space_counter_never_goes_negative(space):
    violates(
        "memory_memoryspace_used_non_negative",
        lambda: MemorySpace.objects.filter(pk=space.pk).update(used_bytes=-1),
    )


def test_a_space_deleted_revision_is_never_negative(space):
    violates(
        "memory_memoryspace_deleted_revision_non_negative",
        lambda: MemorySpace.objects.filter(pk=space.pk).update(deleted_revision_max=-1),
    )


def test_a_path_is_one_document_of_a_space(space):
    document(space)

    violates("memory_spacedocument_path_unique_in_space", lambda: document(space))


def test_a_document_revision_starts_at_one(space):
    violates("memory_spacedocument_revision_positive", lambda: document(space, revision=0))


def test_a_document_size_is_not_negative(space):
    violates("memory_spacedocument_size_non_negative", lambda: document(space, size=-1))


def test_a_document_names_who_wrote_it(space):
    violates("memory_spacedocument_updated_by_present", lambda: document(space, updated_by=""))


def test_a_tenant_counter_never_goes_negative(team):
    TenantSpaceUsage.objects.create(team=team)

    violates(
        "memory_tenantspaceusage_used_non_negative",
        lambda: TenantSpaceUsage.objects.filter(team=team).update(used_bytes=-1),
    )


def test_a_quota_override_is_not_negative(team):
    TenantSpaceUsage.objects.create(team=team)

    violates(
        "memory_tenantspaceusage_quota_override_non_negative",
        lambda: TenantSpaceUsage.objects.filter(team=team).update(quota_override_bytes=-1),
    )


@pytest.mark.parametrize("tenant_is_global", [False, True])
def test_a_tenant_and_the_global_space_have_one_key_each(team, tenant_is_global):
    tenant = None if tenant_is_global else team

    def key() -> SpaceKey:
        return SpaceKey.objects.create(
            tenant=tenant, wrapped_key=b"k" * 32, wrapping_key_id="0" * 16
        )

    key()
    violates("memory_spacekey_tenant_unique", key)


def test_a_key_records_which_deployment_key_wrapped_it(team):
    violates(
        "memory_spacekey_wrapping_key_id_valid",
        lambda: SpaceKey.objects.create(tenant=team, wrapped_key=b"k", wrapping_key_id="short"),
    )
