"""Every /api/ operation refuses a query parameter it does not take, and takes every one its
schema documents.

Routes are found by walking the resolver (as the tenancy matrix finds them) and parameters by
generating the schema, so a new route or a newly documented parameter is covered the day it
is added.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from django.apps import apps
from django.urls import get_resolver
from drf_spectacular.extensions import OpenApiViewExtension
from drf_spectacular.generators import SchemaGenerator

from memory_project.api.schema import query_parameters
from memory_project.tests.conftest import TenantWorld
from memory_project.tests.test_error_shape import assert_shape
from memory_project.tests.test_tenancy_matrix import (
    KEYWORD,
    METHODS,
    PRECONDITIONS,
    _authentication_classes,
    _state_of,
    _walk,
)

# The schema and its browser page: not operations of the API (the schema leaves them out),
# and their `?lang=` is drf-spectacular's.
SCHEMA_PAGES = {"api/schema/", "api/docs/"}
UNKNOWN = "unknownParameter"


def _operations() -> list[Any]:
    return [
        pytest.param(route, view, method, id=f"{method.upper()} /{route}")
        for route, pattern in _walk(get_resolver().url_patterns)
        if route.startswith("api/") and route not in SCHEMA_PAGES
        for view in [pattern.callback.view_class]  # type: ignore[attr-defined]
        for method in METHODS
        if hasattr(view, method)
    ]


def _rows() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def _url(world: TenantWorld, route: str) -> str:
    return "/" + KEYWORD.sub(lambda match: str(world.ids[match.group(1)]), route)


def test_the_schema_pages_are_the_only_routes_left_out():
    unjudged = {
        route
        for route, pattern in _walk(get_resolver().url_patterns)
        if route.startswith("api/")
        for method in METHODS
        if hasattr(pattern.callback.view_class, method)  # type: ignore[attr-defined]
        and query_parameters(pattern.callback, method.upper()) is None
    }

    assert unjudged == SCHEMA_PAGES


@pytest.mark.parametrize(("route", "view", "method"), _operations())
def test_an_unknown_query_parameter_is_refused_on_every_operation(make_world, route, view, method):
    # The caller's own objects, and a credential the route takes: ignoring the parameter
    # would answer, or change, them.
    world = make_world()
    before = (_state_of(world), _rows())

    client = world.clients[_authentication_classes(view)[0]]
    response = getattr(client, method)(
        f"{_url(world, route)}?{UNKNOWN}=1", {}, format="json", **PRECONDITIONS
    )

    error = assert_shape(response, 400, "VALIDATION_FAILED")
    assert error["detail"]["reason"] == "unknown"
    assert list(error["detail"]["fields"]) == [UNKNOWN]
    assert (_state_of(world), _rows()) == before


def _documented() -> list[Any]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        pytest.param(path, method, name, id=f"{method.upper()} {path} ?{name}")
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        for name, location in ((p["name"], p["in"]) for p in operation.get("parameters", []))
        if location == "query"
    ]


@pytest.mark.parametrize(("path", "method", "name"), _documented())
def test_every_documented_query_parameter_is_taken(make_world, path, method, name):
    world = make_world()
    url = re.sub(r"{(\w+)}", lambda match: str(world.ids[match.group(1)]), path)

    # Any credential: what a route takes is judged before the credential is read.
    client = world.clients[next(iter(world.clients))]
    response = getattr(client, method)(f"{url}?{name}=1", {}, format="json", **PRECONDITIONS)

    # The value may be refused (`limit=1` is fine, `cursor=1` is no cursor); the name is not.
    refusal = response.json().get("error", {}) if response.status_code == 400 else {}
    assert refusal.get("detail", {}).get("reason") != "unknown", refusal


def test_the_first_concurrent_requests_of_a_process_read_the_schema_without_failing():
    # drf-spectacular imports an extension's target class at its first match, and two threads
    # matching at once can fail there (the first sets the class it could not import to None
    # while the second still reads it as a name): the first requests of a fresh gunicorn
    # worker (the Team memory page asks for its usage and its list at once) answered 500.
    class NeverInstalled(OpenApiViewExtension):
        target_class = "a_package_never_installed.View"

        def view_replacement(self) -> Any:
            return self.target

    callback = get_resolver().resolve("/api/v1/memory/docs").func
    failures: list[BaseException] = []

    def first_request(barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            query_parameters(callback, "GET")
        except Exception as error:
            failures.append(error)

    try:
        for _ in range(20):
            NeverInstalled.target_class = "a_package_never_installed.View"
            query_parameters.cache_clear()
            barrier = threading.Barrier(8)
            threads = [threading.Thread(target=first_request, args=(barrier,)) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        OpenApiViewExtension._registry.remove(NeverInstalled)
        query_parameters.cache_clear()

    assert failures == []
