"""Document routes for automation: an agent runtime holding a turn's delivery credential,
or an external client (an MCP server) acting as its user with a token. Thin: parse,
call, render.

On every route the path is judged before anything else about the request: any spelling
of the memory namespace is 403 MEMORY_NAMESPACE_RESERVED, then a non-canonical spelling is
400 INVALID_DOCUMENT_PATH. Only the memory routes touch memory.
"""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from automation import documents
from automation.authentication import DeliveryCredentialAuthentication, DeliveryGrant
from memory.api.documents import PathField
from workspaces.api.access import caller_membership
from workspaces.api.headers import base_version_from
from workspaces.authentication import BearerAuthentication, TeamSessionAuthentication
from workspaces.errors import NotFound

BASE_VERSION_HEADER = OpenApiParameter(
    "X-Base-Version",
    int,
    OpenApiParameter.HEADER,
    required=True,
    description="The version this change is based on; 0 creates the document.",
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
# A person's client (token, JWT or session) or an agent runtime (delivery credential).
AUTHENTICATION: list[type[BaseAuthentication]] = [
    BearerAuthentication,
    DeliveryCredentialAuthentication,
    TeamSessionAuthentication,
]


def _actor_from(request: Request, workspace_id: int) -> documents.DocumentActor:
    """The caller as a document actor. A delivery credential reaches only its turn's
    workspace; any other workspace id is the same 404 as a workspace that does not exist."""
    grant = request.auth
    if isinstance(grant, DeliveryGrant):
        if grant.admission.workspace_id != workspace_id:
            raise NotFound("No such workspace.")
        return documents.document_actor_for_turn(admission=grant.admission)
    membership = caller_membership(request, workspace_id)
    return documents.document_actor_for_person(workspace=membership.workspace, user=membership.user)


@extend_schema_serializer(component_name="AutomationDocumentState")
class StateSerializer(serializers.Serializer):
    """The state a delete, move or restore leaves: the version to name in the next change."""

    path = serializers.CharField()
    version = serializers.IntegerField(source="current_version")
    updatedAt = serializers.DateTimeField(source="updated_at")
    deleted = serializers.BooleanField(source="is_deleted")


class AutomationDocumentApi(APIView):
    authentication_classes = AUTHENTICATION

    class ListQuerySerializer(serializers.Serializer):
        prefix = serializers.CharField(required=False, trim_whitespace=False, max_length=1024)
        includeDeleted = serializers.BooleanField(default=False)

    @extend_schema_serializer(component_name="AutomationDocumentSave")
    class InputSerializer(serializers.Serializer):
        content = serializers.CharField(allow_blank=True, trim_whitespace=False)

    @extend_schema_serializer(component_name="AutomationDocument")
    class OutputSerializer(serializers.Serializer):
        path = serializers.CharField()
        content = serializers.CharField()
        version = serializers.IntegerField()
        bytes = serializers.IntegerField()

    @extend_schema_serializer(component_name="AutomationDocumentListItem")
    class ListItemSerializer(StateSerializer):
        bytes = serializers.IntegerField(source="current_bytes", allow_null=True)

    @extend_schema_serializer(component_name="AutomationDocumentWritten")
    class WrittenSerializer(serializers.Serializer):
        path = serializers.CharField(source="file.path")
        version = serializers.IntegerField()
        bytes = serializers.IntegerField(source="size_bytes")
        authorKind = serializers.CharField(source="author_kind")

    @extend_schema(
        parameters=[PATH_PARAMETER, ListQuerySerializer],
        responses=PolymorphicProxySerializer(
            component_name="AutomationDocumentReadOrList",
            serializers=[OutputSerializer, ListItemSerializer(many=True)],
            resource_type_field_name=None,
            many=False,
        ),
        description=(
            "With `path`: read that document (one object). Without: list documents by path "
            "(`prefix`, `includeDeleted`) as an array, never any under the memory namespace."
        ),
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        actor = _actor_from(request, workspace_id)
        raw_path = request.query_params.get("path")
        if raw_path is not None:
            text = documents.assistant_document_read(actor=actor, raw_path=raw_path)
            return Response(self.OutputSerializer(text).data)
        query = self.ListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        files = documents.assistant_document_list(
            actor=actor,
            prefix=query.validated_data.get("prefix"),
            include_deleted=query.validated_data["includeDeleted"],
        )
        return Response(self.ListItemSerializer(files, many=True).data)

    @extend_schema(
        parameters=[PATH_REQUIRED, BASE_VERSION_HEADER],
        request=InputSerializer,
        responses=WrittenSerializer,
    )
    def put(self, request: Request, workspace_id: int) -> Response:
        actor = _actor_from(request, workspace_id)
        path = documents.assistant_document_path(request.query_params.get("path", ""))
        base_version = base_version_from(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        revision = documents.assistant_document_write(
            actor=actor,
            raw_path=path,
            content=data.validated_data["content"],
            base_version=base_version,
        )
        return Response(self.WrittenSerializer(revision).data)

    @extend_schema(
        parameters=[PATH_REQUIRED, BASE_VERSION_HEADER], responses={200: StateSerializer}
    )
    def delete(self, request: Request, workspace_id: int) -> Response:
        actor = _actor_from(request, workspace_id)
        path = documents.assistant_document_path(request.query_params.get("path", ""))
        file = documents.assistant_document_delete(
            actor=actor, raw_path=path, base_version=base_version_from(request)
        )
        return Response(StateSerializer(file).data)


class AutomationDocumentMoveApi(APIView):
    authentication_classes = AUTHENTICATION

    @extend_schema_serializer(component_name="AutomationDocumentMove")
    class InputSerializer(serializers.Serializer):
        to = PathField()

        def get_fields(self) -> dict[str, serializers.Field]:
            # `from` is a Python keyword, so it cannot be declared as a class attribute.
            return {"from": PathField(), **super().get_fields()}

    @extend_schema(
        parameters=[BASE_VERSION_HEADER], request=InputSerializer, responses=StateSerializer
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        actor = _actor_from(request, workspace_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        source, destination = documents.assistant_document_paths(
            data.validated_data["from"], data.validated_data["to"]
        )
        file = documents.assistant_document_move(
            actor=actor,
            raw_source=source,
            raw_destination=destination,
            base_version=base_version_from(request),
        )
        return Response(StateSerializer(file).data)


class AutomationDocumentRestoreApi(APIView):
    authentication_classes = AUTHENTICATION

    @extend_schema_serializer(component_name="AutomationDocumentRestore")
    class InputSerializer(serializers.Serializer):
        path = PathField()

    @extend_schema(
        parameters=[BASE_VERSION_HEADER], request=InputSerializer, responses=StateSerializer
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        actor = _actor_from(request, workspace_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        path = documents.assistant_document_path(data.validated_data["path"])
        file = documents.assistant_document_restore(
            actor=actor, raw_path=path, base_version=base_version_from(request)
        )
        return Response(StateSerializer(file).data)


@extend_schema_serializer(component_name="AutomationDocumentSearchHit")
class SearchHitSerializer(serializers.Serializer):
    path = serializers.CharField()
    version = serializers.IntegerField()
    snippet = serializers.CharField()


class AutomationDocumentSearchApi(APIView):
    authentication_classes = AUTHENTICATION

    class QuerySerializer(serializers.Serializer):
        q = serializers.CharField(min_length=1, max_length=200)
        limit = serializers.IntegerField(
            min_value=1,
            max_value=documents.SEARCH_MAX_LIMIT,
            default=documents.SEARCH_DEFAULT_LIMIT,
        )
        cursor = serializers.CharField(
            required=False,
            trim_whitespace=False,
            max_length=1024,
            help_text="The `nextCursor` of the previous page, to continue a truncated search.",
        )

    @extend_schema_serializer(component_name="AutomationDocumentSearchResults")
    class OutputSerializer(serializers.Serializer):
        results = SearchHitSerializer(source="hits", many=True)
        truncated = serializers.BooleanField(source="is_truncated")
        nextCursor = serializers.CharField(source="next_cursor", allow_null=True)

    @extend_schema(
        parameters=[QuerySerializer],
        responses=OutputSerializer,
        description=(
            "Live documents containing `q` (case-insensitive), in path order; the memory "
            "namespace never is searched. Documents are encrypted at rest, so one request "
            "decrypts a bounded number of bytes: when it stops early, `truncated` is true and "
            "`nextCursor` continues the search."
        ),
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        actor = _actor_from(request, workspace_id)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = documents.assistant_document_search(
            actor=actor,
            query=query.validated_data["q"],
            limit=query.validated_data["limit"],
            cursor=query.validated_data.get("cursor"),
        )
        return Response(self.OutputSerializer(found).data)
