"""OpenAPI generation: component and operation names that stay unique across apps.

Views declare their serializers as nested `InputSerializer` / `OutputSerializer` classes
(one per operation, by house style), which drf-spectacular would name identically in
every view. Names are qualified with the view instead, and operation ids come from the
view and method, so no component or operation ever collides.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance, is_basic_serializer
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions as drf
from rest_framework.settings import api_settings

from memory_project.api.exceptions import code_and_status
from workspaces.errors import CredentialKindRefused

Refusal = type[Exception]

# The area each route belongs to, by the start of its path: the first match names its tag.
TAGS: list[tuple[str, str]] = [
    ("/api/v1/automation/key-sessions/", "key sessions"),
    ("/api/v1/workspaces/{workspace_id}/key-sessions", "key sessions"),
    ("/api/v1/automation/", "automation"),
    ("/api/v1/agents/", "assistant"),
    ("/api/v1/bots", "bots"),
    ("/api/v1/memory/", "memory spaces"),
    ("/api/v1/workspaces/{workspace_id}/memory", "memory"),
    ("/api/v1/workspaces/{workspace_id}/documents", "documents"),
    ("/api/v1/tokens", "tokens"),
    ("/api/v1/auth/", "tokens"),
    ("/api/v1/", "workspaces"),
]


def refuses(*errors: Refusal) -> Callable[[Any], Any]:
    """Declare the refusals a view method (or every method of a view class) answers with,
    beside those every route of its kind can give (see `QualifiedAutoSchema.refusals`).

    The schema derives each response's status and code from the error itself, through
    `code_and_status`, the exception handler's own mapping, so the two cannot disagree.
    """

    def mark(target: Any) -> Any:
        target.refusals = (*getattr(target, "refusals", ()), *errors)
        return target

    return mark


def operation(
    summary: str,
    *refusals: Refusal,
    example: tuple[str, Any] | None = None,
    **schema: Any,
) -> Callable[[Any], Any]:
    """An operation's whole schema in one declaration: its summary, the refusals it declares
    (`refuses`), a named JSON example of its request body, and whatever else `extend_schema`
    takes (parameters, request, responses, description)."""
    if example is not None:
        name, value = example
        schema["examples"] = [OpenApiExample(name, value=value, request_only=True)]
    described = extend_schema(summary=summary, **schema)
    declared = refuses(*refusals)
    return lambda target: declared(described(target))


# drf-spectacular imports each extension's target class at its first match and is not safe
# for two threads doing that at once (one marks a class it could not import as None while the
# other still reads it as a name, and fails): a fresh gunicorn worker's first concurrent API
# requests answered 500. The cache below leaves this lock to each operation's first request.
_schema_lock = threading.Lock()


@functools.cache
def query_parameters(callback: Callable[..., Any], method: str) -> frozenset[str] | None:
    """The query parameters a route's operation takes: those its schema documents (an
    `OpenApiParameter` in the query, or each writable field of a query serializer), and DRF's
    format override, which content negotiation judges (406). Read from the operation's own
    `extend_schema`, as the schema generator reads it, so what a route takes and what its
    schema documents are one declaration and cannot drift apart. An operation that documents
    none (OPTIONS among them) takes none; None for one the schema leaves out (the schema's
    own pages, whose `?lang=` is drf-spectacular's)."""
    with _schema_lock:
        generator = SchemaGenerator()  # holds the view's schema (a weak proxy) alive
        schema = generator.create_view(callback, method).schema
        schema.method = method
        if schema.is_excluded():
            return None
        parameters = schema.get_override_parameters()
    taken = {api_settings.URL_FORMAT_OVERRIDE}
    for parameter in parameters:
        if isinstance(parameter, OpenApiParameter):
            if parameter.location == OpenApiParameter.QUERY and not parameter.exclude:
                taken.add(parameter.name)
        elif is_basic_serializer(parameter):
            fields = force_instance(parameter).fields
            taken.update(name for name, field in fields.items() if not field.read_only)
    return frozenset(taken)


class QualifiedAutoSchema(AutoSchema):
    def _get_serializer_name(
        self, serializer: Any, direction: str, bypass_extensions: bool = False
    ) -> str:
        name = super()._get_serializer_name(serializer, direction, bypass_extensions)
        owner = type(serializer).__qualname__.rpartition(".")[0]
        return f"{owner}{name}" if owner and not name.startswith(owner) else name

    def get_operation_id(self) -> str:
        return f"{type(self.view).__name__}_{self.method.lower()}"

    def get_tags(self) -> list[str]:
        return [next(tag for start, tag in TAGS if self.path.startswith(start))]

    def refusals(self) -> list[Refusal]:
        """What this operation can refuse with: what its view declares (`refuses`), and what
        follows from the route's kind (a credential, a body, a throttle)."""
        method = getattr(self.view, self.method.lower())
        found: list[Refusal] = [
            *getattr(type(self.view), "refusals", ()),
            *getattr(method, "refusals", ()),
        ]
        if self.view.get_permissions():
            # No credential, or one no authenticator of the route takes (exceptions.py);
            # then what each authenticator refuses a credential it takes with.
            found += [drf.NotAuthenticated, CredentialKindRefused]
            for authenticator in self.view.get_authenticators():
                found += getattr(authenticator, "refusals", ())
        if self.method in {"PUT", "POST", "PATCH"} and self.get_request_serializer() is not None:
            found += [drf.ParseError, drf.ValidationError, drf.UnsupportedMediaType]
        if self.view.get_throttles():
            found.append(drf.Throttled)
        return found

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        by_status: dict[int, dict[str, str]] = {}
        for refusal in self.refusals():
            code, status = code_and_status(refusal)
            by_status.setdefault(status, {})[code] = _message_of(refusal)
        for status, messages in sorted(by_status.items()):
            responses.setdefault(str(status), _error_response(messages))
        return responses


def _message_of(refusal: Refusal) -> str:
    message = getattr(refusal, "default_message", None) or getattr(refusal, "default_detail", "")
    return str(message)


def _error_response(messages: dict[str, str]) -> dict[str, Any]:
    """One status's response: the shared Error component, an example for each code."""
    return {
        "description": ", ".join(sorted(messages)),
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/Error"},
                "examples": {
                    code: {
                        "summary": code,
                        "value": {"error": {"code": code, "message": message, "detail": {}}},
                    }
                    for code, message in sorted(messages.items())
                },
            }
        },
    }


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
