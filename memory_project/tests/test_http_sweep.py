"""Every /api/ route, every HTTP verb, as a client probing the contract's edges meets them.

Routes are found by walking the resolver (as the tenancy matrix finds them), so a route is
swept the day it is added. For each one:

- a verb it does not take is 405 `METHOD_NOT_ALLOWED` in the one error shape, with an `Allow`
  header naming exactly the verbs it takes; OPTIONS is one of those it does not take (the
  schema, not a verb, describes a route);
- the credential is judged before the verb, as DRF judges it: without one, a verb the route
  does not take is 401 on a route that needs one, as a verb it takes is, and a credential of
  a kind the route does not take (a bot's token on a person's route, a person's on a bot's
  or the mirror's) is refused as such, not answered 405;
- a state-changing verb from an untrusted Origin is 403 `CROSS_ORIGIN_REJECTED` before
  anything else is judged (the credential, the query, the body, the verb);
- no answer is a 500, whatever the body: `{`, nothing, or a body of another type.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import get_resolver
from rest_framework.permissions import AllowAny

from memory_project.tests.conftest import TenantWorld
from memory_project.tests.test_tenancy_matrix import (
    KEYWORD,
    PRECONDITIONS,
    _authentication_classes,
    _walk,
)

VERBS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")
UNTRUSTED_ORIGIN = "https://evil.example"
# How a credential of a kind the route does not take is refused.
CREDENTIAL_REFUSALS = {"CREDENTIAL_KIND_REFUSED", "TOKEN_SCOPE_REFUSED"}
# (body, content type) that a careless or hostile client sends.
BODIES = [("{", "application/json"), ("", "application/json"), ("x", "text/plain")]


def _routes() -> list[Any]:
    return [
        pytest.param(route, pattern.callback.view_class, id=f"/{route}")  # type: ignore[attr-defined]
        for route, pattern in _walk(get_resolver().url_patterns)
        if route.startswith("api/")
    ]


def _allowed(view: type) -> set[str]:
    """The verbs a route takes: those its view answers, OPTIONS never (every view has one,
    DRF's, which answers metadata the schema does not describe)."""
    taken = {
        verb for verb in ("GET", "POST", "PUT", "PATCH", "DELETE") if hasattr(view, verb.lower())
    }
    # Django answers HEAD with GET where a view has no HEAD of its own.
    return taken | ({"HEAD"} if "GET" in taken else set())


def _needs_a_credential(view: type) -> bool:
    return any(not isinstance(permission, AllowAny) for permission in view().get_permissions())


def _error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "detail"}, body
    return body["error"]


@pytest.mark.parametrize(("route", "view"), _routes())
def test_every_route_answers_every_verb_as_the_contract_says(make_world, route, view):
    world: TenantWorld = make_world()
    url = "/" + KEYWORD.sub(lambda match: str(world.ids[match.group(1)]), route)
    client = world.clients[_authentication_classes(view)[0]]
    anonymous = type(client)()
    allowed = _allowed(view)
    problems: list[str] = []
    # What a route may need before it looks further (typed loosely for the client's **extra).
    headers: dict[str, Any] = PRECONDITIONS

    def expect(label: str, response: Any, status: int, code: str | None) -> None:
        if response.status_code != status:
            problems.append(f"{label}: {response.status_code}, not {status}")
        elif code is not None and _error(response)["code"] != code:
            problems.append(f"{label}: {_error(response)['code']}, not {code}")

    for verb in sorted(set(VERBS) - allowed):
        response = client.generic(verb, url, **headers)
        # A HEAD answer has no body to judge.
        expect(
            f"{verb} with a credential",
            response,
            405,
            None if verb == "HEAD" else "METHOD_NOT_ALLOWED",
        )
        if {each.strip() for each in response.get("Allow", "").split(",")} != allowed:
            problems.append(f"{verb}: Allow is {response.get('Allow')!r}, not {sorted(allowed)}")
        # Its query is not judged: no operation of the route is being asked for.
        response = client.generic(verb, f"{url}?unknownParameter=1", **headers)
        expect(
            f"{verb} with a query",
            response,
            405,
            None if verb == "HEAD" else "METHOD_NOT_ALLOWED",
        )
        if not _needs_a_credential(view):
            continue
        response = anonymous.generic(verb, url)
        expect(
            f"{verb} without a credential",
            response,
            401,
            None if verb == "HEAD" else "AUTHENTICATION_REQUIRED",
        )
        # A credential of a kind the route does not take is refused as such, whatever the verb.
        for kind, other in world.clients.items():
            if kind in _authentication_classes(view):
                continue
            response = other.generic(verb, url, **headers)
            if response.status_code not in {401, 403} or (
                verb != "HEAD" and _error(response)["code"] not in CREDENTIAL_REFUSALS
            ):
                problems.append(f"{verb} as {kind.__name__}: {response.status_code}")

    for verb in STATE_CHANGING:
        # Everything else about the request is wrong too: the Origin is judged first.
        response = anonymous.generic(
            verb,
            f"{url}?unknownParameter=1",
            "{",
            "application/json",
            HTTP_ORIGIN=UNTRUSTED_ORIGIN,
        )
        expect(f"{verb} from {UNTRUSTED_ORIGIN}", response, 403, "CROSS_ORIGIN_REJECTED")

    # Last: a taken verb with an empty body may change the world's objects.
    for verb in VERBS:
        for body, content_type in BODIES:
            response = client.generic(verb, url, body, content_type, **headers)
            if response.status_code >= 500:
                problems.append(f"{verb} {body!r} as {content_type}: {response.status_code}")

    assert problems == []
