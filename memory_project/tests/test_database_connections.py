"""Persistent database connections survive the server dropping them (a restart, a failover)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.test import RequestFactory

from conftest import backend_terminate
from workspaces.services import api_token_create


def wsgi_get(path: str, token: str) -> tuple[str, Any]:
    """One request through Django's real WSGI handler, which (unlike the test client) runs
    the connection housekeeping of a request's start and end."""
    environ = RequestFactory().get(path, HTTP_AUTHORIZATION=f"Bearer {token}").environ
    started: list[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
        started.append(status)
        return lambda data: None

    body = b"".join(WSGIHandler()(environ, start_response))
    return started[0], body


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="only PostgreSQL connections persist between requests (SQLite's CONN_MAX_AGE is 0)",
)
@pytest.mark.django_db(transaction=True)
def test_the_request_after_its_pooled_connection_was_killed_still_succeeds(tenant):
    # given: a persistent connection that served one request
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="pooled")
    status, _ = wsgi_get("/api/v1/workspaces", token)
    assert status.startswith("200")
    pid = connection.connection.info.backend_pid

    # when: the server drops that connection between two requests
    backend_terminate(pid)
    status, body = wsgi_get("/api/v1/workspaces", token)

    # then: the next request is served, on a new connection
    assert status.startswith("200"), body
    assert str(tenant.workspace.pk).encode() in body
    assert connection.connection.info.backend_pid != pid
