"""`manage.py memory reconcile` on the configured store."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from memory.models import TenantSpaceUsage
from memory.spaces.quotas import store_get
from memory.tests.spaces.conftest import handle_of, store_write

pytestmark = pytest.mark.django_db


def reconcile() -> str:
    out = io.StringIO()
    call_command("memory", "reconcile", stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("store_name", ["database", "filesystem"])
def test_reconcile_prints_the_drift_of_each_counter_and_fixes_it(
    settings, tmp_path, team, store_name
):
    settings.MEMORY_STORE = store_name
    settings.DATA_DIR = tmp_path
    handle = handle_of(team)
    store = store_get()
    store_write(store, handle, "a.md", b"x" * 10, expected=0)
    if store_name == "database":
        TenantSpaceUsage.objects.filter(team=team).update(used_bytes=40)
    else:
        usage_file = tmp_path / "spaces" / "tenants" / str(team.pk) / "usage.json"
        usage_file.write_text('{"usedBytes": 40}')

    first = reconcile()
    second = reconcile()

    assert f"tenant:{team.pk}\tdrift 30\trecorded 40\tactual 10" in first
    assert f"{handle.id}\tdrift 0\trecorded 10\tactual 10" in first
    assert "1 fixed" in first
    assert "0 fixed" in second
    usage = store.usage(handle)
    assert (usage.used_bytes, usage.tenant_used_bytes) == (10, 10)
