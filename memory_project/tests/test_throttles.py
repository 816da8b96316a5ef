"""The rate limits count atomically: of many concurrent requests exactly the rate passes."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import override_settings
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.throttling import BaseThrottle

from memory_project.api.throttles import RequestRateThrottle
from workspaces.models import User
from workspaces.ratelimit import client_address
from workspaces.services import api_token_create, bot_token_issue

REDIS = django_settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
CACHES = {
    "locmem": {"default": {"BACKEND": "memory_project.cache.LocMemCache"}},
    "redis": django_settings.CACHES,
}


@pytest.fixture(params=["locmem", "redis"])
def cache_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "redis" and not REDIS:
        pytest.skip("needs REDIS_URL: the race is against a real Redis (CI sets it)")
    with override_settings(CACHES=CACHES[request.param]):
        cache.clear()
        yield request.param
        cache.clear()


@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    # Switch threads as often as possible, so that a read-then-write count would be
    # interleaved between its read and its write instead of running each one whole.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def a_write_by(user_id: int) -> Request:
    request = Request(APIRequestFactory().put("/api/v1/anything"))
    request.user = User(pk=user_id)  # never saved: the throttle needs only its id
    request.auth = None  # as authentication leaves a session's request
    return request


def test_concurrent_writes_of_one_user_pass_exactly_the_write_rate(
    cache_backend, frequent_thread_switches, settings, monkeypatch
):
    rates = dict(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], write="30/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    # One instant for every request: the whole burst falls in one window by construction.
    monkeypatch.setattr(RequestRateThrottle, "timer", staticmethod(lambda: 1_000_000.0))
    writers, writes_each = 32, 4
    barrier = threading.Barrier(writers)
    allowed: list[bool] = []
    lock = threading.Lock()

    def write() -> None:
        barrier.wait(timeout=30)
        for _ in range(writes_each):
            verdict = RequestRateThrottle().allow_request(a_write_by(7), view=None)
            with lock:
                allowed.append(verdict)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(allowed) == writers * writes_each
    assert allowed.count(True) == 30
    # Another user has a budget of their own.
    assert RequestRateThrottle().allow_request(a_write_by(8), view=None)


def test_a_refused_write_says_when_its_window_ends(cache_backend, settings, monkeypatch):
    rates = dict(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], write="1/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    monkeypatch.setattr(RequestRateThrottle, "timer", staticmethod(lambda: 1_000_000.0))
    first, second = RequestRateThrottle(), RequestRateThrottle()

    assert first.allow_request(a_write_by(7), view=None)
    assert not second.allow_request(a_write_by(7), view=None)

    # Windows start at multiples of 60 s: the next one after 1_000_000 is 1_000_020.
    assert second.wait() == pytest.approx(20.0)


@pytest.mark.parametrize("proxies", [None, 0, 1, 2])
@pytest.mark.parametrize(
    "forwarded", [None, "", "203.0.113.7", "203.0.113.7, 198.51.100.2", " 203.0.113.7 ,10.0.0.1 "]
)
def test_the_client_address_follows_drfs_rule(settings, proxies, forwarded):
    # Every limit per client address (the bearer failures, sign-in) reads it as DRF's
    # throttles do, though without building the request's headers.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": proxies}
    headers = {} if forwarded is None else {"HTTP_X_FORWARDED_FOR": forwarded}
    request = Request(APIRequestFactory().get("/", REMOTE_ADDR="192.0.2.9", **headers))

    assert client_address(request) == BaseThrottle().get_ident(request)
    assert client_address(request._request) == BaseThrottle().get_ident(request)


def test_a_bots_requests_are_counted_apart_from_the_person_who_issued_its_token(tenant, settings):
    """A bot token's credential carries its issuer as `user`; counted under that user, a
    busy bot would use up its issuer's rate and lock them out of their own requests."""
    rates = dict(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], credential="3/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    cache.clear()
    bot = tenant.bot_create("scribe", auto_memory="on")
    _, bot_raw = bot_token_issue(bot=bot, actor=tenant.admin, name="ci")
    _, person_raw = api_token_create(user=tenant.admin, team=tenant.team, name="laptop")
    as_bot, as_person = APIClient(), APIClient()
    as_bot.credentials(HTTP_AUTHORIZATION=f"Bearer {bot_raw}")
    as_person.credentials(HTTP_AUTHORIZATION=f"Bearer {person_raw}")

    bot_answers = [as_bot.get("/api/v1/mirror/space?project=repo") for _ in range(4)]

    assert [answer.status_code for answer in bot_answers] == [200, 200, 200, 429]
    assert as_person.get("/api/v1/ping").status_code == 200
