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
    yields its exit status (None while it runs) and the lines it logged until then."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=settings.BASE_DIR,
        env={**os.environ, **environ},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    logged: list[str] = []
    try:
        for line in process.stderr:
            logged.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            process.wait(timeout=30)
        yield process.poll(), logged
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stderr.close()


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


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_a_usage_error_before_anything_is_served(port):
    # uvicorn met it at bind(), after start-up, as an OverflowError's traceback.
    with pytest.raises(CommandError, match="--port: a TCP port is a whole number from 1 to 65535"):
        call_command("mcp_serve", "--port", port)
