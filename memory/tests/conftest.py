"""Fixtures of the memory app's tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django.fixtures import Settings


@pytest.fixture(params=["database", "filesystem"])
def every_store(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path) -> str:
    """Run the test once on each memory space store, as MEMORY_STORE selects it (the
    filesystem store under this test's own DATA_DIR)."""
    settings.MEMORY_STORE = request.param
    settings.DATA_DIR = tmp_path
    return str(request.param)
