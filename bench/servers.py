"""The servers the HTTP benchmarks start for themselves: a Redis of their own and gunicorn.

Not a benchmark itself (`bench/run.py` runs only `bench_*.py`). Every Redis a benchmark
writes is one it started here, on a free port, with no persistence, and stopped on the way
out: a benchmark never touches the machine's own Redis or anyone else's.
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import redis

ROOT_DIR = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT_DIR / "bench"
GUNICORN = ROOT_DIR / ".venv" / "bin" / "gunicorn"
START_SECONDS = 30.0
STOP_SECONDS = 15.0
LOG_TAIL_BYTES = 4000
# What the probe asks for while the server starts: without a credential it answers 401.
PROBE_PATH = "/api/v1/ping"
# gunicorn closes a keep-alive connection idle for 2 s by default; on a loaded machine a
# block of another side can last that long, and a reconnect would then be timed.
KEEP_ALIVE_SECONDS = 60


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command: state is field 3, utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds(pid: int) -> dict[int, float]:
    """CPU time of each live child of a process (gunicorn's workers)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    found = {}
    for child in map(int, children):
        try:
            found[child] = process_cpu_seconds(child)
        except FileNotFoundError:
            continue
    return found


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def redis_server() -> Iterator[str]:
    """A fresh redis-server on a free port of 127.0.0.1, without persistence; yields its URL.
    Always stopped (and its directory removed) on the way out."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(
            "bench: redis-server is not installed; the HTTP benchmarks start their own"
        )
    port = free_port()
    directory = tempfile.mkdtemp(prefix="memory-bench-redis-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"bench: redis-server on port {port} did not start"
                    ) from None
                time.sleep(0.02)
        client.close()
        yield url
    finally:
        _stop(process)
        shutil.rmtree(directory, ignore_errors=True)


def _log_tail(log: IO[bytes]) -> str:
    log.flush()
    log.seek(0, os.SEEK_END)
    size = log.tell()
    log.seek(max(0, size - LOG_TAIL_BYTES))
    return log.read().decode(errors="replace")


@dataclass
class Server:
    label: str
    port: int
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def fail(self, message: str) -> RuntimeError:
        return RuntimeError(
            f"{self.label}: {message}\n--- server log (tail) ---\n{_log_tail(self.log)}"
        )

    def cpu_seconds(self) -> float:
        """CPU time of gunicorn's master and its workers."""
        return process_cpu_seconds(self.process.pid) + sum(self.worker_cpu_seconds().values())

    def worker_cpu_seconds(self) -> dict[int, float]:
        return children_cpu_seconds(self.process.pid)


def _server_wait(server: Server) -> None:
    """Until the server answers HTTP (an unauthenticated ping gets 401)."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise server.fail(f"gunicorn exited with {server.process.returncode} at start")
        probe = http.client.HTTPConnection("127.0.0.1", server.port, timeout=2)
        try:
            probe.request("GET", PROBE_PATH)
            status = probe.getresponse().status
        except OSError:
            time.sleep(0.05)
            continue
        finally:
            probe.close()
        if status != 401:
            raise server.fail(f"unauthenticated ping answered {status}, expected 401")
        return
    raise server.fail(f"gunicorn did not answer within {START_SECONDS:.0f} s")


@contextmanager
def gunicorn_server(
    *, label: str, redis_url: str, workers: int, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """gunicorn with the product's own configuration (memory_project/gunicorn_conf.py) and
    `workers` processes, on a free port, serving the bench's URLconf (bench/server_urls.py:
    the product's routes plus a bare Django view). Always terminated on the way out."""
    port = free_port()
    server_env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="server_settings",
        REDIS_URL=redis_url,
        # As deployed, whatever the shell says: DEBUG would also record every query.
        DEBUG="0",
        WEB_CONCURRENCY=str(workers),
        **(env or {}),
    )
    command = [
        str(GUNICORN),
        "-c",
        "python:memory_project.gunicorn_conf",
        "memory_project.wsgi",
        "--pythonpath",
        str(BENCH_DIR),
        "--bind",
        f"127.0.0.1:{port}",
        "--keep-alive",
        str(KEEP_ALIVE_SECONDS),
        # No access log: writing a line per request would be timed too.
        "--access-logfile",
        "/dev/null",
    ]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            command, cwd=ROOT_DIR, env=server_env, stdout=log, stderr=subprocess.STDOUT
        )
        server = Server(label=label, port=port, process=process, log=log)
        try:
            _server_wait(server)
            yield server
        finally:
            _stop(process)
