"""Tenancy, token and workspace AI consent routes. Thin: parse, call, render."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_project.api.pagination import page_schema, paginated
from memory_project.api.schema import refuses
from memory_project.api.serializers import StrictSerializer
from workspaces import selectors, services
from workspaces.api.access import MEMBER_REFUSALS, caller_membership
from workspaces.authentication import request_credential
from workspaces.errors import (
    ConsentRevisionConflict,
    CredentialKindRefused,
    KeySessionStoreUnavailable,
    NotFound,
    QueryInvalid,
    WorkspaceAdminRequired,
)
from workspaces.models import ApiToken, KeySession


class WorkspaceListApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        aiEnabled = serializers.BooleanField(source="ai_enabled")

    @extend_schema(summary="List your workspaces")
    @refuses(QueryInvalid)
    @page_schema(OutputSerializer, name="Workspace")
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        workspaces = selectors.workspace_list_for_member(user=credential.user, team=credential.team)
        return paginated(
            request,
            workspaces,
            ordering=("pk",),
            render=lambda page: self.OutputSerializer(page, many=True).data,
        )


class WorkspaceAiConsentApi(APIView):
    class InputSerializer(StrictSerializer):
        enabled = serializers.BooleanField()
        expectedRevision = serializers.IntegerField(min_value=0)

    class OutputSerializer(serializers.Serializer):
        enabled = serializers.BooleanField(source="ai_enabled")
        consentRevision = serializers.IntegerField(source="ai_consent_revision")

    @extend_schema(summary="Read the workspace's AI setting")
    @refuses(*MEMBER_REFUSALS)
    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        return Response(self.OutputSerializer(membership.workspace).data)

    @extend_schema(
        summary="Switch the workspace's AI on or off",
        examples=[
            OpenApiExample(
                "Switch on", value={"enabled": True, "expectedRevision": 0}, request_only=True
            )
        ],
    )
    @refuses(*MEMBER_REFUSALS, WorkspaceAdminRequired, ConsentRevisionConflict)
    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def put(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        workspace = services.workspace_ai_consent_set(
            workspace=membership.workspace,
            enabled=data.validated_data["enabled"],
            expected_revision=data.validated_data["expectedRevision"],
            actor=membership.user,
        )
        return Response(self.OutputSerializer(workspace).data)


class TokenOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    scope = serializers.ChoiceField(choices=ApiToken.Scope.choices)
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)


class TokenListCreateApi(APIView):
    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=100)
        scope = serializers.ChoiceField(
            choices=ApiToken.Scope.choices,
            default=ApiToken.Scope.API,
            help_text="`api`: the person API. `mcp`: only the MCP server, refused on /api/.",
        )
        expiresInDays = serializers.IntegerField(min_value=1, max_value=365, required=False)

    class CreatedSerializer(TokenOutputSerializer):
        token = serializers.CharField(help_text="Shown once; only its hash is kept.")

    @extend_schema(summary="List your personal access tokens")
    @refuses(QueryInvalid)
    @page_schema(TokenOutputSerializer, name="Token")
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        tokens = selectors.api_token_list_for_user(user=credential.user, team=credential.team)
        return paginated(
            request,
            tokens,
            ordering=("-created_at", "-pk"),
            render=lambda page: TokenOutputSerializer(page, many=True).data,
        )

    @extend_schema(
        summary="Create a personal access token (shown once)",
        examples=[
            OpenApiExample(
                "A token for the API",
                value={"name": "laptop", "scope": "api", "expiresInDays": 30},
                request_only=True,
            )
        ],
    )
    @refuses(CredentialKindRefused)
    @extend_schema(request=InputSerializer, responses={201: CreatedSerializer})
    def post(self, request: Request) -> Response:
        credential = request_credential(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token, raw = services.api_token_create(
            user=credential.user,
            team=credential.team,
            name=data.validated_data["name"],
            scope=data.validated_data["scope"],
            ttl_days=data.validated_data.get("expiresInDays"),
            minted_with=credential.kind,
        )
        body = dict(TokenOutputSerializer(token).data, token=raw)
        return Response(body, status=status.HTTP_201_CREATED)


class TokenRevokeApi(APIView):
    @extend_schema(summary="Revoke one of your tokens")
    @refuses(NotFound)
    @extend_schema(responses={204: None})
    def delete(self, request: Request, token_id: int) -> Response:
        credential = request_credential(request)
        token = selectors.api_token_get_for_user(
            user=credential.user, team=credential.team, token_id=token_id
        )
        services.api_token_revoke(token=token, actor=credential.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class JwtIssueApi(APIView):
    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField()
        expiresAt = serializers.DateTimeField()
        expiresInSeconds = serializers.IntegerField()

    @extend_schema(summary="Exchange your credential for a short-lived JWT")
    @refuses(CredentialKindRefused)
    @extend_schema(request=None, responses={201: OutputSerializer})
    def post(self, request: Request) -> Response:
        token, expires_at = services.jwt_issue(credential=request_credential(request))
        body = {
            "token": token,
            "expiresAt": expires_at,
            "expiresInSeconds": settings.JWT_TTL_SECONDS,
        }
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class KeySessionListCreateApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        workspaceId = serializers.IntegerField(source="workspace_id")
        createdAt = serializers.DateTimeField(source="created_at")
        revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
        idleTimeoutSeconds = serializers.SerializerMethodField()

        def get_idleTimeoutSeconds(self, _session: object) -> int:
            return int(settings.KEY_SESSION_IDLE_SECONDS)

    class ListedSerializer(OutputSerializer):
        live = serializers.BooleanField()

    @extend_schema(summary="Open a key session on the workspace")
    @refuses(*MEMBER_REFUSALS, KeySessionStoreUnavailable)
    @extend_schema(request=None, responses={201: OutputSerializer})
    def post(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        session = services.key_session_open(workspace=membership.workspace, user=membership.user)
        return Response(self.OutputSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(summary="List your key sessions on the workspace")
    @refuses(*MEMBER_REFUSALS, QueryInvalid)
    @page_schema(ListedSerializer, name="KeySession")
    def get(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        sessions = selectors.key_session_list_for_user(
            user=membership.user, workspace=membership.workspace
        )

        def render(page: list[KeySession]) -> list[dict[str, Any]]:
            return [
                dict(self.OutputSerializer(session).data, live=live)
                for session, live in selectors.key_session_liveness(sessions=page)
            ]

        return paginated(request, sessions, ordering=("-created_at", "-pk"), render=render)


class KeySessionRevokeApi(APIView):
    @extend_schema(summary="Revoke one of your key sessions")
    @refuses(NotFound)
    @extend_schema(responses={204: None})
    def delete(self, request: Request, session_id: uuid.UUID) -> Response:
        credential = request_credential(request)
        session = selectors.key_session_get_for_owner(
            user=credential.user, team=credential.team, session_id=session_id
        )
        services.key_session_revoke(session=session, revoked_by=credential.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PingApi(APIView):
    """A trivial authenticated read: the yardstick for route overhead in benchmarks."""

    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()
        teamId = serializers.IntegerField()

    @extend_schema(summary="Check a credential")
    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        return Response(self.OutputSerializer({"ok": True, "teamId": credential.team.pk}).data)
