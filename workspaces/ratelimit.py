"""Counting in the cache that stays exact under concurrency: fixed-window rate counters and
a per-key bound on work in progress.

Every count is one atomic cache increment (Redis INCR; the in-process cache increments
under its lock), never a read followed by a write, so of N concurrent hits each sees a
different count and exactly the allowed number pass.

Every limit fails open: the counters live in Redis, which may be lost, and an outage of it
must not take down routes that do not need it (reads, Saves), a worse outage than the abuse
a limit bounds. An unreachable counter counts nothing and is logged as a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from memory_project.cache import cache_incr_or_create
from workspaces.errors import CACHE_ERRORS

logger = logging.getLogger(__name__)


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
    is only ever incremented while it exists. Creating it and incrementing it is one cache
    call (`incr_or_create`: one Redis round trip, and never a counter without an expiry).
    """
    cache_key, retry_after = _window_key(key, window_seconds, now)
    try:
        count = cache_incr_or_create(cache_key, window_seconds * 2)
        return WindowCount(count=count, retry_after=retry_after)
    except CACHE_ERRORS:
        _warn_unreachable(key)
        return WindowCount(count=0, retry_after=retry_after)


def window_count(*, key: str, window_seconds: int, now: float) -> WindowCount:
    """The hits counted against `key` in the current window, without adding one."""
    cache_key, retry_after = _window_key(key, window_seconds, now)
    try:
        return WindowCount(count=int(cache.get(cache_key, 0)), retry_after=retry_after)
    except CACHE_ERRORS:
        _warn_unreachable(key)
        return WindowCount(count=0, retry_after=retry_after)


class TooManyInProgress(Exception):
    """`in_progress_slot` found `limit` holders already."""


@contextmanager
def in_progress_slot(*, key: str, limit: int, timeout: int) -> Iterator[None]:
    """Hold one of `limit` slots of `key` for the duration of the block, or raise
    TooManyInProgress.

    `timeout` bounds how long a slot outlives a process that died holding it: the counter
    expires `timeout` seconds after its last use.
    """
    try:
        holders = _slot_take(key=key, timeout=timeout)
    except CACHE_ERRORS:
        _warn_unreachable(key)
        yield
        return
    try:
        if holders > limit:
            raise TooManyInProgress()
        yield
    finally:
        # ValueError: expired meanwhile, and the count started again without this holder.
        with suppress(ValueError, *CACHE_ERRORS):
            cache.decr(key)


def _slot_take(*, key: str, timeout: int) -> int:
    cache.add(key, 0, timeout=timeout)
    try:
        holders = cache.incr(key)
    except ValueError:
        # Expired between the add and the increment: start the count again.
        cache.add(key, 0, timeout=timeout)
        holders = cache.incr(key)
    # An increment keeps the key's expiry; restarting it here also gives one to a key that
    # Redis recreated without any in that same race.
    cache.touch(key, timeout)
    return holders


def _warn_unreachable(key: str) -> None:
    logger.warning("limit %s not applied: its counter is unreachable", key.partition(":")[0])


def client_address(request: HttpRequest | Request) -> str:
    """The client's address as the API's throttles see it (REMOTE_ADDR, or the address
    `NUM_PROXIES` trusted proxies put in X-Forwarded-For). The one rule for every limit
    per client address, sign-in included."""
    drf_request = request if isinstance(request, Request) else Request(request)
    return BaseThrottle().get_ident(drf_request) or ""
