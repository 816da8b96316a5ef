"""A person's document routes (notes and memory): parse, call `memory.documents`, render."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from memory import documents
from memory.api import document_common as common
from memory.api.spaces import RawBodyApi, archive_response
from memory.models import MEMORY_PATH
from memory.spaces import archive
from workspaces.api.access import caller_membership
from workspaces.api.headers import base_version_from, flag_from
from workspaces.models import File

READ_OR_LIST = common.ReadOrList(
    component_name="DocumentReadOrList",
    document=common.DocumentSerializer,
    item=common.DocumentListItemSerializer,
    description=(
        "With `path`: read that document (one object). Without: list documents by path "
        "(`prefix`, `includeDeleted`), as an array of DocumentListItem rows."
    ),
)


def _person(request: Request, workspace_id: int) -> documents.DocumentActor:
    membership = caller_membership(request, workspace_id)
    return documents.DocumentActor.of_member(membership, documents.ActorKind.PERSON)


class DocumentApi(APIView):
    @READ_OR_LIST.schema()
    def get(self, request: Request, workspace_id: int) -> Response:
        return READ_OR_LIST.respond(request, _person(request, workspace_id))

    @extend_schema(
        parameters=[common.PATH_REQUIRED, common.BASE_VERSION_HEADER, common.CLEAR_HEADER],
        request=common.DocumentSaveSerializer,
        responses=common.DocumentWrittenSerializer,
    )
    def put(self, request: Request, workspace_id: int) -> Response:
        actor = _person(request, workspace_id)
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
        parameters=[common.PATH_REQUIRED, common.BASE_VERSION_HEADER],
        responses={200: common.DocumentStateSerializer},
    )
    def delete(self, request: Request, workspace_id: int) -> Response:
        file = documents.document_delete(
            actor=_person(request, workspace_id),
            raw_path=request.query_params.get("path", ""),
            base_version=base_version_from(request),
        )
        return Response(common.DocumentStateSerializer(file).data)


# A move or a restore: membership, X-Base-Version, then the body (the schema reads it too).
@extend_schema(parameters=[common.BASE_VERSION_HEADER], responses=common.DocumentStateSerializer)
class _DocumentStateChangeApi(APIView):
    serializer_class: type[Serializer]
    service: Callable[..., File]
    path_arguments: dict[str, str]  # the service's argument -> the body's field

    def post(self, request: Request, workspace_id: int) -> Response:
        actor = _person(request, workspace_id)
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


class _PersonSearchHitSerializer(common.SearchHitSerializer):
    isMemory = serializers.SerializerMethodField()

    def get_isMemory(self, hit: documents.SearchHit) -> bool:
        return hit.path == MEMORY_PATH


class _PersonSearchResultsSerializer(common.SearchResultsSerializer):
    results = _PersonSearchHitSerializer(source="hits", many=True)


class WorkspaceSearchApi(APIView):
    @extend_schema(
        parameters=[common.SearchQuerySerializer],
        responses=_PersonSearchResultsSerializer,
        description=(
            "The workspace's live notes and its memory document containing `q` "
            "(case-insensitive), in path order, each with a snippet; `isMemory` marks memory. "
            "Documents are encrypted at rest, so one request decrypts a bounded number of "
            "bytes: when it stops early, `truncated` is true and `nextCursor` continues."
        ),
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        found = common.search(request, _person(request, workspace_id))
        return Response(_PersonSearchResultsSerializer(found).data)


class NotesExportApi(RawBodyApi):
    @extend_schema(
        responses={
            (200, archive.MEDIA_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The workspace's live notes (never memory) as one "
                "`iterion.memory.v1` archive, as an attachment.",
            )
        },
    )
    def get(self, request: Request, workspace_id: int) -> FileResponse:
        actor = _person(request, workspace_id)
        return archive_response(
            lambda out: documents.notes_export(actor=actor, out=out),
            filename=attachment_name("notes", actor.workspace.name, ".tar.gz"),
        )


def attachment_name(kind: str, workspace_name: str, suffix: str) -> str:
    """`<kind>-<workspace name>.<suffix>`, safe in a header and on any filesystem."""
    word = re.sub(r"[^A-Za-z0-9._-]+", "_", workspace_name).strip("._")
    return f"{kind}-{word}{suffix}" if word else f"{kind}{suffix}"
