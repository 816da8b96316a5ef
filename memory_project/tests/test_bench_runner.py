"""`make bench` (bench/run.py) hands the benchmark database to Django as DATABASE_URL."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import dj_database_url
import pytest
from django.conf import settings


def bench_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", settings.BASE_DIR / "bench/run.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_bench_keeps_a_postgres_database_url_a_url_naming_the_bench_database(monkeypatch, scheme):
    # given: DATABASE_URL names a PostgreSQL server (and someone's own database on it)
    monkeypatch.setenv("DATABASE_URL", f"{scheme}://bencher:pw@10.0.0.5:6543/mine?sslmode=disable")

    # when: the runner picks the database it will recreate and give Django
    url = bench_runner().database_url()

    # then: Django's settings can read it, on the same server, in the bench database
    parsed = dj_database_url.parse(url)
    assert parsed["ENGINE"] == "django.db.backends.postgresql"
    assert (parsed["NAME"], parsed["USER"], parsed["PASSWORD"]) == ("memory_bench", "bencher", "pw")
    assert (parsed["HOST"], parsed["PORT"]) == ("10.0.0.5", 6543)
    assert parsed["OPTIONS"] == {"sslmode": "disable"}


def test_bench_without_a_postgres_database_url_uses_the_local_server(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "sqlite:////tmp/embedded.sqlite3")

    parsed = dj_database_url.parse(bench_runner().database_url())

    assert (parsed["NAME"], parsed["HOST"], parsed["PORT"]) == ("memory_bench", "127.0.0.1", 5432)
