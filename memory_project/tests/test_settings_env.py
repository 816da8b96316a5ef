from __future__ import annotations

import base64
import os
import runpy
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
)
from django.core.exceptions import ImproperlyConfigured
from gunicorn.config import Config

from memory_project import gunicorn_conf
from memory_project import settings as settings_module
from memory_project.env import (
    env_base_url,
    env_bool,
    env_ed25519_key,
    env_int,
    env_origins,
    env_rate,
    env_secret,
)
from memory_project.settings import _database


@pytest.mark.parametrize("raw", ["maybe", "2", "enabled"])
def test_malformed_boolean_stops_start_up(raw):
    with pytest.raises(ImproperlyConfigured, match="REQUIRE_ORIGIN"):
        env_bool("REQUIRE_ORIGIN", True, environ={"REQUIRE_ORIGIN": raw})


@pytest.mark.parametrize("raw", ["abc", "-5", "9.5"])
def test_malformed_number_stops_start_up(raw):
    with pytest.raises(ImproperlyConfigured, match="JWT_TTL_SECONDS"):
        env_int("JWT_TTL_SECONDS", 900, minimum=30, environ={"JWT_TTL_SECONDS": raw})


@pytest.mark.parametrize("raw", ["example.org", "ftp://example.org", "https://example.org/app"])
def test_malformed_origin_stops_start_up(raw):
    with pytest.raises(ImproperlyConfigured, match="TRUSTED_ORIGINS"):
        env_origins("TRUSTED_ORIGINS", [], environ={"TRUSTED_ORIGINS": raw})


def test_origins_are_normalised_to_lower_case():
    origins = env_origins("TRUSTED_ORIGINS", [], environ={"TRUSTED_ORIGINS": "HTTPS://App.Org"})

    assert origins == ["https://app.org"]


@pytest.mark.parametrize(
    "raw",
    [
        "example.org",
        "ftp://example.org",
        "https://",
        "https://example.org:port",
        "https://user:hunter2@example.org",
        "https://example.org/?a=1",
        "https://example.org/#top",
    ],
)
def test_malformed_remote_url_stops_start_up_without_echoing_it(raw):
    with pytest.raises(ImproperlyConfigured, match="MEMORY_REMOTE_URL") as refused:
        env_base_url("MEMORY_REMOTE_URL", environ={"MEMORY_REMOTE_URL": raw})

    assert "example.org" not in str(refused.value)


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("", ""),
        ("https://memory.example/", "https://memory.example"),
        ("http://h:8010/app", "http://h:8010/app"),
    ],
)
def test_remote_url_is_optional_and_loses_its_trailing_slash(raw, url):
    assert env_base_url("MEMORY_REMOTE_URL", environ={"MEMORY_REMOTE_URL": raw}) == url


@pytest.mark.parametrize("url", ["mysql://x@y/z", "not a url", "postgres//missing-colon"])
def test_unsupported_database_url_stops_start_up(url):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        _database(url)


def test_sqlite_opens_with_immediate_transactions(tmp_path):
    config = _database(f"sqlite:///{tmp_path / 'db.sqlite3'}")

    assert config["OPTIONS"] == {"transaction_mode": "IMMEDIATE", "timeout": 20}


