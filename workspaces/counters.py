"""The byte counters a quota bounds (a team's document storage, a memory space's and its
tenant's bytes), moved one way: a conditional UPDATE of the counter's row.

Call inside the transaction of the change the counter accounts for, after the rows that
change locks: a counter's row is the last lock a change takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import F, Model, QuerySet
from django.db.models.functions import Greatest

from workspaces.errors import TenantQuotaExceeded


def counter_move(
    rows: QuerySet[Any], *, delta: int, quota: int, also: Mapping[str, Any] | None = None
) -> bool:
    """One conditional UPDATE of the one counter row `rows` selects: growth applies only
    while the counter stays within `quota` (0: no cap), so concurrent writers cannot pass
    it together; a shrink always applies, never below zero. `also` sets other columns of
    the row in the same UPDATE. False when no row was updated (there is none, or the quota
    refuses)."""
    also = also or {}
    if delta == 0:
        return rows.update(**also) == 1 if also else rows.exists()
    if delta < 0:
        return rows.update(used_bytes=Greatest(F("used_bytes") + delta, 0), **also) == 1
    within_quota = rows if quota == 0 else rows.filter(used_bytes__lte=quota - delta)
    return within_quota.update(used_bytes=F("used_bytes") + delta, **also) == 1


def tenant_counter_charge(*, rows: QuerySet[Any], new_row: Model, delta: int, quota: int) -> None:
    """Move a team's counter (`rows` selects its row; `new_row` is that row unsaved, for a
    team that has none yet) by `delta`, or raise TenantQuotaExceeded with the bytes used,
    the delta and the quota; the caller's transaction then rolls back."""
    if counter_move(rows, delta=delta, quota=quota):
        return
    # Either the team has no row yet or the quota refuses. Make sure the row exists (a
    # concurrent first write making it too waits on its key, then finds it), and ask once
    # more: then only the quota can refuse.
    type(new_row)._default_manager.bulk_create([new_row], ignore_conflicts=True)
    if counter_move(rows, delta=delta, quota=quota):
        return
    used = rows.values_list("used_bytes", flat=True).get()
    raise TenantQuotaExceeded(usedBytes=used, deltaBytes=delta, quotaBytes=quota)
