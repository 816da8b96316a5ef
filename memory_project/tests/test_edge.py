"""The edge: what reaches Django through gunicorn, and how both refuse what they refuse.

Most tests here run against a real gunicorn on a loopback port, started with the same
config file as `make run` (memory_project/gunicorn_conf.py), because the defects they guard
were only visible there: chunked bodies, gunicorn's own HTML pages, its access log.
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection

from memory.selectors import memory_current_get
from memory.spaces.handle import SpaceHandle, Visibility
from memory.spaces.quotas import store_get
from memory_project.log_filters import RedactQueryStrings
from memory_project.middleware import MAX_HEADER_BYTES, MAX_URI_BYTES
from memory_project.tests.test_error_shape import assert_shape
from memory_project.wsgi import application
from workspaces.models import File, FileVersion
from workspaces.services import api_token_create

# The server's body limit, small so an over-size chunked body stays cheap to send. The
# document ceiling must fit it (settings.py checks the two against each other).
SERVER_BODY_LIMIT = 64 * 1024
ON_POSTGRES = connection.vendor == "postgresql"


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def error(self) -> dict[str, Any]:
        """The error of a JSON error body in the API's shape."""
        assert self.headers["Content-Type"] == "application/json", self.body
        document = json.loads(self.body)
        assert set(document) == {"error"}
        assert set(document["error"]) == {"code", "message", "detail"}
        return document["error"]


@dataclass
class Gunicorn:
    port: int
    access_log: Path
    error_log: Path

    def send(self, head: bytes, body: bytes = b"") -> Reply:
        """Send one raw HTTP/1.1 request (`head` without its blank line) and read the reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            sock.sendall(head + b"\r\nConnection: close\r\n\r\n" + body)
            response = http.client.HTTPResponse(sock)
            response.begin()
            return Reply(response.status, response.headers, response.read())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _database_url(tmp: Path) -> str:
    if not ON_POSTGRES:
        # The embedded test database lives in this process's memory; the edge needs none.
        return f"sqlite:///{tmp / 'edge.sqlite3'}"
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture(scope="module")
def gunicorn(django_db_setup, tmp_path_factory) -> Iterator[Gunicorn]:
    """gunicorn with the project's config on a free loopback port, serving the test database."""
    with gunicorn_serving(tmp_path_factory.mktemp("gunicorn")) as server:
        yield server


@contextmanager
def gunicorn_serving(tmp: Path) -> Iterator[Gunicorn]:
    """A gunicorn with the project's config (one worker, its threads) started for the block."""
    server = Gunicorn(_free_port(), tmp / "access.log", tmp / "error.log")
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(tmp),
        "REQUEST_MAX_BODY_BYTES": str(SERVER_BODY_LIMIT),
        "MEMORY_MAX_DOCUMENT_BYTES": "8192",
        "MEMORY_RECALL_MAX_BYTES": "8192",
    }
    # Its own in-process cache and eager tasks: nothing shared with the suite's Redis.
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "WEB_CONCURRENCY"):
        env.pop(name, None)
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "gunicorn", "-c", "python:memory_project.gunicorn_conf"),
            *("memory_project.wsgi", "--bind", f"127.0.0.1:{server.port}", "--workers", "1"),
            *("--access-logfile", str(server.access_log)),
            *("--error-logfile", str(server.error_log)),
        ],
        cwd=django_settings.BASE_DIR,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, server.error_log.read_text()
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not start listening"
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=30)


