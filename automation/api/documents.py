"""Document routes for automation: an agent runtime with a turn's delivery credential, or a
member's client (token, JWT or session). Parse, call `memory.documents`, render; every path
a request names is judged before its headers and body (docs/architecture.md)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from automation.api import serializers as shapes
from automation.api.access import AutomationDocumentView, caller_document_actor
from memory import documents
from memory.api import document_common as common
from memory.api.document_common import PATH_REQUIRED, validated
from memory.documents import DocumentActor, Operation
from memory.errors import MemoryNamespaceReserved
from memory_project.api.schema import refuses
from workspaces.api.headers import BASE_VERSION_PARAMETERS, BASE_VERSION_REFUSALS, base_version_from
from workspaces.errors import (
    DocumentExists,
    DocumentTooLarge,
    InvalidDocumentPath,
    InvalidText,
    KeySessionUnavailable,
    NotFound,
    QueryInvalid,
    RateLimited,
    TenantQuotaExceeded,
)

# What a delete or a restore of a note refuses with (schema only).
STATE_CHANGE_REFUSALS = (
    NotFound,
    InvalidDocumentPath,
    MemoryNamespaceReserved,
    *BASE_VERSION_REFUSALS,
    KeySessionUnavailable,
)


def _paths(actor: DocumentActor, operation: Operation, *raw_paths: str) -> list[str]:
    return documents.document_paths(actor=actor, operation=operation, raw_paths=raw_paths)


class AutomationDocumentApi(AutomationDocumentView):
    @extend_schema(summary="Read a note, or list notes")
    @refuses(
        NotFound, InvalidDocumentPath, QueryInvalid, MemoryNamespaceReserved, KeySessionUnavailable
    )
    @shapes.READ_OR_LIST.schema()
    def get(self, request: Request, workspace_id: int) -> Response:
        return shapes.READ_OR_LIST.respond(request, caller_document_actor(request, workspace_id))

    @extend_schema(
        summary="Write a note",
        examples=[
            OpenApiExample("Save", value={"content": "# Meeting notes\n"}, request_only=True)
        ],
    )
    @refuses(
        NotFound,
        InvalidDocumentPath,
        MemoryNamespaceReserved,
        *BASE_VERSION_REFUSALS,
        InvalidText,
        DocumentTooLarge,
        TenantQuotaExceeded,
        KeySessionUnavailable,
    )
    @extend_schema(
        parameters=[PATH_REQUIRED, *BASE_VERSION_PARAMETERS],
        request=shapes.Save,
        responses=shapes.Written,
    )
    def put(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        (path,) = _paths(actor, Operation.WRITE, request.query_params.get("path", ""))
        base = base_version_from(request)
        data = validated(shapes.Save(data=request.data))
        revision = documents.document_write(
            actor=actor, raw_path=path, content=data["content"], base_version=base
        )
        return Response(shapes.Written(revision).data)

    @extend_schema(summary="Delete a note")
    @refuses(*STATE_CHANGE_REFUSALS)
    @extend_schema(
        parameters=[PATH_REQUIRED, *BASE_VERSION_PARAMETERS], responses={200: shapes.State}
    )
    def delete(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        (path,) = _paths(actor, Operation.DELETE, request.query_params.get("path", ""))
        file = documents.document_delete(
            actor=actor, raw_path=path, base_version=base_version_from(request)
        )
        return Response(shapes.State(file).data)


class AutomationDocumentMoveApi(AutomationDocumentView):
    @extend_schema(
        summary="Move a note to another path",
        examples=[
            OpenApiExample(
                "Move", value={"from": "notes/a.md", "to": "archive/a.md"}, request_only=True
            )
        ],
    )
    @refuses(
        NotFound,
        InvalidDocumentPath,
        MemoryNamespaceReserved,
        *BASE_VERSION_REFUSALS,
        DocumentExists,
        KeySessionUnavailable,
    )
    @extend_schema(parameters=BASE_VERSION_PARAMETERS, request=shapes.Move, responses=shapes.State)
    def post(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        data = validated(shapes.Move(data=request.data))
        source, destination = _paths(actor, Operation.MOVE, data["from"], data["to"])
        base = base_version_from(request)
        file = documents.document_move(
            actor=actor, raw_source=source, raw_destination=destination, base_version=base
        )
        return Response(shapes.State(file).data)


class AutomationDocumentRestoreApi(AutomationDocumentView):
    @extend_schema(
        summary="Restore a deleted note",
        examples=[OpenApiExample("Restore", value={"path": "notes/a.md"}, request_only=True)],
    )
    @refuses(*STATE_CHANGE_REFUSALS)
    @extend_schema(
        parameters=BASE_VERSION_PARAMETERS, request=shapes.Restore, responses=shapes.State
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        data = validated(shapes.Restore(data=request.data))
        (path,) = _paths(actor, Operation.RESTORE, data["path"])
        file = documents.document_restore(
            actor=actor, raw_path=path, base_version=base_version_from(request)
        )
        return Response(shapes.State(file).data)


class AutomationDocumentSearchApi(AutomationDocumentView):
    @extend_schema(summary="Search notes")
    @refuses(NotFound, QueryInvalid, KeySessionUnavailable, RateLimited)
    @extend_schema(
        parameters=[shapes.SearchQuery],
        responses=shapes.SearchResults,
        description=(
            "Live documents containing `q` (case-insensitive), in path order; the memory "
            "namespace never is searched. Documents are encrypted at rest, so one request "
            "decrypts a bounded number of bytes: when it stops early, `truncated` is true and "
            "`nextCursor` continues the search."
        ),
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        found = common.search(request, caller_document_actor(request, workspace_id))
        return Response(shapes.SearchResults(found).data)
