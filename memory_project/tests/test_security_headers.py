"""The headers that tell a browser what the site's pages may do."""

from __future__ import annotations

import pytest
from django.test import Client

from memory_project.tests.test_settings_env import start_up


@pytest.mark.parametrize("path", ["/accounts/login/", "/api/v1/ping", "/admin/login/"])
def test_every_answer_carries_the_content_security_policy(db, path):
    response = Client().get(path)

    policy = dict(
        directive.strip().split(" ", 1)
        for directive in response["Content-Security-Policy"].split(";")
    )
    assert policy["default-src"] == "'self'"
    assert policy["script-src"] == "'self'"
    assert policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["base-uri"] == "'none'"
    assert policy["form-action"] == "'self'"
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_htmx_is_told_not_to_add_its_inline_style(db):
    """htmx adds a <style> element at start unless configured not to; the policy refuses it."""
    page = Client().get("/accounts/login/").content.decode()

    assert '<meta name="htmx-config" content=\'{"includeIndicatorStyles": false}\'>' in page


def test_no_hsts_and_plain_cookies_unless_set(monkeypatch):
    monkeypatch.delenv("HSTS_SECONDS", raising=False)

    settings = start_up(monkeypatch)

    assert settings["SECURE_HSTS_SECONDS"] == 0
    assert settings["SESSION_COOKIE_SECURE"] is False
    assert settings["CSRF_COOKIE_SECURE"] is False


def test_hsts_seconds_turn_on_hsts_and_secure_cookies(monkeypatch):
    settings = start_up(monkeypatch, HSTS_SECONDS="31536000")

    assert settings["SECURE_HSTS_SECONDS"] == 31536000
    assert settings["SESSION_COOKIE_SECURE"] is True
    assert settings["CSRF_COOKIE_SECURE"] is True


def test_hsts_is_sent_on_https_answers(db, settings):
    settings.SECURE_HSTS_SECONDS = 3600

    response = Client().get("/accounts/login/", secure=True)

    assert response["Strict-Transport-Security"] == "max-age=3600"


def test_the_api_docs_page_has_no_inline_script_or_style(db):
    """Its script is served at `?script` and its styles from a file, which the policy allows."""
    page = Client().get("/api/docs/").content.decode()
    script = Client().get("/api/docs/?script")

    assert "<style" not in page
    assert "<script>" not in page
    assert '<script src="/api/docs/?script="></script>' in page
    assert script.status_code == 200
    assert "SwaggerUIBundle" in script.content.decode()


def test_api_answers_are_not_stored_by_a_browser_or_a_proxy(tenant):
    """Memory and notes are sealed at rest on the server; a stored answer would keep their
    text in a browser's disk cache (a read with an ETag would otherwise be stored)."""
    client = Client()
    client.force_login(tenant.member)

    answers = [
        client.get(f"/api/v1/workspaces/{tenant.workspace.pk}/memory"),
        client.get("/api/v1/workspaces/999999/memory"),
        Client().get("/api/v1/ping"),
    ]

    assert [answer.status_code for answer in answers] == [200, 404, 401]
    for answer in answers:
        assert "no-store" in answer["Cache-Control"]
