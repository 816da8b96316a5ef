"""The blame and line review routes: ids, versions and times only, members only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conftest import MemoryApi, assert_error
from memory.models import LineReview
from memory.services import memory_save
from workspaces.models import FileVersion, User
from workspaces.services import team_membership_ensure


def blame(memory_api):
    return memory_api.client.get(f"{memory_api.url}/blame")


def keep(memory_api, line, base, **headers):
    if base is not None:
        headers["HTTP_X_BASE_VERSION"] = str(base)
    return memory_api.client.post(
        f"{memory_api.url}/reviews", {"line": line}, format="json", **headers
    )


def test_blame_names_each_lines_revision_and_never_its_text(memory_api, tenant):
    memory_api.save("- private alpha fact\n- private beta fact\n", base=0)
    memory_api.save("- private alpha fact\n- private gamma fact\n", base=1)

    response = blame(memory_api)

    assert response.status_code == 200
    body = response.json()
    assert (body["version"], body["staleDays"], body["staleLines"]) == (2, 90, 0)
    assert [(line["line"], line["version"]) for line in body["lines"]] == [(1, 1), (2, 2)]
    assert body["lines"][1] == {
        "line": 2,
        "version": 2,
        "authorKind": "human",
        "author": tenant.member.username,
        "changeKind": "save",
        "createdAt": body["lines"][1]["createdAt"],
        "conversationId": None,
        "admissionId": None,
        "stale": False,
        "reviewedAt": None,
    }
    text = response.content.decode()
    for word in ("private", "alpha", "beta", "gamma", "fact"):
        assert word not in text


def test_blame_of_never_written_memory_is_empty_at_version_0(memory_api):
    response = blame(memory_api)

    assert response.json() == {"version": 0, "staleDays": 90, "staleLines": 0, "lines": []}


def test_stale_lines_are_counted_once_the_clock_moves(memory_api, tenant, monkeypatch, settings):
    settings.MEMORY_STALE_DAYS = 30
    memory_api.save("- one\n- two\n", base=0)
    memory_api.save("- one\n- two\n- three\n", base=1)
    assert blame(memory_api).json()["staleLines"] == 0
    in_40_days = timezone.now() + timedelta(days=40)
    FileVersion.objects.filter(file__workspace=tenant.workspace, version=2).update(
        created_at=in_40_days - timedelta(days=1)
    )

    monkeypatch.setattr(timezone, "now", lambda: in_40_days)
    body = blame(memory_api).json()

    assert (body["staleDays"], body["staleLines"]) == (30, 2)
    assert [line["stale"] for line in body["lines"]] == [True, True, False]


def test_keep_answers_201_and_the_line_is_no_longer_stale_without_a_revision(memory_api, tenant):
    memory_api.save("- one\n- two\n", base=0)
    FileVersion.objects.filter(file__workspace=tenant.workspace).update(
        created_at=timezone.now() - timedelta(days=100)
    )
    assert blame(memory_api).json()["staleLines"] == 2

    response = keep(memory_api, 2, base=1)

    assert response.status_code == 201
    body = response.json()
    assert (body["version"], body["line"], body["originVersion"]) == (1, 2, 1)
    after = blame(memory_api).json()
    assert [line["stale"] for line in after["lines"]] == [True, False]
    assert after["lines"][1]["reviewedAt"] == body["reviewedAt"]
    assert after["version"] == 1
    review = LineReview.objects.get()
    assert (review.reviewer, review.origin_line, review.reviewed_version) == (tenant.member, 1, 1)
    assert FileVersion.objects.filter(file__workspace=tenant.workspace).count() == 1


def test_keep_on_a_stale_version_is_409_and_records_nothing(memory_api):
    memory_api.save("- one\n", base=0)
    memory_api.save("- zero\n- one\n", base=1)

    response = keep(memory_api, 1, base=1)

    assert assert_error(response, 409, "VERSION_CONFLICT")["detail"] == {"currentVersion": 2}
    assert not LineReview.objects.exists()


def test_keep_without_a_base_version_is_428(memory_api):
    memory_api.save("- one\n", base=0)

    assert_error(keep(memory_api, 1, base=None), 428, "BASE_VERSION_REQUIRED")
    assert not LineReview.objects.exists()


@pytest.mark.parametrize(
    ("body", "code", "status"),
    [
        ({"line": 0}, "VALIDATION_FAILED", 400),
        ({"line": "1"}, "VALIDATION_FAILED", 400),
        ({"line": 1, "text": "x"}, "VALIDATION_FAILED", 400),
        ({"line": 2}, "NOT_FOUND", 404),
    ],
)
def test_keep_of_a_line_that_is_not_there_is_refused(memory_api, body, code, status):
    memory_api.save("- one\n", base=0)

    response = memory_api.client.post(
        f"{memory_api.url}/reviews", body, format="json", HTTP_X_BASE_VERSION="1"
    )

    assert_error(response, status, code)
    assert not LineReview.objects.exists()


def test_keep_from_a_foreign_origin_is_refused_before_anything_is_read(memory_api):
    memory_api.save("- one\n", base=0)

    response = keep(memory_api, 1, base=1, HTTP_ORIGIN="https://elsewhere.example")

    assert_error(response, 403, "CROSS_ORIGIN_REJECTED")
    assert not LineReview.objects.exists()


def test_another_teams_workspace_and_a_non_member_get_404(make_tenant, tenant):
    other = make_tenant()
    outsider = tenant.client_for(tenant.member)
    url = f"/api/v1/workspaces/{other.workspace.pk}/memory"
    memory_save(workspace=other.workspace, author=other.member, base_version=0, content="- x\n")
    stranger = User.objects.create_user(username="stranger", password="pw-stranger-1")
    team_membership_ensure(team=other.team, user=stranger)
    same_team = other.client_for(stranger)

    for client in (outsider, same_team):
        assert_error(client.get(f"{url}/blame"), 404, "NOT_FOUND")
        refused = client.post(f"{url}/reviews", {"line": 1}, format="json", HTTP_X_BASE_VERSION="1")
        assert_error(refused, 404, "NOT_FOUND")
    assert not LineReview.objects.exists()


def test_blame_needs_a_credential(client, tenant):
    response = client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/memory/blame")

    assert_error(response, 401, "AUTHENTICATION_REQUIRED")


def test_blame_runs_the_same_queries_for_two_origins_and_for_thirty(memory_api, make_tenant):
    def queries_for(api, origins: int) -> int:
        text = ""
        for base in range(origins):
            text += f"- line {base}\n"
            api.save(text, base=base)
        blame(api)  # fills the cache
        with CaptureQueriesContext(connection) as queries:
            response = blame(api)
        assert len(response.json()["lines"]) == origins
        return len(queries)

    other = make_tenant()
    many = MemoryApi(client=other.client_for(other.member), workspace_id=other.workspace.pk)

    assert queries_for(memory_api, 2) == queries_for(many, 30)
