"""A renderer for the one route that answers raw Markdown (a memory space's document)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer, JSONRenderer


class MarkdownRenderer(BaseRenderer):
    """Lets a client that accepts only `text/markdown` reach the route.

    The document itself leaves as a plain response with its own type, so this renders only
    what DRF hands it, which is a refusal: that stays JSON, in the API's one error shape,
    and says so in its Content-Type.
    """

    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        json = JSONRenderer()
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = json.media_type
        return json.render(data, None, renderer_context)
