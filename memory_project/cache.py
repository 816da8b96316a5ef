"""The cache backends the settings name: Django's, with one redis-py client per connection
pool, and a read that restarts an entry's timeout in the same call.

Hand-written rather than a third-party backend: Django's RedisCache does everything the
product needs except two things, and keeping it keeps its exact behaviour (its serializer,
`incr` refusing a missing key, redis-py's own errors, which `CACHE_ERRORS` names). Its
client builds a new `redis.Redis` for every cache operation (django/core/cache/backends/
redis.py, `RedisCacheClient.get_client`), and that constructor costs more than the loopback
round trip it serves; a throttled write pays it about four times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

from django.core.cache import cache
from django.core.cache.backends.locmem import LocMemCache as DjangoLocMemCache
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient, RedisSerializer

if TYPE_CHECKING:
    from redis import ConnectionPool, Redis


class PooledRedisCacheClient(RedisCacheClient):
    """Django's client, keeping the one `redis.Redis` it makes for each connection pool.

    A `redis.Redis` holds no connection of its own (it borrows one from its pool for each
    command), so one per pool serves every operation; the pool itself is still made lazily
    and, as in Django, re-made by redis-py in a forked worker.
    """

    # Django's, which django-stubs does not declare.
    _client: type[Redis]
    _serializer: RedisSerializer
    if TYPE_CHECKING:

        def _get_connection_pool(self, write: bool) -> ConnectionPool: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Redis] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Redis:
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client

    def get_and_touch(self, key: str, timeout: float | None) -> Any:
        # GETEX: the value and its new expiry in one round trip (Redis 6.2 and later).
        client = self.get_client(key, write=True)
        if timeout is None:
            value = client.getex(key, persist=True)
        else:
            value = client.getex(key, ex=int(timeout))
        return None if value is None else self._serializer.loads(cast(bytes, value))


class RedisCache(DjangoRedisCache):
    """Django's Redis backend with `PooledRedisCacheClient`, and `get_and_touch`."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = PooledRedisCacheClient

    def get_and_touch(self, key: str, timeout: int | None, version: int | None = None) -> Any:
        """The value of `key` (None if missing), its timeout restarted at `timeout`
        seconds, in one Redis call."""
        key = self.make_and_validate_key(key, version=version)
        client = cast(PooledRedisCacheClient, self._cache)
        return client.get_and_touch(key, self.get_backend_timeout(timeout))


class LocMemCache(DjangoLocMemCache):
    """Django's in-process cache, with the same `get_and_touch` as `RedisCache`."""

    def get_and_touch(self, key: str, timeout: int | None, version: int | None = None) -> Any:
        """The value of `key` (None if missing), its timeout restarted at `timeout` seconds.
        In one process there is no round trip to save: a read, then a touch."""
        value = self.get(key, version=version)
        if value is not None:
            # Not self.touch: a spy on either name then counts this one restart once.
            DjangoLocMemCache.touch(self, key, timeout, version=version)
        return value


class _TouchingCache(Protocol):
    def get_and_touch(self, key: str, timeout: int | None) -> Any: ...


def cache_get_and_touch(key: str, timeout: int) -> Any:
    """`get_and_touch` on the default cache, which the settings make one of the backends
    above (an override in a test names one of them too)."""
    return cast(_TouchingCache, cache).get_and_touch(key, timeout)
