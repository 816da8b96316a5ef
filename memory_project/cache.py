"""The cache backends the settings name: Django's, with one redis-py client per connection
pool, and two calls made on most requests done in one round trip each: a read that restarts
an entry's timeout (a key session), and a counter's creation with its increment (a rate
limit's window).

Hand-written rather than a third-party backend: Django's RedisCache does everything else the
product needs, and keeping it keeps its exact behaviour (its serializer,
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

    def incr_or_create(self, key: str, timeout: int) -> int:
        # SET NX and INCR in one MULTI/EXEC: one round trip, and no moment at which the
        # counter exists without its expiry.
        pipeline = self.get_client(key, write=True).pipeline()
        pipeline.set(key, 0, ex=timeout, nx=True)
        pipeline.incr(key)
        _, count = pipeline.execute()
        return int(count)


class RedisCache(DjangoRedisCache):
    """Django's Redis backend with `PooledRedisCacheClient`, `get_and_touch` and
    `incr_or_create`."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = PooledRedisCacheClient

    def get_and_touch(self, key: str, timeout: int | None, version: int | None = None) -> Any:
        """The value of `key` (None if missing), its timeout restarted at `timeout`
        seconds, in one Redis call."""
        key = self.make_and_validate_key(key, version=version)
        client = cast(PooledRedisCacheClient, self._cache)
        return client.get_and_touch(key, self.get_backend_timeout(timeout))

    def incr_or_create(self, key: str, timeout: int, version: int | None = None) -> int:
        """Add one to the counter at `key`, first creating it at 0 to expire after
        `timeout` seconds if it is missing; returns the new count. One Redis call."""
        key = self.make_and_validate_key(key, version=version)
        client = cast(PooledRedisCacheClient, self._cache)
        return client.incr_or_create(key, timeout)


class LocMemCache(DjangoLocMemCache):
    """Django's in-process cache, with the same `get_and_touch` and `incr_or_create` as
    `RedisCache`."""

    def incr_or_create(self, key: str, timeout: int, version: int | None = None) -> int:
        """As `RedisCache.incr_or_create`; in one process, an add then an increment, each
        under the cache's lock (the counter outlives the caller's window, so it cannot
        expire between them)."""
        self.add(key, 0, timeout=timeout, version=version)
        return self.incr(key, version=version)

    def get_and_touch(self, key: str, timeout: int | None, version: int | None = None) -> Any:
        """The value of `key` (None if missing), its timeout restarted at `timeout` seconds.
        In one process there is no round trip to save: a read, then a touch."""
        value = self.get(key, version=version)
        if value is not None:
            # Not self.touch: a spy on either name then counts this one restart once.
            DjangoLocMemCache.touch(self, key, timeout, version=version)
        return value


class _ProjectCache(Protocol):
    def get_and_touch(self, key: str, timeout: int | None) -> Any: ...
    def incr_or_create(self, key: str, timeout: int) -> int: ...


def cache_get_and_touch(key: str, timeout: int) -> Any:
    """`get_and_touch` on the default cache, which the settings make one of the backends
    above (an override in a test names one of them too)."""
    return cast(_ProjectCache, cache).get_and_touch(key, timeout)


def cache_incr_or_create(key: str, timeout: int) -> int:
    """`incr_or_create` on the default cache (one of the backends above)."""
    return cast(_ProjectCache, cache).incr_or_create(key, timeout)
