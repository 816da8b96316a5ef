"""OpenAPI generation: component and operation names that stay unique across apps.

Views declare their serializers as nested `InputSerializer` / `OutputSerializer` classes
(one per operation, by house style), which drf-spectacular would name identically in
every view. Names are qualified with the view instead, and operation ids come from the
view and method, so no component or operation ever collides.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema


class QualifiedAutoSchema(AutoSchema):
    def _get_serializer_name(
        self, serializer: Any, direction: str, bypass_extensions: bool = False
    ) -> str:
        name = super()._get_serializer_name(serializer, direction, bypass_extensions)
        owner = type(serializer).__qualname__.rpartition(".")[0]
        return f"{owner}{name}" if owner and not name.startswith(owner) else name

    def get_operation_id(self) -> str:
        return f"{type(self.view).__name__}_{self.method.lower()}"
