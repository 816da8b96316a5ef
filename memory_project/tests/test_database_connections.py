"""Persistent database connections survive the server dropping them (a restart, a failover)."""

from __future__ import annotations

import select
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper as DjangoDatabaseWrapper
from django.test import RequestFactory

from conftest import backend_terminate, run_concurrently
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


persistent_connections_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="only PostgreSQL connections persist between requests (SQLite's CONN_MAX_AGE is 0)",
)


@persistent_connections_only
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


@pytest.fixture
def round_trip_checks(monkeypatch):
    """Counts the health checks that went to the server (Django's `SELECT 1`)."""
    sent: list[int] = []
    django_check = DjangoDatabaseWrapper.is_usable

    def counted(self: DjangoDatabaseWrapper) -> bool:
        sent.append(self.connection.info.backend_pid)
        return django_check(self)

    monkeypatch.setattr(DjangoDatabaseWrapper, "is_usable", counted)
    return sent


@persistent_connections_only
@pytest.mark.django_db(transaction=True)
def test_a_quiet_pooled_connection_is_reused_without_a_round_trip(tenant, round_trip_checks):
    # given: a persistent connection that served one request
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="pooled")
    assert wsgi_get("/api/v1/workspaces", token)[0].startswith("200")
    pid = connection.connection.info.backend_pid

    # when: the next request comes, the server having said nothing meanwhile
    status, _ = wsgi_get("/api/v1/workspaces", token)

    # then: it is served on the same connection, whose health check sent nothing
    assert status.startswith("200")
    assert connection.connection.info.backend_pid == pid
    assert round_trip_checks == []


@persistent_connections_only
@pytest.mark.django_db(transaction=True)
def test_a_pooled_connection_the_server_spoke_on_is_checked_and_kept(tenant, round_trip_checks):
    # given: a persistent connection listening on a channel, which another connection
    # notifies between two requests (so there is something to read, and it is alive)
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="pooled")
    assert wsgi_get("/api/v1/workspaces", token)[0].startswith("200")
    with connection.cursor() as cursor:
        cursor.execute("LISTEN health_check_test")
    pid = connection.connection.info.backend_pid

    def notify() -> None:
        with connection.cursor() as cursor:
            cursor.execute("NOTIFY health_check_test")

    run_concurrently(notify)
    # The listener's backend sends the notification on its own, a moment later.
    assert select.select([connection.connection.fileno()], [], [], 10)[0]

    # when: the next request comes
    status, _ = wsgi_get("/api/v1/workspaces", token)

    # then: the check went to the server, found the connection alive, and it was kept
    assert status.startswith("200")
    assert round_trip_checks == [pid]
    assert connection.connection.info.backend_pid == pid
