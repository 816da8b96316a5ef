"""The purge through a real Celery worker and broker (Redis), as deployed.

Runs where CI runs it: PostgreSQL and REDIS_URL set. The worker is a separate process on
the test database, so the test data is committed (transaction=True).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from automation.tasks import PURGE_TASK
from memory_project.celery import app as celery_app
from workspaces.models import Org
from workspaces.services import org_deletion_request

BROKER_DB = 12

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("REDIS_URL") or connection.vendor != "postgresql",
        reason="needs PostgreSQL and Redis (REDIS_URL); CI runs it",
    ),
    pytest.mark.django_db(transaction=True),
    # The test process is eager; the message goes to the real broker on purpose.
    pytest.mark.filterwarnings("ignore:task_always_eager has no effect on send_task"),
]


def broker_url() -> str:
    base = os.environ["REDIS_URL"].rsplit("/", 1)[0]
    return f"{base}/{BROKER_DB + int(os.environ.get('PYTEST_XDIST_WORKER', 'gw0')[2:] or 0)}"


def database_url() -> str:
    db = connection.settings_dict
    user, host, port = db["USER"] or "postgres", db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


def due_org(make_tenant) -> Org:
    org = make_tenant().org
    org_deletion_request(org=org, actor=None)
    Org.objects.filter(pk=org.pk).update(deletion_due_at=timezone.now() - timedelta(minutes=1))
    return org


def wait_until_gone(org: Org, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Org.objects.filter(pk=org.pk).exists():
            return
        time.sleep(0.2)
    raise AssertionError(f"org {org.pk} was not purged within {timeout} s")


@contextmanager
def celery_worker() -> Iterator[str]:
    """A real worker process on the test database and a Redis broker; yields the broker URL."""
    url = broker_url()
    redis.Redis.from_url(url).flushdb()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": url,
        "DATA_DIR": str(settings.DATA_DIR),
    }
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "memory_project",
            "worker",
            "--pool",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "WARNING",
        ],
        cwd=settings.BASE_DIR,
        env=env,
    )
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        connection.close()


def test_a_worker_catches_up_at_start_and_runs_the_scheduled_task(make_tenant):
    missed_overnight = due_org(make_tenant)
    untouched = make_tenant().org

    with celery_worker() as broker_url_in_use:
        # Nothing is sent: the worker's start-up catch-up sweep must find this org.
        wait_until_gone(missed_overnight)
        tonight = due_org(make_tenant)
        with celery_app.connection_for_write(broker_url_in_use) as broker:
            celery_app.send_task(PURGE_TASK, connection=broker)
        wait_until_gone(tonight)

    assert Org.objects.filter(pk=untouched.pk, status="active").exists()