def request_head(method: str, target: str, *headers: str) -> bytes:
    return "\r\n".join([f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", *headers]).encode()


def chunked(body: bytes, size: int = 4096) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


# --- Transfer-Encoding: chunked --------------------------------------------------------


@pytest.mark.skipif(not ON_POSTGRES, reason="gunicorn runs in another process: needs PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_a_chunked_save_through_gunicorn_saves_the_body(gunicorn, make_tenant):
    tenant = make_tenant()
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="edge")
    body = json.dumps({"content": "- prefers chunked\n"}).encode()

    reply = gunicorn.send(
        request_head(
            "PUT",
            f"/api/v1/workspaces/{tenant.workspace.pk}/memory",
            f"Authorization: Bearer {token}",
            "Content-Type: application/json",
            "X-Base-Version: 0",
            "Transfer-Encoding: chunked",
        ),
        chunked(body, size=7),
    )

    assert reply.status == 200, reply.body
    assert json.loads(reply.body)["version"] == 1
    memory = memory_current_get(workspace=tenant.workspace)
    assert (memory.content, memory.version) == ("- prefers chunked\n", 1)


def test_a_chunked_body_over_the_limit_through_gunicorn_is_413(gunicorn):
    # Refused before any credential is read: no tenant is needed.
    body = b'{"content": "' + b"x" * SERVER_BODY_LIMIT + b'"}'

    reply = gunicorn.send(
        request_head(
            "PUT",
            "/api/v1/workspaces/1/memory",
            "Content-Type: application/json",
            "Transfer-Encoding: chunked",
        ),
        chunked(body),
    )

    error = reply.error()
    assert (reply.status, error["code"]) == (413, "REQUEST_TOO_LARGE")
    assert error["detail"] == {
        "limitBytes": SERVER_BODY_LIMIT,
        "receivedBytes": SERVER_BODY_LIMIT + 1,
    }


def _wsgi_call(environ: dict[str, Any]) -> tuple[str, bytes]:
    started: list[str] = []
    response = application(environ, lambda status, headers, exc_info=None: started.append(status))
    body = b"".join(response)
    response.close()
    return started[0], body


def _wsgi_environ(tenant, body: io.BytesIO, **extra: Any) -> dict[str, Any]:
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="edge")
    return {
        "REQUEST_METHOD": "PUT",
        "PATH_INFO": f"/api/v1/workspaces/{tenant.workspace.pk}/memory",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "HTTP_X_BASE_VERSION": "0",
        "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input": body,
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        **extra,
    }


@pytest.mark.usefixtures("wsgi_keeps_the_test_connection")
def test_a_chunked_body_over_the_limit_is_read_no_further_than_the_limit(tenant, settings):
    settings.REQUEST_MAX_BODY_BYTES = SERVER_BODY_LIMIT
    stream = io.BytesIO(b'{"content": "' + b"x" * (20 * 1024 * 1024) + b'"}')

    status, body = _wsgi_call(_wsgi_environ(tenant, stream, **{"wsgi.input_terminated": True}))

    assert status.startswith("413")
    assert json.loads(body)["error"]["code"] == "REQUEST_TOO_LARGE"
    assert stream.tell() == SERVER_BODY_LIMIT + 1
    assert not File.objects.filter(workspace=tenant.workspace).exists()


@pytest.mark.usefixtures("wsgi_keeps_the_test_connection")
def test_a_chunked_body_a_server_did_not_unframe_is_411_not_empty(tenant):
    # Without wsgi.input_terminated the end of the stream is unknown (runserver): refused.
    stream = io.BytesIO(b'{"content": "kept"}')

    status, body = _wsgi_call(_wsgi_environ(tenant, stream))

    assert status.startswith("411")
    assert json.loads(body)["error"]["code"] == "LENGTH_REQUIRED"
    assert not FileVersion.objects.filter(file__workspace=tenant.workspace).exists()


@pytest.mark.usefixtures("wsgi_keeps_the_test_connection")
@pytest.mark.parametrize(
    ("declared", "sent"),
    [(23, b'{"content": "cut here"} and the rest'), (4096, b'{"content": "cut here"}')],
    ids=["longer-than-declared", "shorter-than-declared"],
)
def test_a_body_that_does_not_match_its_content_length_is_refused_not_cut(tenant, declared, sent):
    environ = _wsgi_environ(tenant, io.BytesIO(sent), CONTENT_LENGTH=str(declared))
    del environ["HTTP_TRANSFER_ENCODING"]

    status, body = _wsgi_call(environ)

    assert status.startswith("400")
    assert json.loads(body)["error"]["code"] == "MALFORMED_REQUEST"
    assert not FileVersion.objects.filter(file__workspace=tenant.workspace).exists()


@pytest.mark.skipif(not ON_POSTGRES, reason="gunicorn runs in another process: needs PostgreSQL")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("size", "status"), [(8192, 200), (8193, 422)])
def test_a_chunked_space_document_through_gunicorn_is_stored_whole_or_refused(
    gunicorn, make_tenant, size, status
):
    # The server's document ceiling is 8192 bytes (the gunicorn fixture).
    tenant = make_tenant()
    _, token = api_token_create(user=tenant.member, team=tenant.team, name="edge")
    body = b"# Chunked\n" + b"x" * (size - 10)
    handle = SpaceHandle(visibility=Visibility.ORG, name="notes", tenant_id=tenant.team.pk)

    reply = gunicorn.send(
        request_head(
            "PUT",
            "/api/v1/memory/doc?visibility=org&name=notes&path=chunked.md",
            f"Authorization: Bearer {token}",
            "Content-Type: text/markdown; charset=utf-8",
            "X-Base-Version: 0",
            "Transfer-Encoding: chunked",
        ),
        chunked(body, size=1000),
    )

    assert reply.status == status, reply.body
    stored = store_get().read(handle, "chunked.md")
    if status == 200:
        assert stored is not None
        assert stored.body == body
    else:
        assert reply.error()["detail"] == {"limitBytes": 8192, "bytes": size}
        assert stored is None


