"""A person's search over a workspace's notes and its memory document."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory import documents
from memory.api import document_common as common
from memory.models import MEMORY_PATH
from memory_project.api.schema import refuses
from workspaces.api.access import MEMBER_REFUSALS
from workspaces.errors import DocumentUnreadable, QueryInvalid


class _PersonSearchHitSerializer(common.SearchHitSerializer):
    isMemory = serializers.SerializerMethodField()

    def get_isMemory(self, hit: documents.SearchHit) -> bool:
        return hit.path == MEMORY_PATH


class _PersonSearchResultsSerializer(common.SearchResultsSerializer):
    results = _PersonSearchHitSerializer(source="hits", many=True)


class WorkspaceSearchApi(APIView):
    @refuses(*MEMBER_REFUSALS, QueryInvalid, DocumentUnreadable)
    @extend_schema(
        summary="Search the workspace's notes and memory",
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
        found = common.search(request, common.person_actor(request, workspace_id))
        return Response(_PersonSearchResultsSerializer(found).data)
