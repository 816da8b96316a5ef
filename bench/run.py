"""Run every benchmark module in bench/ against a fresh PostgreSQL database.

Each module named bench_*.py exposes `run() -> list[dict]`. This script recreates the
benchmark database, migrates it, runs the modules in name order, prints one line per
result and writes them all to bench/results.json.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

BENCH_DIR = Path(__file__).resolve().parent
ROOT_DIR = BENCH_DIR.parent
RESULTS_PATH = BENCH_DIR / "results.json"
# BENCH_DATABASE names another, for two runs at once on one server.
BENCH_DATABASE = os.environ.get("BENCH_DATABASE", "").strip() or "memory_bench"
DEFAULT_DATABASE_URL = f"postgres://postgres@127.0.0.1:5432/{BENCH_DATABASE}"
# The database the drop and create are issued from (never the one being recreated).
ADMIN_DATABASE = "test"
RESULT_KEYS = (
    "name",
    "unit",
    "baseline",
    "figure",
    "ratio",
    "target",
    "meets_target",
    "notes",
)


def database_url() -> str:
    """The server of DATABASE_URL when it is PostgreSQL, else the local one; always the
    dedicated `memory_bench` database, which each run drops and recreates (so a
    developer's own database is never the one dropped)."""
    url = os.environ.get("DATABASE_URL", "").strip()
    parts = urlsplit(url)
    if parts.scheme in {"postgres", "postgresql"}:
        # Still a URL: it becomes Django's DATABASE_URL, which takes no conninfo string.
        return urlunsplit(parts._replace(path=f"/{BENCH_DATABASE}"))
    return DEFAULT_DATABASE_URL


def database_recreate(url: str) -> str:
    """Drop and create the database `url` names; returns its name."""
    name = conninfo_to_dict(url).get("dbname")
    if not name:
        raise SystemExit(f"bench: DATABASE_URL names no database: {url}")
    if name in {ADMIN_DATABASE, "postgres", "template0", "template1"}:
        raise SystemExit(f"bench: refusing to drop the {name!r} database")
    admin = make_conninfo(url, dbname=ADMIN_DATABASE)
    with psycopg.connect(admin, autocommit=True) as conn:
        # FORCE ends any session still open on it (for example an interrupted run).
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(str(name))))
    return str(name)


def modules_discover(only: list[str]) -> list[str]:
    """Every bench_*.py module, in name order; with `only`, those whose name holds one of
    its words (`run.py archive`)."""
    names = sorted(path.stem for path in BENCH_DIR.glob("bench_*.py"))
    return [name for name in names if not only or any(word in name for word in only)]


def result_check(module: str, result: dict[str, Any]) -> dict[str, Any]:
    missing = [key for key in RESULT_KEYS if key not in result]
    if missing:
        raise SystemExit(f"bench: {module} returned a result without {', '.join(missing)}")
    return {key: result[key] for key in RESULT_KEYS}


def result_line(result: dict[str, Any]) -> str:
    verdict = "met" if result["meets_target"] else "NOT met"
    return (
        f"{result['name']}: baseline {result['baseline']:.3f}, "
        f"figure {result['figure']:.3f} ({result['unit']}), "
        f"ratio {result['ratio']:.3f} (target {result['target']}: {verdict})"
    )


def main() -> int:
    started = time.perf_counter()
    url = database_url()
    name = database_recreate(url)
    print(f"bench: database {name} recreated", flush=True)

    scratch: str | None = None
    if not os.environ.get("DATA_DIR", "").strip():
        # Secrets (SECRET_KEY, CRYPTOGRAPHY_KEY) are generated here, never in var/.
        scratch = tempfile.mkdtemp(prefix="memory-bench-")
        os.environ["DATA_DIR"] = scratch
    os.environ["DATABASE_URL"] = url
    # This process keeps the in-process cache: a benchmark that needs Redis starts its own
    # (bench/servers.py), so no run ever writes to a Redis it did not start.
    os.environ.pop("REDIS_URL", None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "memory_project.settings"
    for path in (str(ROOT_DIR), str(BENCH_DIR)):
        if path not in sys.path:
            sys.path.insert(0, path)

    import django

    django.setup()

    from django.conf import settings

    # The benchmarks request no static file, so nothing is collected (collectstatic takes
    # about 20 s and 33 MB here); whitenoise only needs the directory to exist, in this
    # process and in the servers the HTTP benchmarks start with the same DATA_DIR.
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    # Celery logs every eager turn's success at INFO, a line per turn; a failing task is
    # logged at ERROR (and raises, eager tasks propagating), so it is still shown.
    logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
    # The benchmarks stand in for the agent runtime, which recalls and captures while it
    # holds the turn: an admitted turn is not run here (the eager worker would run it to its
    # end at once, and a turn that has ended ends its delivery credential with it).
    import automation.services

    automation.services.turn_enqueue = lambda *, turn_id: None

    from django.core.management import call_command
    from django.db import connections

    results: list[dict[str, Any]] = []
    try:
        call_command("migrate", verbosity=0)
        print(f"bench: migrated in {time.perf_counter() - started:.1f} s", flush=True)
        for module_name in modules_discover(sys.argv[1:]):
            module = importlib.import_module(module_name)
            for result in module.run():
                checked = result_check(module_name, result)
                results.append(checked)
                print(result_line(checked), flush=True)
    finally:
        connections.close_all()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    RESULTS_PATH.write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"bench: {len(results)} result(s) written to {RESULTS_PATH.relative_to(ROOT_DIR)} "
        f"in {time.perf_counter() - started:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
