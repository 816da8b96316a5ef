from __future__ import annotations

import logging

import pytest

from conftest import assert_error
from memory.models import MEMORY_PATH, MemoryPolicy
from memory.selectors import memory_policy_get
from memory.services import memory_save
from workspaces.errors import InvalidText
from workspaces.models import File, FileVersion


def versions(tenant) -> list[int]:
    return list(
        FileVersion.objects.filter(file__workspace=tenant.workspace, file__path=MEMORY_PATH)
        .order_by("version")
        .values_list("version", flat=True)
    )


def test_never_written_memory_reads_empty_at_version_0(memory_api):
    response = memory_api.get()

    assert response.status_code == 200
    assert response.json() == {"content": "", "version": 0, "bytes": 0, "recallable": True}


def test_save_returns_the_exact_new_version_and_reads_back(memory_api, tenant):
    first = memory_api.save("- likes tea\n", base=0)
    second = memory_api.save("- likes tea\n- café ☕\n", base=1)

    assert first.json() == {"version": 1, "bytes": 12, "changeKind": "save"}
    assert second.json() == {"version": 2, "bytes": 24, "changeKind": "save"}
    assert memory_api.get().json()["content"] == "- likes tea\n- café ☕\n"
    assert versions(tenant) == [1, 2]


def test_content_is_stored_exactly_as_sent(memory_api):
    text = "  leading spaces\n\ttab\r\nwindows line\n\n\ntrailing   \n"

    memory_api.save(text, base=0)

    assert memory_api.get().json()["content"] == text


def test_stale_base_version_is_409_and_writes_nothing(memory_api, tenant):
    memory_api.save("mine", base=0)
    memory_api.save("newer", base=1)

    response = memory_api.save("stale draft", base=1)

    error = assert_error(response, 409, "VERSION_CONFLICT")
    assert error["detail"] == {"currentVersion": 2}
    assert memory_api.get().json()["content"] == "newer"
    assert versions(tenant) == [1, 2]


def test_create_only_on_an_existing_document_is_409(memory_api, tenant):
    memory_api.save("first", base=0)

    response = memory_api.save("second first", base=0)

    assert assert_error(response, 409, "VERSION_CONFLICT")["detail"] == {"currentVersion": 1}
    assert versions(tenant) == [1]


def test_base_version_ahead_of_the_document_is_409(memory_api, tenant):
    response = memory_api.save("from the future", base=5)

    assert assert_error(response, 409, "VERSION_CONFLICT")["detail"] == {"currentVersion": 0}
    assert not File.objects.filter(workspace=tenant.workspace).exists()


def test_missing_base_version_is_428_and_never_an_unconditional_write(memory_api, tenant):
    memory_api.save("kept", base=0)

    response = memory_api.save("overwrite attempt", base=None)

    assert_error(response, 428, "BASE_VERSION_REQUIRED")
    assert memory_api.get().json()["content"] == "kept"
    assert versions(tenant) == [1]


@pytest.mark.parametrize("raw", ["abc", "-1", "1.5", "", " ", "\uff11", "99999999999999999999"])
def test_malformed_base_version_is_refused_and_writes_nothing(memory_api, tenant, raw):
    response = memory_api.save("x", base=raw)

    code = "BASE_VERSION_REQUIRED" if not raw.strip() else "INVALID_HEADER"
    status = 428 if not raw.strip() else 400
    assert_error(response, status, code)
    assert versions(tenant) == []


def test_clear_writes_an_empty_revision_and_advances_the_generation(memory_api, tenant):
    memory_api.save("secret plan", base=0)
    MemoryPolicy.objects.create(workspace=tenant.workspace, mode="auto", policy_revision=3)

    response = memory_api.clear(base=1)

    assert response.json() == {"version": 2, "bytes": 0, "changeKind": "clear"}
    assert memory_api.get().json()["content"] == ""
    policy = MemoryPolicy.objects.get(workspace=tenant.workspace)
    assert (policy.mode, policy.policy_revision, policy.clear_generation) == ("auto", 3, 1)


def test_clear_without_a_policy_row_creates_one_at_generation_1(memory_api, tenant):
    memory_api.save("x", base=0)

    memory_api.clear(base=1)

    state = memory_policy_get(workspace=tenant.workspace)
    assert (state.mode, state.policy_revision, state.clear_generation) == ("read_only", 0, 1)


