"""Counting in the cache that stays exact under concurrency: fixed-window rate counters.

Every count is one atomic cache increment (Redis INCR; the in-process cache increments
under its lock), never a read followed by a write, so of N concurrent hits each sees a
different count and exactly the allowed number pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache


@dataclass(frozen=True)
class WindowCount:
    count: int
    # Seconds until the current window ends and the count starts again from zero.
    retry_after: float


def _window_key(key: str, window_seconds: int, now: float) -> tuple[str, float]:
    window = int(now // window_seconds)
    return f"{key}:{window}", (window + 1) * window_seconds - now


def window_hit(*, key: str, window_seconds: int, now: float) -> WindowCount:
    """Count one hit against `key` in the current fixed window; the count includes it.

    The window's number is part of the cache key, and the key lives for two windows, so it
    is only ever incremented while it exists: it cannot expire between the `add` that
    creates it and the increment (which would make Django's `incr` fail, or leave Redis a
    counter without an expiry).
    """
    cache_key, retry_after = _window_key(key, window_seconds, now)
    cache.add(cache_key, 0, timeout=window_seconds * 2)
    return WindowCount(count=cache.incr(cache_key), retry_after=retry_after)


def window_count(*, key: str, window_seconds: int, now: float) -> WindowCount:
    """The hits counted against `key` in the current window, without adding one."""
    cache_key, retry_after = _window_key(key, window_seconds, now)
    return WindowCount(count=int(cache.get(cache_key, 0)), retry_after=retry_after)
