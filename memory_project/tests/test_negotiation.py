"""The content negotiation's shortcut gives what DRF's own rules give."""

from __future__ import annotations

from typing import Any

import pytest
from django.http import Http404
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from memory_project.api.negotiation import ContentNegotiation
from memory_project.tests.test_error_shape import assert_shape

ACCEPTS = [
    None,
    "*/*",
    "application/json",
    "application/json; indent=4",
    "text/html",
    "text/html, */*;q=0.1",
    "application/*",
    "",
]


def negotiated(negotiation: object, accept: str | None, renderers: list, query: str = "") -> object:
    headers: dict[str, Any] = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().get(f"/api/v1/ping{query}", **headers))
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers)  # type: ignore[attr-defined]
    except NotAcceptable:
        return "406"
    except Http404:  # a format no renderer has
        return "404"
    return type(renderer), media_type


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize(
    "renderers", [[JSONRenderer()], [BrowsableAPIRenderer(), JSONRenderer()]], ids=["json", "two"]
)
@pytest.mark.parametrize("query", ["", "?format=json", "?format=api"])
def test_the_shortcut_negotiates_as_drf_does(accept, renderers, query):
    ours = negotiated(ContentNegotiation(), accept, renderers, query)

    drfs = negotiated(DefaultContentNegotiation(), accept, renderers, query)
    # Except that a format no renderer has is 406, as DRF answers an unsatisfiable Accept.
    assert ours == ("406" if drfs == "404" else drfs)


@pytest.mark.parametrize("route", ["/api/v1/ping", "/api/v1/workspaces/{ws}/memory"])
@pytest.mark.parametrize(
    "ask", [{"HTTP_ACCEPT": "application/xml"}, {"format": "xml"}], ids=["accept", "format"]
)
def test_asking_for_a_format_no_renderer_has_is_406_however_it_is_asked(tenant, route, ask):
    client = tenant.client_for(tenant.member)
    query = {key: value for key, value in ask.items() if not key.startswith("HTTP_")}
    headers = {key: value for key, value in ask.items() if key.startswith("HTTP_")}

    response = client.get(route.format(ws=tenant.workspace.pk), query, **headers)

    assert_shape(response, 406, "NOT_ACCEPTABLE")
