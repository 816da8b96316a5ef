"""Line provenance of the memory document ("blame") and the review of stale lines. Thin:
parse, call `memory.provenance` or the review service, render. Never any text."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from memory.provenance import memory_blame
from memory.services import memory_line_keep
from memory_project.api.schema import refuses
from memory_project.api.serializers import StrictSerializer
from memory_project.api.views import ApiView
from workspaces.api.access import MEMBER_REFUSALS, caller_membership
from workspaces.api.headers import BASE_VERSION_PARAMETERS, BASE_VERSION_REFUSALS, base_version_from
from workspaces.api.input import validated
from workspaces.errors import DocumentUnreadable
from workspaces.models import AuthorKind, ChangeKind

BLAME_EXAMPLE = {
    "version": 7,
    "staleDays": 90,
    "staleLines": 1,
    "lines": [
        {
            "line": 1,
            "version": 2,
            "authorKind": "human",
            "author": "alice",
            "changeKind": "save",
            "createdAt": "2026-03-02T09:15:00Z",
            "conversationId": None,
            "admissionId": None,
            "stale": True,
            "reviewedAt": None,
        },
        {
            "line": 2,
            "version": 7,
            "authorKind": "automatic",
            "author": "alice",
            "changeKind": "capture",
            "createdAt": "2026-11-28T16:40:12Z",
            "conversationId": "0b9f6a52-3c1e-4d8e-9a51-5f2d7c1e8a10",
            "admissionId": "5d2c1b7e-9f4a-4e3b-8c6d-1a2b3c4d5e6f",
            "stale": False,
            "reviewedAt": None,
        },
    ],
}


class BlameLineSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    version = serializers.IntegerField(source="origin.version")
    authorKind = serializers.ChoiceField(source="origin.author_kind", choices=AuthorKind.choices)
    author = serializers.CharField(source="origin.author.username", allow_null=True, default=None)
    changeKind = serializers.ChoiceField(source="origin.change_kind", choices=ChangeKind.choices)
    createdAt = serializers.DateTimeField(source="origin.created_at")
    conversationId = serializers.UUIDField(source="conversation_id", allow_null=True)
    admissionId = serializers.UUIDField(source="admission_id", allow_null=True)
    stale = serializers.BooleanField(source="is_stale")
    reviewedAt = serializers.DateTimeField(source="reviewed_at", allow_null=True)


class MemoryBlameApi(ApiView):
    class OutputSerializer(serializers.Serializer):
        version = serializers.IntegerField()
        staleDays = serializers.IntegerField(source="stale_days")
        staleLines = serializers.IntegerField(source="stale_lines")
        lines = BlameLineSerializer(many=True)

    @extend_schema(
        summary="Where each line of the memory document came from, and which are stale",
        description=(
            "For every line of the saved memory (numbered from 1; the text split at line "
            "feeds, a final one ending the last line), the revision that introduced it: its "
            "version, author, change kind and time, and for an assistant's capture the "
            "conversation and admission of that turn. `stale` marks a line neither changed "
            "nor kept for `staleDays` days. Never any text."
        ),
        examples=[OpenApiExample("Blame", value=BLAME_EXAMPLE, response_only=True)],
    )
    @refuses(*MEMBER_REFUSALS, DocumentUnreadable)
    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request, workspace_id: int) -> Response:
        workspace = caller_membership(request, workspace_id).workspace
        return Response(self.OutputSerializer(memory_blame(workspace=workspace)).data)


class MemoryLineReviewApi(ApiView):
    class InputSerializer(StrictSerializer):
        line = serializers.IntegerField(min_value=1)

    class OutputSerializer(serializers.Serializer):
        version = serializers.IntegerField(source="review.reviewed_version")
        line = serializers.IntegerField()
        originVersion = serializers.IntegerField(source="review.origin.version")
        reviewedAt = serializers.DateTimeField(source="review.reviewed_at")

    @extend_schema(
        summary="Keep a line of the memory document: still true",
        description=(
            "Records that the caller reviewed line `line` of the version named by "
            "`X-Base-Version` and kept it. No revision is written; the line is no longer "
            "stale until `staleDays` pass again, and a later edit of it starts afresh. To "
            "remove a line instead, save the text without it."
        ),
        examples=[
            OpenApiExample("Keep line 3", value={"line": 3}, request_only=True),
            OpenApiExample(
                "Kept",
                value={
                    "version": 7,
                    "line": 3,
                    "originVersion": 2,
                    "reviewedAt": "2026-12-01T08:00:00Z",
                },
                response_only=True,
                status_codes=["201"],
            ),
        ],
    )
    @refuses(*MEMBER_REFUSALS, *BASE_VERSION_REFUSALS, DocumentUnreadable)
    @extend_schema(
        parameters=BASE_VERSION_PARAMETERS,
        request=InputSerializer,
        responses={201: OutputSerializer},
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        base_version = base_version_from(request)
        line = validated(self.InputSerializer(data=request.data))["line"]
        review = memory_line_keep(
            workspace=membership.workspace,
            reviewer=membership.user,
            base_version=base_version,
            line=line,
        )
        kept = {"review": review, "line": line}
        return Response(self.OutputSerializer(kept).data, status=status.HTTP_201_CREATED)
