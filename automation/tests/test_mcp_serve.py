"""`make mcp` (manage.py mcp_serve) as deployed: a real process, with the production
environment the README recommends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def mcp_serve(port: int, **environ: str) -> Iterator[tuple[int | None, list[str]]]:
    """Start `manage.py mcp_serve`; once uvicorn says it serves, or the process has ended,
    yields its exit status (None while it runs) and the lines it logged (stdout and stderr)
    until then, to which the rest is added when the block ends and the process is stopped."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=settings.BASE_DIR,
        env={**os.environ, **environ},
        stderr=subprocess.STDOUT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    logged: list[str] = []
    try:
        for line in process.stdout:
            logged.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            process.wait(timeout=30)
        yield process.poll(), logged
    finally:
        process.terminate()
        process.wait(timeout=30)
        logged.extend(process.stdout)
        process.stdout.close()


def test_mcp_serve_serves_when_web_concurrency_is_set_for_the_web_app():
    # given: WEB_CONCURRENCY set, as the README recommends for the web app in production
    port = free_port()

    # when: the MCP server starts in that environment
    with mcp_serve(port, WEB_CONCURRENCY="3") as (exit_status, logged):
        assert exit_status is None, f"mcp_serve exited with {exit_status}: {logged}"
        response = httpx2.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=10)

    # then: it serves, and refuses a request without a credential in the API's shape
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "AUTHENTICATION_REQUIRED"


def test_mcp_serve_logs_requests_without_their_query_string():
    """A query string can carry a document path; the web app's logs leave it out too
    (memory_project/log_filters.py)."""
    port = free_port()
    with mcp_serve(port) as (exit_status, logged):
        assert exit_status is None, f"mcp_serve exited with {exit_status}: {logged}"
        response = httpx2.post(f"http://127.0.0.1:{port}/mcp?path=notes/secret-plan.md", json={})

    assert response.status_code == 401
    access = [line for line in logged if '"POST /mcp' in line]
    assert len(access) == 1
    assert '"POST /mcp?[redacted] HTTP/1.1" 401' in access[0]
    assert "secret-plan" not in "".join(logged)


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_a_usage_error_before_anything_is_served(port):
    # uvicorn met it at bind(), after start-up, as an OverflowError's traceback.
    with pytest.raises(CommandError, match="--port: a TCP port is a whole number from 1 to 65535"):
        call_command("mcp_serve", "--port", port)
