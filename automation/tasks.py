"""Celery tasks: thin wrappers that load ids and call the runtime or a service."""

from __future__ import annotations

import uuid

from celery import shared_task

from automation import runtime
from automation.services import TURN_TASK


@shared_task(name=TURN_TASK, acks_late=True)
def turn_run(turn_id: str) -> None:
    # Idempotent: the runtime claims the turn with a conditional update first, so a
    # redelivered task finds it already claimed and does nothing.
    runtime.turn_run(turn_id=uuid.UUID(turn_id))
