"""Fixtures the workspaces app's admin tests share."""

import pytest


@pytest.fixture
def staff_client(client, tenant):
    tenant.admin.is_staff = tenant.admin.is_superuser = True
    tenant.admin.save(update_fields=["is_staff", "is_superuser"])
    client.force_login(tenant.admin)
    return client
