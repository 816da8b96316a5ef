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

    assert ours == negotiated(DefaultContentNegotiation(), accept, renderers, query)
