"""Celery tasks: thin wrappers that load ids and call the runtime or a service."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from automation import purge, reaper, runtime
from automation.services import TURN_TASK
from memory.spaces.services import space_private_expire

PURGE_TASK = "automation.org_purge_sweep"
REAP_TASK = "automation.turn_reap"
PRIVATE_EXPIRY_TASK = "automation.space_private_expire"


# Acknowledged only once run, and redelivered if the worker process dies holding it, so a
# turn whose worker was lost before claiming it still runs.
@shared_task(name=TURN_TASK, acks_late=True, reject_on_worker_lost=True)
def turn_run(turn_id: str) -> None:
    # Idempotent: the runtime claims the turn with a conditional update first, so a
    # redelivered task finds it already claimed and does nothing. A turn whose worker died
    # after claiming it is ended by the reaper at its deadline.
    runtime.turn_run(turn_id=uuid.UUID(turn_id))


@shared_task(name=REAP_TASK, acks_late=True)
def turn_reap() -> dict[str, int]:
    """Fail turns past their deadline and resend stalled queued ones (Celery beat, every minute)."""
    reaped = reaper.turns_reap()
    return {"failed": reaped.failed, "resent": reaped.resent}


@shared_task(name=PURGE_TASK, acks_late=True)
def org_purge_sweep() -> list[int]:
    """The nightly org purge (scheduled by Celery beat; also run when a worker starts)."""
    return purge.org_purge_due()


@shared_task(name=PRIVATE_EXPIRY_TASK, acks_late=True)
def space_private_expire_sweep() -> int:
    """The nightly expiry of private memory spaces (Celery beat, 02:00 UTC); answers how
    many were removed."""
    return len(space_private_expire())


@worker_ready.connect
def _purge_catch_up(sender: Any, **_: Any) -> None:
    # A night the scheduler missed (beat or workers down at 02:00) is caught up as soon
    # as a worker is back; the sweep is idempotent, so an extra run costs nothing.
    org_purge_sweep.delay()
