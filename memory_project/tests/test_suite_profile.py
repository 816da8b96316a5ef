"""How the suite itself is configured: properties must not depend on the machine's speed,
and the shared helpers fail rather than hand back a result they do not have."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, settings

from conftest import run_concurrently


def test_hypothesis_properties_have_no_deadline_so_a_loaded_machine_cannot_fail_them():
    # given: a property declared as memory/tests/test_edits.py declares its own
    declared = settings(max_examples=200)

    # then: neither it nor an undecorated property is timed, and none is failed for being slow
    assert settings().deadline is None
    assert declared.deadline is None
    assert HealthCheck.too_slow in declared.suppress_health_check
    assert declared.max_examples == 200
    assert settings().max_examples <= 100


def test_run_concurrently_fails_for_a_job_still_running_after_its_join():
    # given: a job that cannot finish until the test lets it
    release = threading.Event()

    def hung() -> str:
        release.wait()
        return "late"

    # when / then: it is reported, not returned as a result of None
    try:
        with pytest.raises(AssertionError, match=r"job\(s\) \[0\] still running"):
            run_concurrently(hung, timeout=0)
    finally:
        release.set()
