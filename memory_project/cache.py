"""The cache backends the settings name: Django's, with one redis-py client per connection
pool, and two calls made on most requests done in one round trip each: a read that restarts
an entry's timeout (a key session), and the rate limits of a request (the windows it counts
in, each created with its expiry if missing, unless a gate window is already full). Those two
are sent on a pooled connection directly (`PooledRedisCacheClient.command`), not through the
client's `execute_command`.

Hand-written rather than a third-party backend: Django's RedisCache does everything else the
product needs, and keeping it keeps its exact behaviour (its serializer,
`incr` refusing a missing key, redis-py's own errors, which `CACHE_ERRORS` names). Its
client builds a new `redis.Redis` for every cache operation (django/core/cache/backends/
redis.py, `RedisCacheClient.get_client`), and that constructor costs more than the loopback
round trip it serves; a throttled write pays it about four times.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from django.core.cache import cache
from django.core.cache.backends.locmem import LocMemCache as DjangoLocMemCache
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient, RedisSerializer
from redis.exceptions import NoScriptError

if TYPE_CHECKING:
    from redis import ConnectionPool, Redis

# A counter is (its key, its lifetime in seconds); a gate is (a counter's key, its limit).
Counter = tuple[str, int]
Gate = tuple[str, int]

# KEYS: the counters, then the gate's key if ARGV[1] is not empty. ARGV[1]: the gate's limit
# or ''; ARGV[2...]: each counter's lifetime. A script, so that nothing is counted between
# the gate's read and the increments, and every counter is created with its expiry.
COUNT_UNLESS_GATE_FULL = """
local counters = #ARGV - 1
if ARGV[1] ~= '' then
    local seen = tonumber(redis.call('GET', KEYS[counters + 1]) or '0')
    if seen >= tonumber(ARGV[1]) then
        return false
    end
end
local counts = {}
for i = 1, counters do
    redis.call('SET', KEYS[i], 0, 'EX', ARGV[i + 1], 'NX')
    counts[i] = redis.call('INCR', KEYS[i])
end
return counts
"""
# Sent by its SHA-1 (EVALSHA), the text only when the server does not have it yet.
COUNT_UNLESS_GATE_FULL_SHA = hashlib.sha1(COUNT_UNLESS_GATE_FULL.encode()).hexdigest()


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

    def command(self, *command: Any) -> Any:
        """Send one command on a connection of the write pool and answer the server's reply.

        What `redis.Redis.execute_command` does for a command whose reply needs no parsing
        (GETEX, EVALSHA), without its bookkeeping around the command: the observability
        hooks (nothing here records them), the `deprecated_args` checks and the retry loop's
        closures, about a fifth of each command's Python (bench/README.md). The retry policy
        is still the connection's own, as redis-py applies it (the pool gives its connections
        none unless the cache's OPTIONS set one). As there, a connection that fails
        mid-command is disconnected before it goes back to the pool (`read_response` does it
        itself on a socket error), so the next borrower reconnects instead of reading the
        reply left on it.
        """
        pool = self._get_connection_pool(write=True)
        connection = pool.get_connection()

        def send() -> Any:
            connection.send_command(*command)
            return connection.read_response()

        try:
            return connection.retry.call_with_retry(send, lambda _error: connection.disconnect())
        finally:
            pool.release(connection)

    def get_and_touch(self, key: str, timeout: float | None) -> Any:
        # GETEX: the value and its new expiry in one round trip (Redis 6.2 and later).
        expiry = ("PERSIST",) if timeout is None else ("EX", int(timeout))
        value = self.command("GETEX", key, *expiry)
        return None if value is None else self._serializer.loads(cast(bytes, value))

    def count_unless_gate_full(
        self, counters: Sequence[Counter], gate: Gate | None
    ) -> list[int] | None:
        keys = [key for key, _ in counters]
        limit = ""
        if gate is not None:
            keys.append(gate[0])
            limit = str(gate[1])
        # The command itself, not redis-py's Script: its wrapper cost about a tenth of the
        # call, for what the three lines below do too.
        args = [limit, *(timeout for _, timeout in counters)]
        command = ("EVALSHA", COUNT_UNLESS_GATE_FULL_SHA, len(keys), *keys, *args)
        try:
            counts = self.command(*command)
        except NoScriptError:
            # A server that has not seen the script yet, or lost it (a restart).
            self.get_client(write=True).script_load(COUNT_UNLESS_GATE_FULL)
            counts = self.command(*command)
        return None if counts is None else [int(count) for count in counts]


class RedisCache(DjangoRedisCache):
    """Django's Redis backend with `PooledRedisCacheClient`, `get_and_touch` and
    `count_unless_gate_full`."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = PooledRedisCacheClient

    def get_and_touch(self, key: str, timeout: int | None, version: int | None = None) -> Any:
        """The value of `key` (None if missing), its timeout restarted at `timeout`
        seconds, in one Redis call."""
        key = self.make_and_validate_key(key, version=version)
        client = cast(PooledRedisCacheClient, self._cache)
        return client.get_and_touch(key, self.get_backend_timeout(timeout))

    def count_unless_gate_full(
        self, counters: Sequence[Counter], gate: Gate | None
    ) -> list[int] | None:
        """Add one to each of `counters`, first creating a missing one at 0 to expire after its
        lifetime; unless `gate`'s counter has reached its limit: then count nothing and answer
        None. Answers the new counts, in order. One Redis call, atomic."""
        client = cast(PooledRedisCacheClient, self._cache)
        return client.count_unless_gate_full(
            [(self.make_and_validate_key(key), timeout) for key, timeout in counters],
            None if gate is None else (self.make_and_validate_key(gate[0]), gate[1]),
        )


class LocMemCache(DjangoLocMemCache):
    """Django's in-process cache, with the same `get_and_touch` and `count_unless_gate_full`
    as `RedisCache`."""

    def count_unless_gate_full(
        self, counters: Sequence[Counter], gate: Gate | None
    ) -> list[int] | None:
        """As `RedisCache.count_unless_gate_full`. In one process each counter is an add then
        an increment, each under the cache's lock (a counter outlives its caller's window, so
        it cannot expire between them); the gate's read is not atomic with them, as nothing
        that runs in one process needs it to be."""
        if gate is not None and int(self.get(gate[0], 0)) >= gate[1]:
            return None
        counts = []
        for key, timeout in counters:
            self.add(key, 0, timeout=timeout)
            counts.append(self.incr(key))
        return counts

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
    def count_unless_gate_full(
        self, counters: Sequence[Counter], gate: Gate | None
    ) -> list[int] | None: ...


def cache_get_and_touch(key: str, timeout: int) -> Any:
    """`get_and_touch` on the default cache, which the settings make one of the backends
    above (an override in a test names one of them too)."""
    return cast(_ProjectCache, cache).get_and_touch(key, timeout)


def cache_count_unless_gate_full(
    counters: Sequence[Counter], gate: Gate | None = None
) -> list[int] | None:
    """`count_unless_gate_full` on the default cache (one of the backends above)."""
    return cast(_ProjectCache, cache).count_unless_gate_full(counters, gate)
