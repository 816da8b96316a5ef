"""The project's cache backends (memory_project/cache.py): one redis-py client per
connection pool, and get_and_touch, on Redis (when REDIS_URL is set) and in process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import override_settings

from memory_project.cache import cache_count_unless_gate_full, cache_get_and_touch

REDIS = django_settings.CACHES["default"]["BACKEND"] == "memory_project.cache.RedisCache"


@pytest.fixture(params=["locmem", "redis"])
def backend(request: pytest.FixtureRequest, settings) -> Iterator[str]:
    if request.param == "redis" and not REDIS:
        pytest.skip("needs REDIS_URL: these check a real Redis (CI sets it)")
    caches = (
        settings.CACHES
        if request.param == "redis"
        else {"default": {"BACKEND": "memory_project.cache.LocMemCache"}}
    )
    with override_settings(CACHES=caches):
        cache.clear()
        yield request.param
        cache.clear()


@pytest.mark.skipif(not REDIS, reason="needs REDIS_URL: the client belongs to the Redis backend")
def test_every_operation_of_a_pool_uses_one_redis_client(monkeypatch, settings):
    made: list[object] = []
    init = redis.Redis.__init__

    def counting_init(self: redis.Redis, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)

    with override_settings(CACHES=settings.CACHES):  # a backend that has made no client yet
        cache.set("a", 1, timeout=60)
        cache.add("b", 0, timeout=60)
        cache.incr("b")
        assert cache.get("a") == 1
        cache.touch("a", 60)

    assert len(made) == 1


def test_get_and_touch_returns_the_value_and_restarts_its_timeout(backend):
    cache.set("session", {"key": b"k"}, timeout=5)

    value = cache_get_and_touch("session", 600)

    assert value == {"key": b"k"}
    if backend == "redis":
        ttl = _redis_ttl("session")
        assert 5 < ttl <= 600, "restarted, and still expiring: never persisted"


def test_get_and_touch_of_a_missing_key_creates_nothing(backend):
    assert cache_get_and_touch("missing", 600) is None

    assert cache.get("missing") is None
    if backend == "redis":
        assert _redis_ttl("missing") == -2


def _redis_ttl(key: str) -> int:
    client = cache._cache.get_client(write=True)  # type: ignore[attr-defined]
    return int(client.ttl(cache.make_and_validate_key(key)))


def test_counters_count_from_one_and_expire(backend):
    counts = [cache_count_unless_gate_full([("hits", 120), ("writes", 60)]) for _ in range(3)]

    assert counts == [[1, 1], [2, 2], [3, 3]]
    assert (cache.get("hits"), cache.get("writes")) == (3, 3)
    if backend == "redis":
        assert 0 < _redis_ttl("hits") <= 120, "created with its expiry, which increments keep"
        assert 0 < _redis_ttl("writes") <= 60


def test_a_full_gate_counts_nothing(backend):
    cache.set("failures", 2, timeout=60)

    below = cache_count_unless_gate_full([("hits", 120)], gate=("failures", 3))
    cache.incr("failures")
    full = cache_count_unless_gate_full([("hits", 120), ("failures", 60)], gate=("failures", 3))

    assert (below, full) == ([1], None)
    assert (cache.get("hits"), cache.get("failures")) == (1, 3)


def test_a_missing_gate_is_open_and_a_gate_may_count_itself(backend):
    counts = [
        cache_count_unless_gate_full([("failures", 60)], gate=("failures", 2)) for _ in range(3)
    ]

    assert counts == [[1], [2], None]
    assert cache.get("failures") == 2


@pytest.mark.skipif(not REDIS, reason="needs REDIS_URL: the script lives in a real Redis")
def test_counting_loads_the_script_again_on_a_server_that_lost_it(settings):
    with override_settings(CACHES=settings.CACHES):
        cache.clear()
        assert cache_count_unless_gate_full([("hits", 120)]) == [1]
        # What a Redis restart does to the scripts it had loaded.
        redis.Redis.from_url(settings.REDIS_URL).script_flush()

        assert cache_count_unless_gate_full([("hits", 120)], gate=("failures", 3)) == [2]
        cache.clear()


@pytest.mark.skipif(not REDIS, reason="needs REDIS_URL: the connections are a real Redis's")
def test_a_command_cut_off_midway_raises_redis_error_and_the_next_one_reads_its_own_reply(
    settings, monkeypatch
):
    with override_settings(CACHES=settings.CACHES):
        cache.clear()
        cache.set("a", "first", timeout=60)
        cache.set("b", "second", timeout=60)
        pool = cache._cache._get_connection_pool(write=True)  # type: ignore[attr-defined]
        # The pool's only connection, which the next command borrows.
        connection = pool.get_connection()
        pool.release(connection)

        def cut_off(*args: Any, **kwargs: Any) -> Any:
            raise redis.ConnectionError("the reply never came")

        # The command is sent, its reply left unread on the socket.
        monkeypatch.setattr(connection, "read_response", cut_off)
        with pytest.raises(redis.ConnectionError):  # one of CACHE_ERRORS, which callers catch
            cache_get_and_touch("a", 60)
        monkeypatch.undo()

        assert cache_get_and_touch("b", 60) == "second"
        assert cache_count_unless_gate_full([("hits", 120)]) == [1]
        cache.clear()
