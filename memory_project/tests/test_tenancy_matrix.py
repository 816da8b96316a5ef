"""The tenancy matrix, generated from the URL configuration: every /api/ route that names an
object, called by one tenant with another tenant's object, answers 404 and changes nothing.

Routes are found by walking the resolver, not listed by hand, so a new route is in the matrix
the day it is added; a route naming a kind of object the matrix cannot build fails here until
TenantWorld (conftest.py) makes one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.module_loading import import_string
from rest_framework.views import APIView

from automation.models import Admission, Conversation
from memory.models import MemoryPolicy, Proposal
from memory_project.tests.conftest import TenantWorld
from memory_project.tests.test_error_shape import assert_shape
from workspaces.models import (
    ApiToken,
    Bot,
    FileVersion,
    KeySession,
    TeamMembership,
    Workspace,
    WorkspaceMembership,
)

KEYWORD = re.compile(r"<(?:\w+:)?(\w+)>")
METHODS = ("get", "post", "put", "patch", "delete")
# Headers a route may require before it looks anything up; sent so that the answer is the
# route's tenancy decision, not a missing precondition.
PRECONDITIONS = {"HTTP_X_BASE_VERSION": "1", "HTTP_IDEMPOTENCY_KEY": "matrix"}


def _walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern


def api_routes_with_ids() -> list[tuple[str, type]]:
    """(route, view class) for every /api/ route whose URL names an object."""
    return [
        (route, pattern.callback.view_class)  # type: ignore[attr-defined]
        for route, pattern in _walk(get_resolver().url_patterns)
        if route.startswith("api/") and KEYWORD.search(route)
    ]


def _authentication_classes(view: type) -> list[type]:
    # Declared on the view or a base of it (a view's own class attribute wins), else the
    # settings' defaults.
    for klass in view.__mro__:
        if klass is APIView:
            break
        declared = klass.__dict__.get("authentication_classes")
        if declared is not None:
            return list(declared)
    rest_framework: dict[str, Any] = django_settings.REST_FRAMEWORK
    names: list[str] = rest_framework["DEFAULT_AUTHENTICATION_CLASSES"]
    return [import_string(name) for name in names]


def matrix() -> list[Any]:
    cases = []
    for route, view in api_routes_with_ids():
        for method in METHODS:
            if hasattr(view, method):
                for authentication in _authentication_classes(view):
                    cases.append(
                        pytest.param(
                            route,
                            method,
                            authentication,
                            id=f"{method.upper()} /{route} as {authentication.__name__}",
                        )
                    )
    return cases


def _state_of(world: TenantWorld) -> dict[str, Any]:
    """Everything of the other tenant that a route could change."""
    workspace = Workspace.objects.get(pk=world.tenant.workspace.pk)
    policy = MemoryPolicy.objects.filter(workspace=workspace).values().first()
    return {
        "consent": (workspace.ai_enabled, workspace.ai_consent_revision),
        "policy": policy,
        "revisions": list(
            FileVersion.objects.filter(file__workspace=workspace).values_list("pk", flat=True)
        ),
        "proposals": list(Proposal.objects.filter(workspace=workspace).values("pk", "status")),
        "sessions": list(KeySession.objects.filter(workspace=workspace).values("pk", "revoked_at")),
        "tokens": list(
            ApiToken.objects.filter(user=world.tenant.member).values("pk", "revoked_at")
        ),
        "bots": list(Bot.objects.filter(team=world.tenant.team).values()),
        "bot tokens": list(
            ApiToken.objects.filter(bot__team=world.tenant.team).values("pk", "revoked_at")
        ),
        "members": list(
            WorkspaceMembership.objects.filter(workspace=workspace).values("user_id", "role")
        ),
        "conversations": Conversation.objects.filter(workspace=workspace).count(),
        "admissions": Admission.objects.filter(workspace=workspace).count(),
    }


def test_every_route_naming_an_object_is_in_the_matrix(make_world):
    routes = api_routes_with_ids()
    # The matrix is generated: a new route is covered as soon as it exists, unless it names
    # an object no tenant world provides.
    fillable = set(make_world().ids)
    unfillable = {
        route: missing for route, _ in routes if (missing := set(KEYWORD.findall(route)) - fillable)
    }

    assert routes
    assert not unfillable, f"routes naming objects the matrix cannot build: {unfillable}"


@pytest.mark.parametrize(("route", "method", "authentication"), matrix())
def test_another_tenants_object_is_404_on_every_route(make_world, route, method, authentication):
    caller, other = make_world(), make_world()
    url = "/" + KEYWORD.sub(lambda match: str(other.ids[match.group(1)]), route)
    before = _state_of(other)

    client = caller.clients[authentication]
    response = getattr(client, method)(url, {}, format="json", **PRECONDITIONS)

    assert_shape(response, 404, "NOT_FOUND")
    assert _state_of(other) == before


INTEGER_KEYWORD = re.compile(r"<(?:int|id):(\w+)>")
# Past every integer column of both databases: SQLite refuses to bind it at all.
UNSTORABLE_ID = 10**20


@pytest.mark.parametrize(
    ("route", "method", "authentication"),
    [case for case in matrix() if INTEGER_KEYWORD.search(case.values[0])],
)
def test_an_id_no_row_can_hold_is_404_on_every_route(make_world, route, method, authentication):
    caller = make_world()
    # An owner, so that the bot routes reach the id rather than refusing the caller first.
    TeamMembership.objects.filter(team=caller.tenant.team, user=caller.tenant.member).update(
        role=TeamMembership.Role.OWNER
    )
    url = "/" + INTEGER_KEYWORD.sub(str(UNSTORABLE_ID), route)
    url = KEYWORD.sub(lambda match: str(caller.ids[match.group(1)]), url)
    before = _state_of(caller)

    client = caller.clients[authentication]
    response = getattr(client, method)(url, {}, format="json", **PRECONDITIONS)

    assert_shape(response, 404, "NOT_FOUND")
    assert _state_of(caller) == before
