"""A document search is bounded: the bytes one request decrypts, with a cursor to go on, and
how many searches one person runs at once."""

from __future__ import annotations

import threading
from urllib.parse import urlencode

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache
from django.test import override_settings

from automation import tools
from automation.tests.api.test_automation_documents import note
from automation.tests.test_document_tools import context
from conftest import assert_error
from workspaces.ratelimit import TooManyInProgress, in_progress_slot


def search_url(tenant, **query: str) -> str:
    return f"/api/v1/automation/workspaces/{tenant.workspace.pk}/documents/search?" + urlencode(
        query
    )


def searches_of(user) -> str:
    return f"searches-in-progress:user-{user.pk}"


def test_a_search_past_its_byte_budget_answers_truncated_with_a_cursor(tenant, settings):
    settings.SEARCH_MAX_DECRYPTED_BYTES = 2500
    for n in range(3):
        note(tenant, f"notes/n{n}.md", f"tea {n} " + "x" * 994)  # 1000 bytes each
    client = tenant.client_for(tenant.member)

    first = client.get(search_url(tenant, q="tea")).json()
    rest = client.get(search_url(tenant, q="tea", cursor=first["nextCursor"])).json()

    assert [hit["path"] for hit in first["results"]] == ["notes/n0.md", "notes/n1.md"]
    assert first["truncated"] is True
    assert [hit["path"] for hit in rest["results"]] == ["notes/n2.md"]
    assert (rest["truncated"], rest["nextCursor"]) == (False, None)


def test_a_cursor_this_search_did_not_give_out_is_refused_naming_it(tenant, make_tenant, settings):
    """The cursor was the last path searched: a forged one (`notes/n1.md` typed by hand)
    silently skipped every document before it. Signed, per workspace and query, as a list's
    cursor is, a forged or foreign one is refused instead."""
    settings.SEARCH_MAX_DECRYPTED_BYTES = 1500
    for n in range(3):
        note(tenant, f"notes/n{n}.md", f"tea {n} " + "x" * 994)
    other = make_tenant()
    note(other, "notes/n0.md", "tea " + "x" * 996)
    note(other, "notes/n1.md", "tea " + "x" * 996)
    client = tenant.client_for(tenant.member)
    given = client.get(search_url(tenant, q="tea")).json()["nextCursor"]
    foreign = other.client_for(other.member).get(search_url(other, q="tea")).json()["nextCursor"]

    forged = client.get(search_url(tenant, q="tea", cursor="notes/n1.md"))
    tampered = client.get(search_url(tenant, q="tea", cursor=given.replace("n0", "n1")))
    from_another_workspace = client.get(search_url(tenant, q="tea", cursor=foreign))
    from_another_query = client.get(search_url(tenant, q="x", cursor=given))

    assert given is not None
    assert foreign is not None
    for refused in (forged, tampered, from_another_workspace, from_another_query):
        error = assert_error(refused, 400, "VALIDATION_FAILED")
        assert error["detail"] == {"fields": {"cursor": ["Not a cursor this search gave out."]}}
    resumed = client.get(search_url(tenant, q="tea", cursor=given)).json()
    assert [hit["path"] for hit in resumed["results"]] == ["notes/n1.md"]


def test_one_person_runs_a_bounded_number_of_searches_at_once(tenant, settings):
    settings.SEARCH_CONCURRENCY_PER_USER = 2
    note(tenant, "notes/a.md", "green tea")
    client = tenant.client_for(tenant.member)
    key = searches_of(tenant.member)

    # Two searches of the member are in progress (from any credential of theirs).
    with (
        in_progress_slot(key=key, limit=2, timeout=60),
        in_progress_slot(key=key, limit=2, timeout=60),
    ):
        third = client.get(search_url(tenant, q="tea"))
        someone_else = tenant.client_for(tenant.admin).get(search_url(tenant, q="tea"))

    after = client.get(search_url(tenant, q="tea"))
    assert third.status_code == 429
    assert third.json()["error"]["code"] == "RATE_LIMITED"
    assert third.json()["error"]["detail"] == {"retryAfterSeconds": 1}
    assert third["Retry-After"] == "1"
    assert someone_else.status_code == 200
    assert [hit["path"] for hit in after.json()["results"]] == ["notes/a.md"]
    assert cache.get(key) == 0  # every slot was given back


def test_the_assistants_search_tool_is_bounded_the_same_way(assistant, settings):
    settings.SEARCH_CONCURRENCY_PER_USER = 1
    note(assistant.tenant, "notes/a.md", "green tea")
    turn = context(assistant)

    with in_progress_slot(key=searches_of(assistant.tenant.member), limit=1, timeout=60):
        refused = tools.search_documents(turn, query="tea")
    found = tools.search_documents(turn, query="tea")

    assert (refused["status"], refused["code"]) == ("refused", "RATE_LIMITED")
    assert [hit["path"] for hit in found["results"]] == ["notes/a.md"]
    assert (found["truncated"], found["nextCursor"]) == (False, None)


CACHES = {
    "locmem": {"default": {"BACKEND": "memory_project.cache.LocMemCache"}},
    "redis": django_settings.CACHES,
}


@pytest.mark.parametrize("backend", ["locmem", "redis"])
def test_of_many_concurrent_searches_exactly_the_limit_hold_a_slot(backend):
    if backend == "redis" and not django_settings.CACHES["default"]["BACKEND"].endswith(
        "RedisCache"
    ):
        pytest.skip("needs REDIS_URL: the race is against a real Redis (CI sets it)")
    contenders = 24
    # Every contender has tried before any holder lets go: the holders wait here.
    all_tried = threading.Barrier(contenders)
    outcomes: list[str] = []
    lock = threading.Lock()

    def contend() -> None:
        try:
            with in_progress_slot(key="searches-in-progress:user-1", limit=3, timeout=60):
                with lock:
                    outcomes.append("held")
                all_tried.wait(timeout=30)
        except TooManyInProgress:
            with lock:
                outcomes.append("refused")
            all_tried.wait(timeout=30)

    with override_settings(CACHES=CACHES[backend]):
        cache.clear()
        threads = [threading.Thread(target=contend) for _ in range(contenders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        left = cache.get("searches-in-progress:user-1")
        cache.clear()

    assert outcomes.count("held") == 3
    assert outcomes.count("refused") == contenders - 3
    assert left == 0
