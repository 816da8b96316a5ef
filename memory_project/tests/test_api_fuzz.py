"""Schemathesis against the live schema: every operation, fuzzed with the credential of a real
member and that member's real objects. No answer is a 5xx, every error is in the one shape,
and every answer (status, content type, body) matches the schema served at /api/schema/.

Bounded and deterministic for CI: a fixed number of examples per operation, derandomized, no
example database.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis import Case
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memory_project.tests.conftest import TenantWorld
from memory_project.wsgi import application

EXAMPLES_PER_OPERATION = 10
# One of TRUSTED_ORIGINS: the Origin gate lets writes through, as for the web frame.
ORIGIN = "http://localhost:8000"


@pytest.fixture
def fuzz_world(make_world, wsgi_keeps_the_test_connection) -> TenantWorld:
    return make_world()


# Loaded from the running application at collection, as a client would fetch it: one test
# per operation. (schemathesis' fixture-based loader does not run on pytest 9.)
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


@schemathesis.serializer("application/gzip")
def gzip_body(ctx: Any, value: Any) -> bytes:
    """The memory import's body (an archive, `format: binary`): sent as generated, bytes or
    text, so the route meets what a client could send (the import refuses a non-archive)."""
    data = getattr(value, "data", value)  # schemathesis' Binary wraps its bytes
    return data if isinstance(data, bytes) else str(data).encode()


def error_in_the_one_shape(ctx: CheckContext, response: Any, case: Case) -> bool | None:
    """Every 4xx and 5xx body is {"error": {"code", "message", "detail"}}, whatever the
    schema says."""
    if response.status_code < 400:
        return None
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "detail"}, body
    assert isinstance(error["code"], str), body
    assert error["code"].isupper(), body
    assert isinstance(error["message"], str), body
    assert error["message"], body
    assert isinstance(error["detail"], dict), body
    return True


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_its_schema_says(case: Case, fuzz_world: TenantWorld) -> None:
    # The member's own objects: another tenant's are the tenancy matrix's subject.
    case.path_parameters = {
        name: str(fuzz_world.ids.get(name, value))
        for name, value in (case.path_parameters or {}).items()
    }
    case.call_and_validate(
        headers={"Authorization": fuzz_world.bearer, "Origin": ORIGIN},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
            error_in_the_one_shape,
        ],
    )