def test_transfer_encoding_through_the_django_client_is_411(tenant):
    client = tenant.client_for(tenant.member)

    response = client.put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/memory",
        {"content": "kept"},
        format="json",
        HTTP_X_BASE_VERSION="0",
        HTTP_TRANSFER_ENCODING="chunked",
    )

    assert_shape(response, 411, "LENGTH_REQUIRED")
    assert memory_current_get(workspace=tenant.workspace).version == 0


# --- refusals at the edge answer in the API's shape ----------------------------------------


@pytest.mark.skipif(not ON_POSTGRES, reason="gunicorn runs in another process: needs PostgreSQL")
@pytest.mark.parametrize(
    ("target", "requests", "status"),
    [
        # Refused for want of a credential, never a 500; cheap, so more of them at once.
        ("/api/v1/memory/usage?visibility=org&name=notes", 16, 401),
        ("/api/schema/", 8, 200),
    ],
    ids=["a query string", "the schema"],
)
def test_a_fresh_workers_first_requests_at_once_are_answered_not_500(
    django_db_setup, tmp_path, target, requests, status
):
    # drf-spectacular loads each of its extensions' classes at the first schema work of a
    # process, not safely for threads: a fresh worker's first concurrent requests with a
    # query string (which the schema judges) or for the schema answered 500.
    barrier = threading.Barrier(requests)
    statuses: list[int] = []

    def request(server: Gunicorn) -> None:
        barrier.wait(timeout=30)
        statuses.append(server.send(request_head("GET", target)).status)

    with gunicorn_serving(tmp_path) as server:
        threads = [threading.Thread(target=request, args=(server,)) for _ in range(requests)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)

    assert statuses == [status] * requests


def test_an_unknown_host_is_a_json_400(db, client):
    response = client.get("/api/v1/ping", HTTP_HOST="evil.example")

    assert_shape(response, 400, "HOST_NOT_ALLOWED")


def test_an_unknown_host_through_gunicorn_is_a_json_400(gunicorn):
    reply = gunicorn.send(b"GET /api/v1/ping HTTP/1.1\r\nHost: evil.example")

    assert (reply.status, reply.error()["code"]) == (400, "HOST_NOT_ALLOWED")


