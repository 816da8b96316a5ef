"""Parsing of request bodies and query strings by a serializer, one way for every view."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ParseError, UnsupportedMediaType, ValidationError
from rest_framework.request import Request

from memory_project.api.serializers import StrictSerializer


def validated(serializer: serializers.Serializer) -> dict[str, Any]:
    """The serializer's validated data, or its VALIDATION_FAILED refusal."""
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class _NoBody(StrictSerializer):
    """The body of a route that takes none: absent, or an empty JSON object."""


# What `no_body_require` refuses with, for the schema.
NO_BODY_REFUSALS = (ParseError, ValidationError, UnsupportedMediaType)


def no_body_require(request: Request) -> None:
    """Refuse a body sent to a route that takes none, rather than ignore it: each field of a
    JSON object is VALIDATION_FAILED and named, a body of another type 415, as on a route
    that takes one. A client asking for something the route does not offer (a shorter-lived
    credential) learns so instead of getting the default."""
    if request.stream is None:  # DRF's None: no body at all
        return
    if isinstance(request.data, bytes):
        # A raw body parser's (a memory space document's route reads Markdown for its PUT):
        # this method takes no body of that type, as it takes no JSON one there either.
        raise UnsupportedMediaType(request.content_type, detail="This request takes no body.")
    validated(_NoBody(data=request.data))
