"""The turn reaper: every admitted turn ends, even when its task was lost.

A turn is left queued when its hand-off to the broker failed (an outage at admission), and
left running when its worker died mid-turn or its failure handler could not write. Nothing
else would ever end such a turn, and a resend with the same Idempotency-Key would replay it
as unfinished forever. Celery beat runs `automation.turn_reap` every minute (a data
migration stores the schedule, editable under Periodic tasks).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from automation.models import Turn
from automation.services import turn_enqueue

logger = logging.getLogger(__name__)

TURN_TIMED_OUT = "TURN_TIMED_OUT"
# A queued turn older than this has most likely lost its task; sending it again is safe,
# since a turn is claimed by a conditional update and a second delivery does nothing.
RESEND_AFTER = timedelta(seconds=60)
UNFINISHED = (Turn.State.QUEUED, Turn.State.RUNNING)


@dataclass(frozen=True)
class Reaped:
    failed: int
    resent: int


def turns_reap(*, now: datetime | None = None) -> Reaped:
    """Fail every unfinished turn past its deadline with TURN_TIMED_OUT, and send again
    the queued turns still within it whose task may have been lost.

    The deadline is the admission's expiry: past it the turn could no longer act on
    memory anyway. A turn that ends while this runs is left as it ended.
    """
    now = now or timezone.now()
    overdue = list(
        Turn.objects.filter(state__in=UNFINISHED, admission__expires_at__lte=now).values_list(
            "pk", flat=True
        )
    )
    # The state is re-checked by the UPDATE itself (no join, so PostgreSQL re-evaluates it
    # on a row that changed meanwhile): a turn finished since the read keeps its outcome.
    failed = Turn.objects.filter(pk__in=overdue, state__in=UNFINISHED).update(
        state=Turn.State.FAILED, finished_at=now, failure_code=TURN_TIMED_OUT
    )
    stalled = list(
        Turn.objects.filter(
            state=Turn.State.QUEUED,
            created_at__lte=now - RESEND_AFTER,
            admission__expires_at__gt=now,
        ).values_list("pk", flat=True)
    )
    for turn_id in stalled:
        turn_enqueue(turn_id=turn_id)
    if failed or stalled:
        logger.warning("turn reaper: %d turn(s) timed out, %d sent again", failed, len(stalled))
    return Reaped(failed=failed, resent=len(stalled))
