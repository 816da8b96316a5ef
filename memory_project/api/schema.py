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


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every refusal; docs/errors.md lists each code with its one status.",
    "required": ["error"],
    "additionalProperties": False,
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "detail"],
            "additionalProperties": False,
            "properties": {
                "code": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$"},
                "message": {"type": "string", "minLength": 1},
                "detail": {"type": "object"},
            },
        }
    },
}


def declare_error_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Give every operation a `default` response: the one error shape.

    Which refusals a route can give grows with every rule, and a client branches on the
    code, not the status; so the schema promises the shape for every status it does not
    list, and docs/errors.md stays the one table of codes.
    """
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"$ref": "#/components/schemas/Error"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            operation["responses"].setdefault(
                "default",
                {
                    "description": "A refusal, in the one error shape.",
                    "content": {"application/json": {"schema": reference}},
                },
            )
    return result
