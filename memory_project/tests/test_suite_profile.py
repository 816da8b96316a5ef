"""How the suite itself is configured: properties must not depend on the machine's speed."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_hypothesis_properties_have_no_deadline_so_a_loaded_machine_cannot_fail_them():
    # given: a property declared as memory/tests/test_edits.py declares its own
    declared = settings(max_examples=200)

    # then: neither it nor an undecorated property is timed, and none is failed for being slow
    assert settings().deadline is None
    assert declared.deadline is None
    assert HealthCheck.too_slow in declared.suppress_health_check
    assert declared.max_examples == 200
    assert settings().max_examples <= 100
