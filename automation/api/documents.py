"""Document routes for automation: an agent runtime with a turn's delivery credential, or a
member's client (token, JWT or session). Parse, call `memory.documents`, render; every path
a request names is judged before its headers and body (docs/architecture.md)."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from automation.api import serializers as shapes
from automation.api.access import AutomationDocumentView, caller_document_actor
from memory import documents
from memory.api import document_common as common
from memory.api.document_common import validated
from memory.documents import DocumentActor, Operation
from memory_project.api.schema import operation
from workspaces.api.headers import base_version_from
from workspaces.errors import KeySessionUnavailable, NotFound, QueryInvalid, RateLimited


def _paths(actor: DocumentActor, operation: Operation, *raw_paths: str) -> list[str]:
    return documents.document_paths(actor=actor, operation=operation, raw_paths=raw_paths)


class AutomationDocumentApi(AutomationDocumentView):
    @shapes.SCHEMAS.read()
    def get(self, request: Request, workspace_id: int) -> Response:
        return shapes.SCHEMAS.read_or_list.respond(
            request, caller_document_actor(request, workspace_id)
        )

    @shapes.SCHEMAS.write()
    def put(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        (path,) = _paths(actor, Operation.WRITE, request.query_params.get("path", ""))
        base = base_version_from(request)
        data = validated(shapes.Save(data=request.data))
        revision = documents.document_write(
            actor=actor, raw_path=path, content=data["content"], base_version=base
        )
        return Response(shapes.Written(revision).data)

    @shapes.SCHEMAS.delete()
    def delete(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        (path,) = _paths(actor, Operation.DELETE, request.query_params.get("path", ""))
        file = documents.document_delete(
            actor=actor, raw_path=path, base_version=base_version_from(request)
        )
        return Response(shapes.State(file).data)


class AutomationDocumentMoveApi(AutomationDocumentView):
    @shapes.SCHEMAS.move()
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
    @shapes.SCHEMAS.restore()
    def post(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        data = validated(shapes.Restore(data=request.data))
        (path,) = _paths(actor, Operation.RESTORE, data["path"])
        file = documents.document_restore(
            actor=actor, raw_path=path, base_version=base_version_from(request)
        )
        return Response(shapes.State(file).data)


class AutomationDocumentSearchApi(AutomationDocumentView):
    @operation(
        "Search notes",
        NotFound,
        QueryInvalid,
        KeySessionUnavailable,
        RateLimited,
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