def test_short_secret_stops_start_up(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY"):
        env_secret("SECRET_KEY", tmp_path / "s", environ={"SECRET_KEY": "short"})


def test_generated_secret_is_stable_and_private(tmp_path):
    path = tmp_path / "data" / "secret"

    first = env_secret("SECRET_KEY", path, environ={})
    second = env_secret("SECRET_KEY", path, environ={})

    assert first == second
    assert len(first) >= 32
    assert path.stat().st_mode & 0o777 == 0o600


def test_receipt_signing_key_is_read_as_a_base64_seed_or_a_pem(tmp_path):
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    name = "PURGE_RECEIPT_SIGNING_KEY"

    from_seed = env_ed25519_key(
        name, tmp_path / "k", environ={name: base64.b64encode(seed).decode()}
    )
    from_pem = env_ed25519_key(name, tmp_path / "k", environ={name: pem})

    assert base64.b64decode(from_seed) == base64.b64decode(from_pem) == seed
    assert not (tmp_path / "k").exists()


@pytest.mark.parametrize(
    "raw",
    [
        base64.b64encode(b"x" * 31).decode(),
        base64.b64encode(b"x" * 64).decode(),
        "not base64!",
        X25519PrivateKey.generate()
        .private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        .decode(),
        "-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----",
    ],
    ids=["short", "long", "not-base64", "not-ed25519", "broken-pem"],
)
def test_malformed_receipt_signing_key_stops_start_up(tmp_path, raw):
    name = "PURGE_RECEIPT_SIGNING_KEY"

    with pytest.raises(ImproperlyConfigured, match=name):
        env_ed25519_key(name, tmp_path / "k", environ={name: raw})


def test_generated_receipt_signing_key_is_stable_and_private(tmp_path):
    path = tmp_path / "data" / "purge_receipt_signing_key"

    first = env_ed25519_key("PURGE_RECEIPT_SIGNING_KEY", path, environ={})
    second = env_ed25519_key("PURGE_RECEIPT_SIGNING_KEY", path, environ={})

    assert first == second
    assert len(base64.b64decode(first)) == 32
    assert path.stat().st_mode & 0o777 == 0o600


def start_up(monkeypatch, **environ: str) -> dict:
    """Evaluate the settings module afresh, as a process starting with `environ` would."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(settings_module.__file__)


@pytest.mark.parametrize("name", ["THROTTLE_CREDENTIAL_RATE", "THROTTLE_WRITE_RATE"])
@pytest.mark.parametrize("raw", ["abc", "300", "0/min", "300/fortnight", "x/min", "30/ min"])
def test_malformed_throttle_rate_stops_start_up(monkeypatch, name, raw):
    with pytest.raises(ImproperlyConfigured, match=name):
        start_up(monkeypatch, **{name: raw})


@pytest.mark.parametrize("raw", ["5/s", "10/sec", "300/min", "60/minute", "100/hour", "1/day"])
def test_rate_the_throttles_can_read_is_accepted(raw):
    assert env_rate("THROTTLE_WRITE_RATE", "300/min", environ={"THROTTLE_WRITE_RATE": raw}) == raw


@pytest.mark.parametrize("raw", ["0", "-1", "3651", "a week"])
def test_a_private_space_lifetime_out_of_range_stops_start_up(monkeypatch, raw):
    with pytest.raises(ImproperlyConfigured, match="MEMORY_PRIVATE_TTL_DAYS"):
        start_up(monkeypatch, MEMORY_PRIVATE_TTL_DAYS=raw)


def test_a_private_space_lifetime_is_read_at_start_up(monkeypatch):
    assert start_up(monkeypatch, MEMORY_PRIVATE_TTL_DAYS="30")["MEMORY_PRIVATE_TTL_DAYS"] == 30


@pytest.mark.parametrize("raw", ["0", "-5", "3651", "ninety"])
def test_a_stale_line_age_out_of_range_stops_start_up(monkeypatch, raw):
    with pytest.raises(ImproperlyConfigured, match="MEMORY_STALE_DAYS"):
        start_up(monkeypatch, MEMORY_STALE_DAYS=raw)


def test_the_stale_line_age_is_90_days_unless_set(monkeypatch):
    monkeypatch.delenv("MEMORY_STALE_DAYS", raising=False)

    assert start_up(monkeypatch)["MEMORY_STALE_DAYS"] == 90
    assert start_up(monkeypatch, MEMORY_STALE_DAYS="30")["MEMORY_STALE_DAYS"] == 30


def test_short_jwt_signing_key_stops_start_up(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="JWT_SIGNING_KEY"):
        start_up(monkeypatch, JWT_SIGNING_KEY="too-short")


def test_jwt_signing_key_is_taken_from_the_environment_or_derived(monkeypatch):
    derived = start_up(monkeypatch)["JWT_SIGNING_KEY"]
    given = start_up(monkeypatch, JWT_SIGNING_KEY="k" * 32)["JWT_SIGNING_KEY"]

    assert len(derived) == 64
    assert given == "k" * 32


def test_a_malformed_receipt_signing_key_stops_start_up_by_name(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="PURGE_RECEIPT_SIGNING_KEY"):
        start_up(monkeypatch, PURGE_RECEIPT_SIGNING_KEY="c2hvcnQ=")


@pytest.mark.parametrize(
    ("environ", "workers"),
    [
        ({"REDIS_URL": "redis://127.0.0.1:6379/0"}, "cores"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/0", "WEB_CONCURRENCY": "3"}, 3),
        ({}, 1),
        ({"WEB_CONCURRENCY": "1"}, 1),
    ],
)
def test_gunicorn_runs_a_process_per_core_only_with_redis(monkeypatch, environ, workers):
    for name in ("REDIS_URL", "WEB_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)

    chosen = gunicorn_conf._workers()

    assert chosen == (os.cpu_count() if workers == "cores" else workers)


def test_more_than_one_worker_without_redis_stops_start_up(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("WEB_CONCURRENCY", "2")

    with pytest.raises(ImproperlyConfigured, match="WEB_CONCURRENCY above 1 needs REDIS_URL"):
        gunicorn_conf._workers()


def test_a_database_url_naming_no_database_stops_start_up():
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL names no database"):
        _database("postgres://postgres@127.0.0.1:5432")


@pytest.mark.parametrize(
    "raw", ["garbage", "http://broker", "amqp//host", "redis://:secret@host:port/1"]
)
def test_a_malformed_broker_url_stops_start_up_without_echoing_it(monkeypatch, raw):
    with pytest.raises(ImproperlyConfigured, match="CELERY_BROKER_URL") as refusal:
        start_up(monkeypatch, CELERY_BROKER_URL=raw)

    assert "secret" not in str(refusal.value)


@pytest.mark.parametrize(
    "raw", ["amqp://guest@127.0.0.1:5672//", "redis://127.0.0.1:6379/1", "rediss://h:6380/0"]
)
def test_a_broker_url_celery_can_reach_is_accepted(monkeypatch, raw):
    assert start_up(monkeypatch, CELERY_BROKER_URL=raw)["CELERY_BROKER_URL"] == raw


def test_no_allowed_host_stops_start_up_unless_debugging(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="ALLOWED_HOSTS"):
        start_up(monkeypatch, ALLOWED_HOSTS=" , ", DEBUG="0")

    assert start_up(monkeypatch, ALLOWED_HOSTS=",", DEBUG="1")["ALLOWED_HOSTS"] == []


def test_a_data_dir_that_cannot_be_a_directory_stops_start_up(monkeypatch, tmp_path):
    occupied = tmp_path / "a-file"
    occupied.write_text("")

    with pytest.raises(ImproperlyConfigured, match="DATA_DIR"):
        start_up(monkeypatch, DATA_DIR=str(occupied / "data"))
    with pytest.raises(ImproperlyConfigured, match="DATA_DIR"):
        start_up(monkeypatch, DATA_DIR=str(occupied))


def run_quietly(*command: str, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=settings_module.BASE_DIR,
    )


def test_manage_py_refuses_a_malformed_setting_with_its_message_alone():
    refused = run_quietly(sys.executable, "manage.py", "check", DEBUG="maybe")

    assert refused.returncode == 1
    assert refused.stderr.startswith("Configuration error: DEBUG must be one of")
    assert "Traceback" not in refused.stderr


def test_gunicorn_refuses_a_malformed_setting_with_its_message_alone():
    # Refused in the master by the on_starting hook, before it binds or starts a worker.
    refused = run_quietly(
        *(sys.executable, "-m", "gunicorn", "-c", "python:memory_project.gunicorn_conf"),
        *("memory_project.wsgi", "--bind", "127.0.0.1:0"),
        CELERY_BROKER_URL="rabbit",
    )

    assert refused.returncode == 1
    assert "Configuration error: CELERY_BROKER_URL is not a broker URL" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert "Booting worker" not in refused.stderr


def test_gunicorn_refuses_its_own_malformed_setting_with_its_message_alone(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    refused = run_quietly(
        *(sys.executable, "-m", "gunicorn", "-c", "python:memory_project.gunicorn_conf"),
        *("memory_project.wsgi", "--bind", "127.0.0.1:0", "--check-config"),
        WEB_CONCURRENCY="2",
    )

    assert refused.returncode == 1
    assert refused.stderr.startswith("Configuration error: WEB_CONCURRENCY above 1")


@pytest.mark.parametrize("raw", ["abc", "0", "-1"])
@pytest.mark.parametrize("redis_url", ["", "redis://127.0.0.1:6379/0"], ids=["embedded", "redis"])
def test_the_server_refuses_a_malformed_worker_count_with_its_message_alone(raw, redis_url):
    # gunicorn reads WEB_CONCURRENCY itself when imported, before any config: "abc" stopped it
    # with a traceback and "-1" with its own message, neither naming the variable's rule.
    refused = run_quietly(
        *(sys.executable, "-m", "memory_project.serve", "--bind", "127.0.0.1:0"),
        "--check-config",
        WEB_CONCURRENCY=raw,
        REDIS_URL=redis_url,
    )

    assert refused.returncode == 1
    assert refused.stderr.startswith("Configuration error: WEB_CONCURRENCY must be ")
    assert "Traceback" not in refused.stderr


def test_the_server_starts_gunicorn_with_the_project_config():
    checked = run_quietly(
        *(sys.executable, "-m", "memory_project.serve", "--bind", "127.0.0.1:0"),
        "--check-config",
        "--print-config",
        WEB_CONCURRENCY="",
        REDIS_URL="",
    )

    lines = [line.split(" = ", 1) for line in checked.stdout.splitlines() if " = " in line]
    printed = {name.strip(): value for name, value in lines}
    assert checked.returncode == 0, checked.stderr
    assert printed["control_socket_disable"] == "True"
    assert printed["workers"] == "1"


def test_gunicorn_opens_no_control_socket_another_server_could_take_over():
    # gunicorn's default path is one per user account, shared by every server it runs.
    config = Config()
    for name, value in vars(gunicorn_conf).items():
        if name in config.settings:
            config.set(name, value)

    assert config.control_socket_disable is True


@pytest.mark.parametrize("command", ["worker", "beat"])
def test_celery_refuses_a_malformed_setting_with_its_message_alone(command):
    refused = run_quietly(
        *(sys.executable, "-m", "celery", "-A", "memory_project", command),
        CELERY_BROKER_URL="redis://127.0.0.1:6379/1",
        DEBUG="maybe",
    )

    assert refused.returncode == 1
    assert refused.stderr.startswith("Configuration error: DEBUG must be one of")
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize(
    "raw", ["http://cache", "redis://:secret@127.0.0.1:port/0", "unix://", "redis//cache"]
)
def test_a_malformed_redis_url_stops_start_up_without_echoing_it(monkeypatch, raw):
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL") as refusal:
        start_up(monkeypatch, REDIS_URL=raw)

    assert "secret" not in str(refusal.value)


@pytest.mark.parametrize(
    "raw", ["redis://127.0.0.1:6379/0", "rediss://:pw@cache:6380/1", "unix:///run/redis.sock"]
)
def test_a_redis_url_the_cache_can_reach_is_accepted(monkeypatch, raw):
    assert start_up(monkeypatch, REDIS_URL=raw)["REDIS_URL"] == raw


@pytest.mark.parametrize("raw", ["localhost:11434/v1", "ftp://models", "https://k:secret@api/v1"])
def test_a_malformed_model_endpoint_stops_start_up_without_echoing_it(monkeypatch, raw):
    with pytest.raises(ImproperlyConfigured, match="OPENAI_BASE_URL") as refusal:
        start_up(monkeypatch, MODEL_PROVIDER="openai", OPENAI_BASE_URL=raw, OPENAI_MODEL="m")

    assert "secret" not in str(refusal.value)


def test_a_worker_without_a_broker_refuses_to_start(monkeypatch):
    # Its in-memory transport is shared with no other process: it would run and receive
    # nothing, while the web process runs every task itself. (Beat refuses likewise, once
    # it has read its schedule from the database.)
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)

    refused = run_quietly(sys.executable, "-m", "celery", "-A", "memory_project", "worker")

    assert refused.returncode == 1
    assert "Configuration error: CELERY_BROKER_URL is not set" in refused.stderr


@pytest.mark.parametrize("held", ["", "short"])
def test_a_generated_secret_cut_short_stops_start_up(tmp_path, held):
    (tmp_path / "secret_key").write_text(held)

    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY"):
        env_secret("SECRET_KEY", tmp_path / "secret_key", environ={})

    assert (tmp_path / "secret_key").read_text() == held
