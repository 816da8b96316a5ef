"""Rate limits: per credential on every API request, a tighter one on writes, and the
failure gate of a bearer credential's client address, judged in one cache call.

Rates are read at request time (not at import, as DRF's SimpleRateThrottle does), so a
changed setting takes effect without re-importing the class.

Each limit is a fixed window counted by one atomic cache increment
(`workspaces.ratelimit.windows_hit`), not DRF's read-modify-write request history, which
let concurrent requests all read the same history and pass together: of N concurrent
requests exactly the rate passes. Like every limit there, they fail open when Redis is down.
"""

from __future__ import annotations

import functools
import time
from typing import Any, ClassVar

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from workspaces.authentication import BearerAuthentication, Credential, bearer_failure_gate
from workspaces.ratelimit import Window, window_retry_after, windows_hit

# RFC 9110's safe methods: they change nothing, so neither the write limit nor the Origin
# gate (memory_project/middleware.py) applies to them.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

# The periods of a rate, by their first letter, as DRF reads them (memory_project/env.py).
PERIOD_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@functools.cache
def _parse_rate(rate: str) -> tuple[int, int]:
    count, period = rate.split("/")
    return int(count), PERIOD_SECONDS[period[0]]


class RequestRateThrottle(BaseThrottle):
    """The `credential` rate on every request and the `write` rate on every unsafe one,
    per user (per bot for a bot's token; per client address without either); and, for a
    request authenticated by a bearer token, the failure gate of its address
    (`workspaces.authentication`), which `BearerAuthentication` leaves to this throttle on
    the views that have it, so that the gate and the counts are one cache call (one Redis
    round trip) per request."""

    judges_bearer_failures: ClassVar[bool] = True
    timer = staticmethod(time.time)
    retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        windows = self._windows(request)
        gate = None
        if isinstance(request.successful_authenticator, BearerAuthentication):
            gate = bearer_failure_gate(request)
        if not windows and gate is None:
            return True
        now = self.timer()
        counts = windows_hit(windows=windows, unless_full=gate, now=now)
        if counts is None:
            assert gate is not None  # only a gate refuses before counting
            self.retry_after = window_retry_after(gate, now)
            return False
        refused = [
            count.retry_after
            for window, count in zip(windows, counts, strict=True)
            if count.over(window)
        ]
        self.retry_after = max(refused, default=None)
        return not refused

    def wait(self) -> float | None:
        return self.retry_after

    def _windows(self, request: Request) -> list[Window]:
        credential = request.auth
        if isinstance(credential, Credential) and credential.bot is not None:
            # A bot's credential carries its issuer as `user`: counted there, a busy bot would
            # spend its issuer's rate and lock them out of their own requests.
            ident = f"bot-{credential.bot.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = str(self.get_ident(request))
        rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES
        scopes = ["credential"] if request.method in SAFE_METHODS else ["credential", "write"]
        windows = []
        for scope in scopes:
            rate = rates.get(scope)
            if rate is not None:
                limit, seconds = _parse_rate(rate)
                windows.append(
                    Window(key=f"throttle_{scope}_{ident}", limit=limit, seconds=seconds)
                )
        return windows
