"""A person's document routes (notes and memory): parse, call `memory.documents`, render."""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from memory import documents
from memory.api import document_common as common
from workspaces.api.headers import BASE_VERSION_PARAMETERS, base_version_from, flag_from
from workspaces.models import File

READ_OR_LIST = common.ReadOrList(
    component_name="DocumentReadOrList",
    document=common.DocumentSerializer,
    item=common.DocumentListItemSerializer,
    description=(
        "With `path`: read that document (one object). Without: list documents by path "
        "(`prefix`, `includeDeleted`), one cursor page of DocumentListItem rows at a time."
    ),
)


class DocumentApi(APIView):
    @READ_OR_LIST.schema()
    def get(self, request: Request, workspace_id: int) -> Response:
        return READ_OR_LIST.respond(request, common.person_actor(request, workspace_id))

    @extend_schema(
        parameters=[common.PATH_REQUIRED, *BASE_VERSION_PARAMETERS, common.CLEAR_HEADER],
        request=common.DocumentSaveSerializer,
        responses=common.DocumentWrittenSerializer,
    )
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

    @extend_schema(
        parameters=[common.PATH_REQUIRED, *BASE_VERSION_PARAMETERS],
        responses={200: common.DocumentStateSerializer},
    )
    def delete(self, request: Request, workspace_id: int) -> Response:
        file = documents.document_delete(
            actor=common.person_actor(request, workspace_id),
            raw_path=request.query_params.get("path", ""),
            base_version=base_version_from(request),
        )
        return Response(common.DocumentStateSerializer(file).data)


# A move or a restore: membership, X-Base-Version, then the body (the schema reads it too).
@extend_schema(parameters=BASE_VERSION_PARAMETERS, responses=common.DocumentStateSerializer)
class _DocumentStateChangeApi(APIView):
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


class DocumentMoveApi(_DocumentStateChangeApi):
    serializer_class = common.DocumentMoveSerializer
    service = staticmethod(documents.document_move)
    path_arguments = {"raw_source": "from", "raw_destination": "to"}


class DocumentRestoreApi(_DocumentStateChangeApi):
    serializer_class = common.DocumentRestoreSerializer
    service = staticmethod(documents.document_restore)
    path_arguments = {"raw_path": "path"}
