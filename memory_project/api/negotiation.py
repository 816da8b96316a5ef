"""Content negotiation: DRF's, without parsing the Accept header of the usual request, and
with one answer for a format no renderer has."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import Http404
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class ContentNegotiation(DefaultContentNegotiation):
    """A request that names no format and accepts `*/*` (or sends no Accept header, which
    means the same) or exactly the first renderer's media type gets the first renderer and
    its media type: what DRF's rules give it, without parsing and ordering the header on
    every request. Any other request is negotiated by DRF's rules, except that DRF answers a
    `?format=` no renderer has as a missing page (404): it is the refusal an Accept header
    no renderer satisfies gets, 406, whichever way the format was asked for."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: Any = None
    ) -> tuple[BaseRenderer, str]:
        renderers = list(renderers)
        accept = request.META.get("HTTP_ACCEPT", "*/*")
        if (
            renderers
            and format_suffix is None
            and accept in ("*/*", renderers[0].media_type)
            and self.settings.URL_FORMAT_OVERRIDE not in request.query_params
        ):
            return renderers[0], renderers[0].media_type
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404:
            raise NotAcceptable() from None
