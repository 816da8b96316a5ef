"""Fixtures of the memory app's tests."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

from memory.edits import parse_changes
from memory.models import Proposal
from memory.services import memory_proposal_create
from workspaces.services import workspace_key_ensure


@pytest.fixture(params=["database", "filesystem"])
def every_store(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path) -> str:
    """Run the test once on each memory space store, as MEMORY_STORE selects it (the
    filesystem store under this test's own DATA_DIR)."""
    settings.MEMORY_STORE = request.param
    settings.DATA_DIR = tmp_path
    return str(request.param)


def proposal_create(tenant, line: str, reason: str, *, base_version: int = 1) -> Proposal:
    """A proposal of the assistant adding `line` to the tenant's memory."""
    return memory_proposal_create(
        workspace=tenant.workspace,
        admission_id=uuid.uuid4(),
        changes=parse_changes([{"op": "add", "line": line}]),
        base_version=base_version,
        clear_generation=0,
        reason=reason,
        data_key=workspace_key_ensure(workspace=tenant.workspace),
    )
