"""Redis down: only what needs a key session's key is refused (503 with Retry-After); the
throttles let requests through with a warning, and everything else is served as usual."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from automation.models import Admission, CommitFence
from automation.tokens import delivery_credential_cache_key
from memory.selectors import memory_current_get
from workspaces.models import KeySession, KeySessionRevocation


@contextmanager
def redis_down() -> Iterator[None]:
    """The cache is a Redis that is not running: a loopback port nothing listens on (held
    bound meanwhile, so nothing else can take it)."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        backend = "memory_project.cache.RedisCache"
        location = f"redis://127.0.0.1:{port}/0"
        with override_settings(CACHES={"default": {"BACKEND": backend, "LOCATION": location}}):
            yield


def unavailable(response) -> None:
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "KEY_SESSION_STORE_UNAVAILABLE"
    assert response.json()["error"]["detail"] == {"retryAfterSeconds": 10}
    assert response["Retry-After"] == "10"


def test_with_redis_down_reads_and_saves_are_served_and_the_throttles_warn(
    memory_api, memory_revision, caplog
):
    with redis_down(), caplog.at_level(logging.WARNING, logger="workspaces.ratelimit"):
        read = memory_api.get()
        saved = memory_api.save("- likes tea\n- and cake\n", base=1)

    assert (read.status_code, read.json()["content"]) == (200, "- likes tea\n")
    assert (saved.status_code, saved.json()["version"]) == (200, 2)
    current = memory_current_get(workspace=memory_revision.file.workspace)
    assert (current.version, current.content) == (2, "- likes tea\n- and cake\n")
    assert any("throttle" in record.getMessage() for record in caplog.records)


def test_with_redis_down_a_search_and_a_wrong_token_get_their_usual_answers(tenant, caplog):
    client = tenant.client_for(tenant.member)
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Bearer iap_not-a-token")
    url = f"/api/v1/automation/workspaces/{tenant.workspace.pk}/documents/search"
    note = client.put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/documents?path=tea.md",
        {"content": "green tea"},
        format="json",
        HTTP_X_BASE_VERSION="0",
    )
    assert note.status_code == 200, note.content

    with redis_down(), caplog.at_level(logging.WARNING, logger="workspaces.ratelimit"):
        searched = client.get(url, {"q": "tea"})
        refused = stranger.get(url, {"q": "tea"})

    assert searched.status_code == 200, searched.content
    assert [hit["path"] for hit in searched.json()["results"]] == ["tea.md"]
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "TOKEN_INVALID"
    warned = {record.getMessage() for record in caplog.records}
    assert any("searches-in-progress" in message for message in warned)
    assert any("bearer" in message for message in warned), warned


def test_with_redis_down_opening_a_key_session_is_503_and_stores_no_session(tenant):
    client = tenant.client_for(tenant.member)

    with redis_down():
        response = client.post(f"/api/v1/workspaces/{tenant.workspace.pk}/key-sessions")

    unavailable(response)
    assert not KeySession.objects.exists()


def test_with_redis_down_key_sessions_are_listed_as_not_live(assistant):
    client = assistant.tenant.client_for(assistant.tenant.member)
    url = f"/api/v1/workspaces/{assistant.tenant.workspace.pk}/key-sessions"

    with redis_down():
        response = client.get(url)

    assert response.status_code == 200
    assert [(row["id"], row["live"]) for row in response.json()["results"]] == [
        (str(assistant.key_session.pk), False)
    ]


def test_with_redis_down_a_key_session_is_still_revoked(assistant):
    client = assistant.tenant.client_for(assistant.tenant.member)

    with redis_down():
        response = client.delete(f"/api/v1/automation/key-sessions/{assistant.key_session.pk}")

    assert response.status_code == 204
    assert KeySessionRevocation.objects.filter(key_session=assistant.key_session).exists()


def runtime_credential(assistant, capture) -> tuple[Admission, str]:
    """A turn admitted while Redis was up, and the delivery credential its runtime holds."""
    with capture(execute=True):
        admission = assistant.send()
    return admission, cache.get(delivery_credential_cache_key(admission.pk))


def test_with_redis_down_recall_is_unavailable_and_says_so_in_the_receipt(
    assistant, django_capture_on_commit_callbacks, turns_held
):
    admission, credential = runtime_credential(assistant, django_capture_on_commit_callbacks)
    url = f"/api/v1/automation/workspaces/{assistant.tenant.workspace.pk}/memory"

    with redis_down():
        response = APIClient().get(
            url, {"purpose": "recall"}, HTTP_AUTHORIZATION=f"Delivery {credential}"
        )

    assert response.status_code == 200
    assert response.json() == {"status": "unavailable", "version": None, "text": None}
    assert Admission.objects.get(pk=admission.pk).recall_status == "unavailable"


def test_with_redis_down_the_automatic_writer_is_503_and_writes_nothing(
    assistant, django_capture_on_commit_callbacks, turns_held
):
    admission, credential = runtime_credential(assistant, django_capture_on_commit_callbacks)
    url = f"/api/v1/automation/workspaces/{assistant.tenant.workspace.pk}/memory"
    change = {"expectedVersion": 1, "changes": [{"op": "add", "line": "- likes green tea"}]}

    with redis_down():
        response = APIClient().put(
            url,
            change,
            format="json",
            HTTP_AUTHORIZATION=f"Delivery {credential}",
            HTTP_IDEMPOTENCY_KEY=f"memory:{admission.pk}",
            HTTP_X_KEY_SESSION=str(assistant.key_session.pk),
        )

    unavailable(response)
    assert not CommitFence.objects.exists()
    assert memory_current_get(workspace=assistant.tenant.workspace).version == 1
    assert Admission.objects.get(pk=admission.pk).status == "admitted"


def test_with_redis_down_a_sent_message_still_runs_its_turn_to_the_end(
    assistant, django_capture_on_commit_callbacks
):
    client = assistant.tenant.client_for(assistant.tenant.member)

    with redis_down(), django_capture_on_commit_callbacks(execute=True):
        response = assistant.post_message(client, idempotency_key="outage-1")

    assert response.status_code == 202, response.content
    admission = Admission.objects.select_related("turn").get(pk=response.json()["admissionId"])
    assert admission.turn.state == "completed"
    assert admission.recall_status == "unavailable"


def test_with_redis_down_the_memory_frame_opens_without_a_key_session(client, tenant):
    client.force_login(tenant.member)

    with redis_down():
        frame = client.get(reverse("memory:frame", kwargs={"workspace_id": tenant.workspace.pk}))
        opened = client.post(
            reverse("workspaces:key-session-open", kwargs={"workspace_id": tenant.workspace.pk})
        )

    assert frame.status_code == 200
    assert opened.status_code == 302
    assert not KeySession.objects.exists()
