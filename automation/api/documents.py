"""Document routes for automation: an agent runtime with a turn's delivery credential, or a
member's client (token, JWT or session). Parse, call `memory.documents`, render; every path
a request names is judged before its headers and body (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from automation.api import serializers as shapes
from automation.api.access import AutomationDocumentView, caller_document_actor
from memory import documents
from memory.api import document_common as common
from memory.documents import DocumentActor, Operation
from workspaces.api.headers import base_version_from
from workspaces.errors import KeySessionUnavailable, NotFound, RateLimited
from workspaces.models import File


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
        data = common.validated(shapes.Save(data=request.data))
        revision = documents.document_write(
            actor=actor, raw_path=path, content=data["content"], base_version=base
        )
        return Response(shapes.Written(revision).data)

    @shapes.SCHEMAS.delete()
    def delete(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        (path,) = _paths(actor, Operation.DELETE, request.query_params.get("path", ""))
        file = common.document_delete(request, actor, path)
        return Response(shapes.State(file).data)


# A move or a restore: the body first, as it names the paths, then X-Base-Version.
class _StateChangeApi(AutomationDocumentView):
    shape: type[Serializer]
    operation: Operation
    service: Callable[..., File]
    path_arguments: dict[str, str]  # the service's argument -> the body's field

    def post(self, request: Request, workspace_id: int) -> Response:
        actor = caller_document_actor(request, workspace_id)
        data = common.validated(self.shape(data=request.data))
        paths = _paths(actor, self.operation, *(data[f] for f in self.path_arguments.values()))
        named = dict(zip(self.path_arguments, paths, strict=True))
        file = self.service(actor=actor, base_version=base_version_from(request), **named)
        return Response(shapes.State(file).data)


@shapes.SCHEMAS.move()
class AutomationDocumentMoveApi(_StateChangeApi):
    shape = shapes.Move
    operation = Operation.MOVE
    service = staticmethod(documents.document_move)
    path_arguments = {"raw_source": "from", "raw_destination": "to"}


@shapes.SCHEMAS.restore()
class AutomationDocumentRestoreApi(_StateChangeApi):
    shape = shapes.Restore
    operation = Operation.RESTORE
    service = staticmethod(documents.document_restore)
    path_arguments = {"raw_path": "path"}


class AutomationDocumentSearchApi(AutomationDocumentView):
    @common.search_operation(
        "Search notes",
        NotFound,
        KeySessionUnavailable,
        RateLimited,
        results=shapes.SearchResults,
        description="Live documents containing `q` (case-insensitive), in path order; the "
        f"memory namespace never is searched. {common.SEARCH_BOUND} the search.",
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        found = common.search(request, caller_document_actor(request, workspace_id))
        return Response(shapes.SearchResults(found).data)
