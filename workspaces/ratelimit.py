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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from django.core.cache import cache
from django.http import HttpRequest
from rest_framework.request import Request
from rest_framework.settings import api_settings

from memory_project.cache import cache_count_unless_gate_full
from workspaces.errors import CACHE_ERRORS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Window:
    """A fixed-window limit: at most `limit` hits of `key` in each window of `seconds`."""

    key: str
    limit: int
    seconds: int

    def current(self, now: float) -> tuple[str, float]:
        """The cache key of the window `now` falls in, and the seconds until that window ends."""
        number = int(now // self.seconds)
        return f"{self.key}:{number}", (number + 1) * self.seconds - now


@dataclass(frozen=True)
class WindowCount:
    count: int
    # Seconds until the current window ends and the count starts again from zero.
    retry_after: float

    def over(self, window: Window) -> bool:
        return self.count > window.limit


def windows_hit(
    *, windows: Sequence[Window], unless_full: Window | None = None, now: float
) -> list[WindowCount] | None:
    """Count one hit in the current window of each of `windows` (the counts include it),
    unless `unless_full`'s current window already holds its limit: then count nothing and
    answer None.

    The window's number is part of each cache key, and the key lives for two windows, so it
    is only ever incremented while it exists. Everything is one cache call
    (`count_unless_gate_full`: one Redis round trip, atomic, and never a counter without
    an expiry). If the cache is unreachable nothing is counted and every count is 0.
    """
    keyed = [window.current(now) for window in windows]
    gate = None
    if unless_full is not None:
        gate = (unless_full.current(now)[0], unless_full.limit)
    try:
        counts = cache_count_unless_gate_full(
            [(key, window.seconds * 2) for window, (key, _) in zip(windows, keyed, strict=True)],
            gate,
        )
    except CACHE_ERRORS:
        for window in (*windows, *([unless_full] if unless_full else [])):
            _warn_unreachable(window.key)
        counts = [0] * len(windows)
    if counts is None:
        return None
    return [
        WindowCount(count=count, retry_after=retry_after)
        for count, (_, retry_after) in zip(counts, keyed, strict=True)
    ]


def window_retry_after(window: Window, now: float) -> float:
    """Seconds until `window`'s current window ends."""
    return window.current(now)[1]


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
    per client address, sign-in included.

    DRF's `BaseThrottle.get_ident` rule, read straight from the WSGI environ: DRF reads the
    header through `request.headers`, which copies every header of the request, and every
    bearer request asks this once."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    remote = request.META.get("REMOTE_ADDR") or ""
    proxies = api_settings.NUM_PROXIES
    if proxies is None:
        return "".join(forwarded.split()) if forwarded else remote
    if proxies == 0 or forwarded is None:
        return remote
    addresses = forwarded.split(",")
    return addresses[-min(proxies, len(addresses))].strip()
