"""A person's search over a workspace's notes and its memory document."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from memory import documents
from memory.api import document_common as common
from memory.models import MEMORY_PATH
from memory_project.api.views import ApiView
from workspaces.api.access import MEMBER_REFUSALS
from workspaces.errors import DocumentUnreadable


class _PersonSearchHitSerializer(common.SearchHitSerializer):
    isMemory = serializers.SerializerMethodField()

    def get_isMemory(self, hit: documents.SearchHit) -> bool:
        return hit.path == MEMORY_PATH


class _PersonSearchResultsSerializer(common.SearchResultsSerializer):
    results = _PersonSearchHitSerializer(source="hits", many=True)


class WorkspaceSearchApi(ApiView):
    @common.search_operation(
        "Search the workspace's notes and memory",
        *MEMBER_REFUSALS,
        DocumentUnreadable,
        results=_PersonSearchResultsSerializer,
        description="The workspace's live notes and its memory document containing `q` "
        "(case-insensitive), in path order, each with a snippet; `isMemory` marks memory. "
        f"{common.SEARCH_BOUND}.",
    )
    def get(self, request: Request, workspace_id: int) -> Response:
        found = common.search(request, common.person_actor(request, workspace_id))
        return Response(_PersonSearchResultsSerializer(found).data)
