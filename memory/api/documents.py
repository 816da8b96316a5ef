"""A person's document routes (notes and the memory document). Thin: parse, call, render.

They live in the memory app because a person's write to the memory path is a memory Save
or Clear: it goes through the memory service, so memory changes one way only.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.validators import ProhibitSurrogateCharactersValidator
from rest_framework.views import APIView

from memory import services
from workspaces.api.access import caller_membership
from workspaces.api.headers import base_version_from, flag_from
from workspaces.errors import NotFound
from workspaces.models import FileVersion, Workspace
from workspaces.paths import document_path_require_canonical
from workspaces.selectors import file_list, file_read_text, workspace_data_key

BASE_VERSION_HEADER = OpenApiParameter(
    "X-Base-Version",
    int,
    OpenApiParameter.HEADER,
    required=True,
    description="The version this change is based on; 0 creates the document.",
)
CLEAR_HEADER = OpenApiParameter(
    "X-Memory-Clear",
    int,
    OpenApiParameter.HEADER,
    description="1 with empty content, on the memory path only: Clear.",
)
PATH_PARAMETER = OpenApiParameter(
    "path", str, OpenApiParameter.QUERY, description="The document's canonical path."
)
PATH_REQUIRED = OpenApiParameter(
    "path",
    str,
    OpenApiParameter.QUERY,
    required=True,
    description="The document's canonical path.",
)


class PathField(serializers.CharField):
    """A document path exactly as sent.

    Not trimmed, and NUL or lone surrogates are not refused here: the path rules decide
    (the namespace, then the canonical spelling), with their own codes, so that no spelling
    of a reserved path is answered by a generic validation error instead.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, allow_blank=True, **kwargs)
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(
                validator, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator
            )
        ]


class DocumentStateSerializer(serializers.Serializer):
    """The state a delete, move or restore leaves: the version to name in the next change."""

    path = serializers.CharField()
    version = serializers.IntegerField(source="current_version")
    updatedAt = serializers.DateTimeField(source="updated_at")
    deleted = serializers.BooleanField(source="is_deleted")


class DocumentListItemSerializer(DocumentStateSerializer):
    bytes = serializers.IntegerField(source="current_bytes", allow_null=True)


def _read(workspace: Workspace, raw_path: str) -> tuple[FileVersion, str]:
    path = document_path_require_canonical(raw_path)
    # A workspace whose key was never made has no documents: no key is made for a read.
    data_key = workspace_data_key(workspace=workspace)
    if data_key is None:
        raise NotFound("No such document.", path=path)
    return file_read_text(workspace=workspace, path=path, data_key=data_key)


class DocumentApi(APIView):
    class ListQuerySerializer(serializers.Serializer):
        prefix = serializers.CharField(required=False, trim_whitespace=False, max_length=1024)
        includeDeleted = serializers.BooleanField(default=False)

    @extend_schema_serializer(component_name="DocumentSave")
    class InputSerializer(serializers.Serializer):
        # Never trimmed or normalised: the saved text is exactly the text sent.
        content = serializers.CharField(allow_blank=True, trim_whitespace=False)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if self.context["is_clear"] and attrs["content"] != "":
                raise serializers.ValidationError("A Clear sends empty content.")
            return attrs

    @extend_schema_serializer(component_name="Document")
    class OutputSerializer(serializers.Serializer):
        path = serializers.CharField(source="file.path")
        content = serializers.CharField()
        version = serializers.IntegerField(source="revision.version")
        bytes = serializers.IntegerField(source="revision.size_bytes")

    @extend_schema_serializer(component_name="DocumentWritten")
    class WrittenSerializer(serializers.Serializer):
        path = serializers.CharField(source="file.path")
        version = serializers.IntegerField()
        bytes = serializers.IntegerField(source="size_bytes")
        changeKind = serializers.CharField(source="change_kind")

    @extend_schema(
        parameters=[PATH_PARAMETER, ListQuerySerializer],
        responses=PolymorphicProxySerializer(
            component_name="DocumentReadOrList",
            serializers=[OutputSerializer, DocumentListItemSerializer(many=True)],
            resource_type_field_name=None,
            many=False,
        ),
        description=(
            "With `path`: read that document (one object). Without: list documents by path "
            "(`prefix`, `includeDeleted`), as an array of DocumentListItem rows."
        ),
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        workspace = caller_membership(request, workspace_id).workspace
        raw_path = request.query_params.get("path")
        if raw_path is not None:
            revision, content = _read(workspace, raw_path)
            body = {"file": revision.file, "revision": revision, "content": content}
            return Response(self.OutputSerializer(body).data)
        query = self.ListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        files = file_list(
            workspace=workspace,
            prefix=query.validated_data.get("prefix"),
            include_deleted=query.validated_data["includeDeleted"],
        )
        return Response(DocumentListItemSerializer(files, many=True).data)

    @extend_schema(
        parameters=[PATH_REQUIRED, BASE_VERSION_HEADER, CLEAR_HEADER],
        request=InputSerializer,
        responses=WrittenSerializer,
    )
    def put(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        base_version = base_version_from(request)
        is_clear = flag_from(request, "X-Memory-Clear")
        data = self.InputSerializer(data=request.data, context={"is_clear": is_clear})
        data.is_valid(raise_exception=True)
        revision = services.document_write(
            workspace=membership.workspace,
            author=membership.user,
            raw_path=request.query_params.get("path", ""),
            content=data.validated_data["content"],
            base_version=base_version,
            is_clear=is_clear,
        )
        return Response(self.WrittenSerializer(revision).data)

    @extend_schema(
        parameters=[PATH_REQUIRED, BASE_VERSION_HEADER], responses={200: DocumentStateSerializer}
    )
    def delete(self, request: Request, workspace_id: int) -> Response:
        workspace = caller_membership(request, workspace_id).workspace
        file = services.document_delete(
            workspace=workspace,
            raw_path=request.query_params.get("path", ""),
            base_version=base_version_from(request),
        )
        return Response(DocumentStateSerializer(file).data)


class DocumentMoveApi(APIView):
    @extend_schema_serializer(component_name="DocumentMove")
    class InputSerializer(serializers.Serializer):
        to = PathField()

        def get_fields(self) -> dict[str, serializers.Field]:
            # `from` is a Python keyword, so it cannot be declared as a class attribute.
            return {"from": PathField(), **super().get_fields()}

    @extend_schema(
        parameters=[BASE_VERSION_HEADER],
        request=InputSerializer,
        responses=DocumentStateSerializer,
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        workspace = caller_membership(request, workspace_id).workspace
        base_version = base_version_from(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        file = services.document_move(
            workspace=workspace,
            raw_source=data.validated_data["from"],
            raw_destination=data.validated_data["to"],
            base_version=base_version,
        )
        return Response(DocumentStateSerializer(file).data)


class DocumentRestoreApi(APIView):
    @extend_schema_serializer(component_name="DocumentRestore")
    class InputSerializer(serializers.Serializer):
        path = PathField()

    @extend_schema(
        parameters=[BASE_VERSION_HEADER],
        request=InputSerializer,
        responses=DocumentStateSerializer,
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        workspace = caller_membership(request, workspace_id).workspace
        base_version = base_version_from(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        file = services.document_restore(
            workspace=workspace, raw_path=data.validated_data["path"], base_version=base_version
        )
        return Response(DocumentStateSerializer(file).data)
