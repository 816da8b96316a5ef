"""Every turn ends: on a fresh connection when its own was killed, through the reaper when
its task was lost, and a resend of a turn that failed says so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery import current_app
from django.db import OperationalError, connection
from django_celery_beat.models import PeriodicTask
from kombu.exceptions import OperationalError as BrokerUnreachable

from automation import runtime, services
from automation.models import Admission, Turn
from automation.providers import ModelReply
from automation.reaper import TURN_TIMED_OUT, turns_reap
from automation.services import TURN_TASK
from automation.tasks import REAP_TASK
from conftest import backend_terminate


def after_the_deadline(turn: Turn):
    return turn.admission.expires_at + timedelta(seconds=1)


def test_the_reaper_fails_unfinished_turns_past_their_deadline_and_no_other(assistant):
    # given: a turn left queued, one left running, one still running in time, one completed
    queued = assistant.send("one").turn
    running = assistant.send("two").turn
    in_time = assistant.send("three").turn
    completed = assistant.send("four").turn
    Turn.objects.filter(pk__in=[running.pk, in_time.pk]).update(state="running")
    Turn.objects.filter(pk=completed.pk).update(state="completed")
    deadline = after_the_deadline(queued)
    Admission.objects.filter(pk=in_time.admission_id).update(
        expires_at=deadline + timedelta(minutes=5)
    )

    # when
    reaped = turns_reap(now=deadline)

    # then
    states = dict(Turn.objects.values_list("pk", "state"))
    codes = dict(Turn.objects.values_list("pk", "failure_code"))
    assert reaped.failed == 2
    assert (states[queued.pk], codes[queued.pk]) == ("failed", TURN_TIMED_OUT)
    assert (states[running.pk], codes[running.pk]) == ("failed", TURN_TIMED_OUT)
    assert (states[in_time.pk], codes[in_time.pk]) == ("running", "")
    assert (states[completed.pk], codes[completed.pk]) == ("completed", "")


def test_a_resend_of_a_turn_the_reaper_failed_says_it_failed(assistant):
    # given: a turn whose task was lost (its enqueue never ran), past its deadline
    client = assistant.tenant.client_for(assistant.tenant.member)
    first = assistant.post_message(client, idempotency_key="lost-1")
    turn = Turn.objects.select_related("admission").get(pk=first.json()["turn"]["id"])
    assert first.json()["turn"]["state"] == "queued"
    turns_reap(now=after_the_deadline(turn))

    # when: the client resends it with the same key
    again = assistant.post_message(client, idempotency_key="lost-1")

    # then: the replay says the turn failed and why; it is not run again
    assert again.status_code == 202
    assert again.json()["replayed"] is True
    assert again.json()["turn"]["state"] == "failed"
    assert again.json()["turn"]["failureCode"] == TURN_TIMED_OUT
    turn.refresh_from_db()
    assert (turn.state, turn.messages.count()) == ("failed", 1)


def test_a_turn_whose_enqueue_failed_is_sent_again_by_the_reaper_and_runs(
    assistant, monkeypatch, django_capture_on_commit_callbacks
):
    # given: the broker refuses the hand-off when the message is admitted
    client = assistant.tenant.client_for(assistant.tenant.member)
    task = current_app.tasks[TURN_TASK]

    def unreachable(*args, **kwargs):
        raise BrokerUnreachable("the broker is unreachable")

    with monkeypatch.context() as broker_down:
        broker_down.setattr(task, "delay", unreachable)
        with django_capture_on_commit_callbacks(execute=True):
            response = assistant.post_message(client, idempotency_key="outage-1")
    assert response.status_code == 202
    turn = Turn.objects.select_related("admission").get(pk=response.json()["turn"]["id"])
    assert turn.state == "queued"

    # when: the reaper runs once the broker is back
    reaped = turns_reap(now=turn.created_at + timedelta(seconds=61))

    # then: the turn was sent again and ran to its answer
    turn.refresh_from_db()
    assert reaped.resent == 1
    assert turn.state == "completed"


def test_the_reaper_is_scheduled_every_minute_in_the_database(db):
    task = PeriodicTask.objects.select_related("interval").get(task=REAP_TASK)

    assert task.enabled
    assert (task.interval.every, task.interval.period) == (60, "seconds")
    assert REAP_TASK in current_app.tasks


def test_a_turn_task_is_acknowledged_late_and_redelivered_if_its_worker_is_lost():
    task = current_app.tasks[TURN_TASK]

    assert task.acks_late is True
    assert task.reject_on_worker_lost is True


class KillsItsOwnConnection:
    """A model that answers, but meanwhile the turn's database backend is killed."""

    def complete(self, **_):
        backend_terminate(connection.connection.info.backend_pid)
        return ModelReply(text="Noted.", tool_calls=())


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="kills a PostgreSQL backend with pg_terminate_backend; CI runs it on PostgreSQL",
)
@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_database_backend_was_killed_mid_turn_still_ends_failed(
    assistant, monkeypatch
):
    # given: an admitted turn, handed to a worker rather than run at commit
    monkeypatch.setattr(services, "turn_enqueue", lambda *, turn_id: None)
    admission = assistant.send("hello")

    # when: its backend is killed between the model call and the answer's write
    with pytest.raises(OperationalError):
        runtime.turn_run(turn_id=admission.turn.pk, provider=KillsItsOwnConnection())

    # then: the failure was written on a new connection
    turn = Turn.objects.get(pk=admission.turn.pk)
    assert (turn.state, turn.failure_code) == ("failed", "INTERNAL_ERROR")
    assert turn.finished_at is not None