def test_an_unknown_host_on_a_page_stays_a_page(db, client):
    response = client.get("/workspaces/", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/")


@pytest.mark.parametrize("length", [MAX_URI_BYTES + 1, 8000])
def test_a_long_url_is_refused_by_django_in_the_api_shape(gunicorn, length):
    target = "/api/v1/ping?q=" + "a" * length

    reply = gunicorn.send(request_head("GET", target))

    error = reply.error()
    assert (reply.status, error["code"]) == (414, "URI_TOO_LONG")
    # Django's refusal (gunicorn's own carries no detail).
    assert error["detail"] == {"limitBytes": MAX_URI_BYTES}


def test_a_path_beyond_latin_1_is_answered_not_a_500(db, client):
    # Django puts the decoded path back into PATH_INFO; re-encoding it as WSGI's Latin-1
    # failed on any character past U+00FF (an emoji, a CJK name), a 500 on every route.
    response = client.get("/api/v1/bots/%F0%9F%98%80")

    assert_shape(response, 404, "NOT_FOUND")


def test_the_url_bound_counts_a_paths_utf8_bytes(db, client):
    # 1400 "é" are 2800 UTF-8 bytes: over the bound with the query, under it in characters.
    response = client.get("/api/v1/ping/" + "%C3%A9" * 1400 + "?q=" + "a" * 1400)

    error = assert_shape(response, 414, "URI_TOO_LONG")
    assert error["detail"] == {"limitBytes": MAX_URI_BYTES}


def test_a_url_past_gunicorns_maximum_is_refused_by_gunicorn_in_the_api_shape(gunicorn):
    reply = gunicorn.send(request_head("GET", "/api/v1/ping?q=" + "a" * 9000))

    error = reply.error()
    assert (reply.status, error["code"], error["detail"]) == (414, "URI_TOO_LONG", {})
    assert "aaaa" not in reply.body.decode()


@pytest.mark.parametrize(
    "headers",
    [
        [f"X-Big: {'a' * (MAX_HEADER_BYTES + 1)}"],
        [f"X-Many-{n}: {'a' * 200}" for n in range(150)],
    ],
    ids=["one big header", "many headers"],
)
def test_big_headers_are_refused_by_django_in_the_api_shape(gunicorn, headers):
    reply = gunicorn.send(request_head("GET", "/api/v1/ping", *headers))

    error = reply.error()
    assert (reply.status, error["code"]) == (431, "HEADERS_TOO_LARGE")
    assert error["detail"]["limitBytes"] == MAX_HEADER_BYTES


@pytest.mark.parametrize("length", ["abc", "-1", "1, 2", "9" * 30])
def test_a_bad_content_length_through_gunicorn_is_a_json_400(gunicorn, length):
    reply = gunicorn.send(
        request_head(
            "PUT", "/api/v1/ping", "Content-Type: application/json", f"Content-Length: {length}"
        )
    )

    assert (reply.status, reply.error()["code"]) == (400, "MALFORMED_REQUEST")


# --- no query string in a log ----------------------------------------------------------------


def test_the_access_log_carries_no_query_string(gunicorn):
    gunicorn.send(
        request_head("GET", "/api/v1/ping?q=s3cret-term", "Referer: http://x/?q=s3cret-ref")
    )
    gunicorn.send(request_head("GET", "/api/v1/ping?q=s3cret-long" + "a" * 9000))
    gunicorn.send(b"GET /api/v1/ping?q=s3cret-bad HTTP/1.1 extra\r\nHost: 127.0.0.1")

    access, errors = gunicorn.access_log.read_text(), gunicorn.error_log.read_text()
    assert "/api/v1/ping" in access
    assert "s3cret" not in access
    assert "s3cret" not in errors


def test_runservers_request_log_carries_no_query_string():
    record = logging.LogRecord(
        "django.server",
        logging.INFO,
        __file__,
        1,
        '"%s" %s %s',
        ("GET /a?q=s3cret HTTP/1.1", "200", "5"),
        None,
    )

    RedactQueryStrings().filter(record)

    assert record.getMessage() == '"GET /a?[redacted] HTTP/1.1" 200 5'
    filters = logging.getLogger("django.server").filters
    assert any(isinstance(f, RedactQueryStrings) for f in filters)