def test_clear_that_lost_the_race_writes_nothing_and_keeps_the_generation(memory_api, tenant):
    memory_api.save("old", base=0)
    memory_api.save("newer text from another frame", base=1)

    response = memory_api.clear(base=1)

    assert assert_error(response, 409, "VERSION_CONFLICT")["detail"] == {"currentVersion": 2}
    assert memory_api.get().json()["content"] == "newer text from another frame"
    assert memory_policy_get(workspace=tenant.workspace).clear_generation == 0
    assert versions(tenant) == [1, 2]


def test_clear_with_content_is_400(memory_api, tenant):
    memory_api.save("x", base=0)

    response = memory_api.put({"content": "not empty"}, 1, HTTP_X_MEMORY_CLEAR="1")

    assert_error(response, 400, "VALIDATION_FAILED")
    assert versions(tenant) == [1]


def test_clear_flag_other_than_0_or_1_is_400(memory_api, tenant):
    response = memory_api.put({"content": ""}, 0, HTTP_X_MEMORY_CLEAR="yes")

    assert assert_error(response, 400, "INVALID_HEADER")["detail"] == {"header": "X-Memory-Clear"}
    assert versions(tenant) == []


def test_undo_restores_an_older_text_as_a_new_revision(memory_api, tenant):
    memory_api.save("v1 text", base=0)
    memory_api.save("v2 text", base=1)

    response = memory_api.undo(restore_version=1, base=2)

    assert response.json() == {"version": 3, "bytes": 7, "changeKind": "undo"}
    assert memory_api.get().json()["content"] == "v1 text"
    assert versions(tenant) == [1, 2, 3]


def test_undo_after_clear_keeps_the_generation_and_revision(memory_api, tenant):
    memory_api.save("before clear", base=0)
    memory_api.clear(base=1)
    before = memory_policy_get(workspace=tenant.workspace)

    memory_api.undo(restore_version=1, base=2)

    assert memory_api.get().json()["content"] == "before clear"
    assert memory_policy_get(workspace=tenant.workspace) == before
    assert before.clear_generation == 1


def test_undo_against_a_stale_base_cannot_overwrite_newer_text(memory_api, tenant):
    memory_api.save("v1", base=0)
    memory_api.save("v2", base=1)
    memory_api.save("v3 newer", base=2)

    response = memory_api.undo(restore_version=1, base=2)

    assert_error(response, 409, "VERSION_CONFLICT")
    assert memory_api.get().json()["content"] == "v3 newer"


def test_undo_to_a_version_that_does_not_exist_is_404(memory_api, tenant):
    memory_api.save("v1", base=0)

    response = memory_api.undo(restore_version=7, base=1)

    assert_error(response, 404, "NOT_FOUND")
    assert versions(tenant) == [1]


@pytest.mark.parametrize(
    "body",
    [{}, {"content": "a", "restoreVersion": 1}, {"content": None}, {"restoreVersion": 0}],
)
def test_malformed_bodies_are_400(memory_api, tenant, body):
    assert_error(memory_api.put(body, 0), 400, "VALIDATION_FAILED")
    assert versions(tenant) == []


def test_text_over_the_recall_bound_is_kept_whole_and_flagged(memory_api, settings):
    text = "ü" * 4097  # 8194 bytes in UTF-8, 4097 characters

    memory_api.save(text, base=0)

    body = memory_api.get().json()
    assert body["content"] == text
    assert (body["bytes"], body["recallable"]) == (8194, False)


def test_text_at_the_recall_bound_is_recallable(memory_api):
    memory_api.save("x" * 8192, base=0)

    assert memory_api.get().json()["recallable"] is True


def test_document_over_the_ceiling_is_422_before_anything_is_written(memory_api, tenant):
    memory_api.save("small", base=0)
    too_big = "é" * (1024 * 1024 + 1)  # one character past 2 MiB of UTF-8

    response = memory_api.save(too_big, base=1)

    error = assert_error(response, 422, "DOCUMENT_TOO_LARGE")
    assert error["detail"] == {"limitBytes": 2 * 1024 * 1024, "bytes": 2 * 1024 * 1024 + 2}
    assert versions(tenant) == [1]
    assert memory_api.get().json()["content"] == "small"


def test_document_at_the_ceiling_is_accepted_whole(memory_api):
    exactly = "a" * (2 * 1024 * 1024)

    response = memory_api.save(exactly, base=0)

    assert response.json()["bytes"] == 2 * 1024 * 1024
    assert memory_api.get().json()["content"] == exactly


