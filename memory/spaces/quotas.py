"""The quotas a space write is checked against, and the store that holds the spaces.

Quotas are resolved when a write happens, never frozen into a space: changing
MEMORY_QUOTA_<VISIBILITY>_BYTES or MEMORY_QUOTA_TENANT_BYTES applies to every existing space
at its next write, and a team's override (set by staff, audited) replaces the tenant quota
for that team. 0 means no cap.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from memory.models import TenantSpaceUsage
from memory.spaces.database import DatabaseStore
from memory.spaces.filesystem import FilesystemStore
from memory.spaces.handle import SpaceHandle
from memory.spaces.store import MemoryStore, Quotas
from workspaces.models import AuditEvent, Team, User
from workspaces.services import audit_record
from workspaces.sql import fetch_one, table


def quotas_for(handle: SpaceHandle) -> Quotas:
    """The caps that apply to a write to `handle`'s space now. The global space has no
    tenant, so no tenant quota (0)."""
    space_bytes = settings.MEMORY_QUOTA_SPACE_BYTES[handle.visibility.value]
    if handle.tenant_id is None:
        return Quotas(space_bytes=space_bytes, tenant_bytes=0)
    return Quotas(
        space_bytes=space_bytes, tenant_bytes=tenant_quota_bytes(team_id=handle.tenant_id)
    )


def tenant_quota_bytes(*, team_id: int) -> int:
    """The team's quota over all its spaces: its override if staff set one, else the setting."""
    # SQL because it was measured: every space write asks it, and the ORM spent longer
    # building the query than the database answering it.
    row = fetch_one(
        f"SELECT quota_override_bytes FROM {table(TenantSpaceUsage)} WHERE team_id = %s",
        [team_id],
    )
    return tenant_quota_in_force(None if row is None else row[0])


def tenant_quota_in_force(override_bytes: int | None) -> int:
    """The tenant quota a team with this override (None: none) gets."""
    return settings.MEMORY_QUOTA_TENANT_BYTES if override_bytes is None else override_bytes


def space_tenant_quota_override_set(
    *, team: Team, quota_bytes: int | None, actor: User | None
) -> TenantSpaceUsage:
    """Set (or, with None, remove) the team's own quota over all its memory spaces, and
    audit the change from the previous value to the new one.

    The override lives on the team's space counter row, which this creates if the team has
    not written a space yet; the counter itself is not touched. A negative quota is refused
    by the row's constraint.
    """
    with transaction.atomic():
        TenantSpaceUsage.objects.bulk_create([TenantSpaceUsage(team=team)], ignore_conflicts=True)
        usage = TenantSpaceUsage.objects.select_for_update().get(team=team)
        previous = usage.quota_override_bytes
        usage.quota_override_bytes = quota_bytes
        usage.save(update_fields=["quota_override_bytes"])
        audit_record(
            actor=actor,
            action=AuditEvent.Action.SPACE_QUOTA_OVERRIDDEN,
            org_id=team.org_id,
            target_type="team",
            target_id=team.pk,
            detail={"from": previous, "to": quota_bytes},
        )
    return usage


def store_get() -> MemoryStore:
    """The store MEMORY_STORE names, read at each call so a test can switch it."""
    if settings.MEMORY_STORE == "filesystem":
        return FilesystemStore(root=settings.DATA_DIR / "spaces")
    return DatabaseStore()
