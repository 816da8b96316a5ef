"""Every refusal has the one error shape, and one code maps to one status."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from memory_project.api.exceptions import DRF_ERROR_CODES
from memory_project.api.throttles import RequestRateThrottle
from memory_project.gunicorn_conf import EDGE_ERROR_CODES
from workspaces.errors import DomainError

ERRORS_DOC = Path(django_settings.BASE_DIR) / "docs" / "errors.md"


def assert_shape(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "detail"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert isinstance(body["error"]["detail"], dict)
    return body["error"]


def test_401_shape(db):
    assert_shape(APIClient().get("/api/v1/workspaces"), 401, "AUTHENTICATION_REQUIRED")


def test_403_shape(tenant):
    response = tenant.client_for(tenant.member).put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/ai",
        {"enabled": False, "expectedRevision": 0},
        format="json",
    )

    assert_shape(response, 403, "WORKSPACE_ADMIN_REQUIRED")


def test_404_shape_for_an_unknown_object_and_an_unknown_route(tenant):
    client = tenant.client_for(tenant.member)

    assert_shape(client.get("/api/v1/workspaces/999999/ai"), 404, "NOT_FOUND")
    assert_shape(client.get("/api/v1/no-such-route"), 404, "NOT_FOUND")


def test_405_shape(tenant):
    response = tenant.client_for(tenant.member).delete(
        f"/api/v1/workspaces/{tenant.workspace.pk}/ai"
    )

    assert_shape(response, 405, "METHOD_NOT_ALLOWED")


def test_400_shape_for_malformed_json(tenant):
    response = tenant.client_for(tenant.admin).put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/ai",
        data="{not json",
        content_type="application/json",
    )

    assert_shape(response, 400, "MALFORMED_REQUEST")
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0


@pytest.mark.parametrize(
    ("content_type", "data"),
    [("text/plain", "enabled=false"), ("application/x-www-form-urlencoded", "enabled=false")],
)
def test_415_for_a_non_json_write(tenant, content_type, data):
    response = tenant.client_for(tenant.admin).put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/ai", data=data, content_type=content_type
    )

    assert_shape(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0


def test_413_for_a_body_over_the_limit(tenant, settings):
    settings.REQUEST_MAX_BODY_BYTES = 1024
    padding = "x" * 2048

    response = tenant.client_for(tenant.admin).put(
        f"/api/v1/workspaces/{tenant.workspace.pk}/ai",
        data=f'{{"enabled": false, "expectedRevision": 0, "pad": "{padding}"}}',
        content_type="application/json",
    )

    error = assert_shape(response, 413, "REQUEST_TOO_LARGE")
    assert error["detail"]["limitBytes"] == 1024
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 0


def test_429_with_retry_after_when_writes_exceed_the_rate(tenant, settings, monkeypatch):
    rates = dict(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], write="2/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    # One instant: the three writes fall in one rate window whenever the test runs.
    monkeypatch.setattr(RequestRateThrottle, "timer", staticmethod(lambda: 1_000_000.0))
    client = tenant.client_for(tenant.admin)
    url = f"/api/v1/workspaces/{tenant.workspace.pk}/ai"

    for revision in (0, 1):
        client.put(url, {"enabled": True, "expectedRevision": revision}, format="json")
    throttled = client.put(url, {"enabled": False, "expectedRevision": 2}, format="json")

    error = assert_shape(throttled, 429, "RATE_LIMITED")
    assert int(throttled["Retry-After"]) >= 1
    assert error["detail"]["retryAfterSeconds"] == int(throttled["Retry-After"])
    tenant.workspace.refresh_from_db()
    assert tenant.workspace.ai_consent_revision == 2
    assert client.get(url).status_code == 200


def _documented_codes() -> dict[str, int]:
    rows = re.findall(r"^\| `([A-Z_]+)` \| (\d{3}) \|", ERRORS_DOC.read_text(), re.MULTILINE)
    codes: dict[str, int] = {}
    for code, status in rows:
        assert code not in codes, f"{code} is listed twice in docs/errors.md"
        codes[code] = int(status)
    return codes


def _all_subclasses(cls: type[DomainError]) -> list[type[DomainError]]:
    found: list[type[DomainError]] = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found


def test_every_domain_error_code_is_documented_with_its_one_status():
    for app in ("workspaces", "memory", "automation"):
        if importlib.util.find_spec(f"{app}.errors"):
            importlib.import_module(f"{app}.errors")
    documented = _documented_codes()
    raised: dict[str, int] = {}
    for error in _all_subclasses(DomainError):
        assert raised.setdefault(error.code, error.status) == error.status, error.code
        assert documented.get(error.code) == error.status, f"{error.code} missing from errors.md"


def test_every_framework_error_code_is_documented_with_its_one_status():
    documented = _documented_codes()
    for _, code, status in DRF_ERROR_CODES:
        assert documented.get(code) == status, f"{code} missing from errors.md"
    for code, status in [
        ("TOKEN_EXPIRED", 401),
        ("TOKEN_REVOKED", 401),
        ("REQUEST_TOO_LARGE", 413),
        ("CROSS_ORIGIN_REJECTED", 403),
        ("INTERNAL_ERROR", 500),
        ("HOST_NOT_ALLOWED", 400),
        ("LENGTH_REQUIRED", 411),
        ("URI_TOO_LONG", 414),
        ("HEADERS_TOO_LARGE", 431),
        *((code, status) for status, code in EDGE_ERROR_CODES.items()),
    ]:
        assert documented.get(code) == status, f"{code} missing from errors.md"


def test_every_constraint_carries_a_documented_code():
    # The HTTP table and the table of constraint codes below it: every row's first cell.
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", ERRORS_DOC.read_text(), re.MULTILINE))
    for app in ("workspaces", "memory", "automation"):
        for model in apps.get_app_config(app).get_models():
            for constraint in model._meta.constraints:
                assert constraint.violation_error_code in documented, constraint.name