def test_another_teams_workspace_is_404_on_every_verb(make_tenant):
    home, other = make_tenant(), make_tenant()
    client = home.client_for(home.member)
    base = f"/api/v1/workspaces/{other.workspace.pk}/memory"

    responses = [
        client.get(base),
        client.put(base, {"content": "x"}, format="json", HTTP_X_BASE_VERSION="0"),
        client.get(f"{base}/versions"),
        client.get(f"{base}/versions/1"),
        client.get(f"{base}/policy"),
        client.put(f"{base}/policy", {"mode": "off", "expectedRevision": 0}, format="json"),
    ]

    for response in responses:
        assert_error(response, 404, "NOT_FOUND")
    assert not File.objects.filter(workspace=other.workspace).exists()
    assert not MemoryPolicy.objects.filter(workspace=other.workspace).exists()


def test_versions_list_describes_each_revision_without_text(memory_api, tenant):
    memory_api.save("private words", base=0)
    memory_api.clear(base=1)
    memory_api.undo(restore_version=1, base=2)

    response = memory_api.client.get(f"{memory_api.url}/versions")

    page = response.json()
    assert [(r["version"], r["changeKind"], r["authorKind"]) for r in page["results"]] == [
        (3, "undo", "human"),
        (2, "clear", "human"),
        (1, "save", "human"),
    ]
    assert page["results"][0]["author"] == tenant.member.username
    assert len(page["results"][0]["ciphertextSha256"]) == 64
    assert (page["next"], page["previous"]) == (None, None)
    assert "private words" not in response.content.decode()


def test_versions_list_pages_by_version(memory_api):
    for base in range(5):
        memory_api.save(f"text {base}", base=base)

    first = memory_api.client.get(f"{memory_api.url}/versions?limit=2").json()
    second = memory_api.client.get(first["next"]).json()
    memory_api.save("written while paging", base=5)
    last = memory_api.client.get(second["next"]).json()
    back = memory_api.client.get(last["previous"]).json()

    assert [r["version"] for r in first["results"]] == [5, 4]
    assert [r["version"] for r in second["results"]] == [3, 2]
    assert [r["version"] for r in last["results"]] == [1]
    assert last["next"] is None
    assert [r["version"] for r in back["results"]] == [3, 2]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [("limit=0", "limit"), ("limit=101", "limit"), ("limit=abc", "limit"), ("cursor=x", "cursor")],
)
def test_versions_list_refuses_bad_paging_as_validation_failed(memory_api, query, parameter):
    response = memory_api.client.get(f"{memory_api.url}/versions?{query}")

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert list(error["detail"]["fields"]) == [parameter]


def test_a_version_opens_with_its_own_text(memory_api):
    memory_api.save("first text", base=0)
    memory_api.save("second text", base=1)

    response = memory_api.client.get(f"{memory_api.url}/versions/1")

    body = response.json()
    assert (body["version"], body["content"], body["changeKind"]) == (1, "first text", "save")


def test_versions_list_runs_a_fixed_number_of_queries(memory_api, django_assert_max_num_queries):
    for base in range(20):
        memory_api.save(f"text {base}", base=base)

    with django_assert_max_num_queries(6):
        response = memory_api.client.get(f"{memory_api.url}/versions")

    assert len(response.json()["results"]) == 20


def test_text_with_a_lone_surrogate_is_400_and_writes_nothing(memory_api, tenant):
    response = memory_api.client.put(
        memory_api.url,
        data='{"content": "broken \\ud800 text"}',
        content_type="application/json",
        HTTP_X_BASE_VERSION="0",
    )

    error = assert_error(response, 400, "VALIDATION_FAILED")
    assert "content" in error["detail"]["fields"]
    assert versions(tenant) == []


def test_the_store_itself_refuses_a_lone_surrogate(tenant):
    with pytest.raises(InvalidText):
        memory_save(
            workspace=tenant.workspace, author=tenant.member, base_version=0, content="x\ud800"
        )

    assert versions(tenant) == []


def test_a_stale_save_is_logged_at_info_not_as_a_warning(memory_api, caplog):
    memory_api.save("mine", base=0)
    memory_api.save("newer", base=1)
    caplog.set_level(logging.INFO, logger="django.request")

    response = memory_api.save("stale draft", base=1)

    assert_error(response, 409, "VERSION_CONFLICT")
    logged = [record for record in caplog.records if record.name == "django.request"]
    assert [(record.levelname, record.status_code) for record in logged] == [("INFO", 409)]
