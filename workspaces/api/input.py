"""Parsing of request bodies and query strings by a serializer, one way for every view."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def validated(serializer: serializers.Serializer) -> dict[str, Any]:
    """The serializer's validated data, or its VALIDATION_FAILED refusal."""
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
