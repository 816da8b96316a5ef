"""The bases of every /api/ view: the API's own, and the schema's pages."""

from __future__ import annotations

from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_project.api.renderers import JSONRenderer


# DRF's APIView without OPTIONS. (Said in comments, not a docstring: drf-spectacular would
# take an inherited docstring as the description of every operation that has none.)
#
# DRF answers OPTIONS with metadata of its own (the view's name and docstring, its parsers and
# renderers) that the OpenAPI schema does not describe; the schema is what describes a route.
# So OPTIONS is a verb no route takes: 405 METHOD_NOT_ALLOWED, judged after the credential as
# every verb a route does not take is, and `Allow` does not name it. No page of another origin
# calls the API (it sends no CORS headers), so there is no preflight to answer.
class ApiView(APIView):
    http_method_names = [name for name in APIView.http_method_names if name != "options"]


class _SchemaPage(APIView):
    """drf-spectacular's pages held to the API's edges: they take GET (and so HEAD) only, and
    a refusal is the one error shape in JSON, not rendered by the page's own YAML or HTML
    renderer."""

    http_method_names = ["get", "head"]

    def handle_exception(self, exc: Exception) -> Response:
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


class SchemaView(_SchemaPage, SpectacularAPIView):
    """The OpenAPI schema, at /api/schema/."""


class SchemaBrowserView(_SchemaPage, SpectacularSwaggerSplitView):
    """The schema's browser page, at /api/docs/."""
