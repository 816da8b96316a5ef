"""A person's document routes (notes and memory): parse, call `memory.documents`, render."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from memory import documents
from memory.api import document_common as common
from memory_project.api.views import ApiView
from workspaces.api.access import MEMBER_REFUSALS
from workspaces.api.headers import base_version_from, flag_from
from workspaces.models import File

SCHEMAS = common.DocumentSchemas(
    noun="document",
    refusals=MEMBER_REFUSALS,
    read_or_list=common.ReadOrList(
        component_name="DocumentReadOrList",
        document=common.DocumentSerializer,
        item=common.DocumentListItemSerializer,
        description=(
            "With `path`: read that document (one object). Without: list documents by path "
            "(`prefix`, `includeDeleted`), one cursor page of DocumentListItem rows at a time."
        ),
    ),
    save_request=common.DocumentSaveSerializer,
    move_request=common.DocumentMoveSerializer,
    restore_request=common.DocumentRestoreSerializer,
    written=common.DocumentWrittenSerializer,
    state=common.DocumentStateSerializer,
    write_parameters=(common.CLEAR_HEADER,),
)


class DocumentApi(ApiView):
    @SCHEMAS.read()
    def get(self, request: Request, workspace_id: int) -> Response:
        return SCHEMAS.read_or_list.respond(request, common.person_actor(request, workspace_id))

    @SCHEMAS.write()
    def put(self, request: Request, workspace_id: int) -> Response:
        actor = common.person_actor(request, workspace_id)
        base_version = base_version_from(request)
        is_clear = flag_from(request, "X-Memory-Clear")
        data = common.validated(
            common.DocumentSaveSerializer(data=request.data, context={"is_clear": is_clear})
        )
        revision = documents.document_write(
            actor=actor,
            raw_path=request.query_params.get("path", ""),
            content=data["content"],
            base_version=base_version,
            is_clear=is_clear,
        )
        return Response(common.DocumentWrittenSerializer(revision).data)

    @SCHEMAS.delete()
    def delete(self, request: Request, workspace_id: int) -> Response:
        actor = common.person_actor(request, workspace_id)
        file = common.document_delete(request, actor, request.query_params.get("path", ""))
        return Response(common.DocumentStateSerializer(file).data)


# A move or a restore: membership, X-Base-Version, then the body.
class _DocumentStateChangeApi(ApiView):
    serializer_class: type[Serializer]
    service: Callable[..., File]
    path_arguments: dict[str, str]  # the service's argument -> the body's field

    def post(self, request: Request, workspace_id: int) -> Response:
        actor = common.person_actor(request, workspace_id)
        base_version = base_version_from(request)
        data = common.validated(self.serializer_class(data=request.data))
        paths = {argument: data[field] for argument, field in self.path_arguments.items()}
        file = self.service(actor=actor, base_version=base_version, **paths)
        return Response(common.DocumentStateSerializer(file).data)


@SCHEMAS.move()
class DocumentMoveApi(_DocumentStateChangeApi):
    serializer_class = common.DocumentMoveSerializer
    service = staticmethod(documents.document_move)
    path_arguments = {"raw_source": "from", "raw_destination": "to"}


@SCHEMAS.restore()
class DocumentRestoreApi(_DocumentStateChangeApi):
    serializer_class = common.DocumentRestoreSerializer
    service = staticmethod(documents.document_restore)
    path_arguments = {"raw_path": "path"}
