"""Celery tasks: thin wrappers that load ids and call the runtime or a service."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from automation import purge, runtime
from automation.services import TURN_TASK

PURGE_TASK = "automation.org_purge_sweep"


@shared_task(name=TURN_TASK, acks_late=True)
def turn_run(turn_id: str) -> None:
    # Idempotent: the runtime claims the turn with a conditional update first, so a
    # redelivered task finds it already claimed and does nothing.
    runtime.turn_run(turn_id=uuid.UUID(turn_id))


@shared_task(name=PURGE_TASK, acks_late=True)
def org_purge_sweep() -> list[int]:
    """The nightly org purge (scheduled by Celery beat; also run when a worker starts)."""
    return purge.org_purge_due()


@worker_ready.connect
def _purge_catch_up(sender: Any, **_: Any) -> None:
    # A night the scheduler missed (beat or workers down at 02:00) is caught up as soon
    # as a worker is back; the sweep is idempotent, so an extra run costs nothing.
    org_purge_sweep.delay()
