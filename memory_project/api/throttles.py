"""Rate limits: per credential on every API request, and a tighter one on writes.

Rates are read at request time (not at import, as DRF's SimpleRateThrottle does), so a
changed setting takes effect without re-importing the class.

Each limit is a fixed window counted by one atomic cache increment
(`workspaces.ratelimit.window_hit`), not DRF's read-modify-write request history, which
let concurrent requests all read the same history and pass together: of N concurrent
requests exactly the rate passes. Like every limit there, they fail open when Redis is down.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from workspaces.ratelimit import window_hit

# RFC 9110's safe methods: they change nothing, so neither the write limit nor the Origin
# gate (memory_project/middleware.py) applies to them.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class _ScopedThrottle(SimpleRateThrottle):
    num_requests: int
    duration: int
    retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        hit = window_hit(key=key, window_seconds=self.duration, now=self.timer())
        self.retry_after = hit.retry_after
        return hit.count <= self.num_requests

    def wait(self) -> float | None:
        return self.retry_after

    def get_rate(self) -> str | None:
        rates: dict[str, Any] = api_settings.DEFAULT_THROTTLE_RATES
        return rates.get(str(self.scope))

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not request.user or not request.user.is_authenticated:
            return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
        return self.cache_format % {"scope": self.scope, "ident": f"user-{request.user.pk}"}


class CredentialRateThrottle(_ScopedThrottle):
    scope = "credential"


class WriteRateThrottle(_ScopedThrottle):
    scope = "write"

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)
