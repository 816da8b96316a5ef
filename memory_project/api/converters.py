"""The path converter of the API's ids: `<id:workspace_id>`.

Importing this module registers it; each URL module that names an id imports it.
"""

from __future__ import annotations

from django.urls import register_converter
from django.urls.converters import IntConverter


class IdConverter(IntConverter):
    """A whole number in its one spelling, as a query or a header spells one
    (`memory_project.api.serializers.is_whole_number`): Django's `int` also matches `01` and
    `007`, one object under several URLs."""

    regex = "0|[1-9][0-9]*"


register_converter(IdConverter, "id")
