"""Reads of turns, bounded by their owner."""

from __future__ import annotations

import pytest

from automation import runtime
from automation.selectors import TurnProgress, turn_progress_get
from workspaces.errors import NotFound


def test_turn_progress_reads_the_turn_now_with_its_answer(assistant):
    admission = assistant.send("hello")
    runtime.turn_run(turn_id=admission.turn.pk)

    progress = turn_progress_get(turn_id=admission.turn.pk, owner=assistant.tenant.member)

    assert progress == TurnProgress(
        conversation_id=assistant.conversation.pk,
        admission_id=admission.pk,
        turn_id=admission.turn.pk,
        state="completed",
        answer=progress.answer,
        failure_code=None,
    )
    assert progress.answer


def test_another_persons_turn_is_not_found(assistant):
    admission = assistant.send("hello")

    with pytest.raises(NotFound):
        turn_progress_get(turn_id=admission.turn.pk, owner=assistant.tenant.admin)
