"""Tenancy, token and workspace AI consent routes. Thin: parse, call, render."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from memory_project.api.pagination import page_schema, paginated
from memory_project.api.schema import operation
from memory_project.api.serializers import DisplayNameField, StrictSerializer
from memory_project.api.views import ApiView
from workspaces import selectors, services
from workspaces.api.access import MEMBER_REFUSALS, caller_membership
from workspaces.api.generic import RevokeApi, WorkspaceSettingApi
from workspaces.api.input import NO_BODY_REFUSALS, no_body_require, validated
from workspaces.authentication import Credential, request_credential
from workspaces.errors import (
    AlreadyMember,
    ConsentRevisionConflict,
    CredentialKindRefused,
    CredentialOwnerInactive,
    KeySessionStoreUnavailable,
    LastWorkspaceAdmin,
    NameTaken,
    NotTeamMember,
    ValidationFailed,
    WorkspaceAdminRequired,
)
from workspaces.models import ApiToken, KeySession, User, Workspace, WorkspaceMembership


class WorkspaceListApi(ApiView):
    class InputSerializer(StrictSerializer):
        name = DisplayNameField(max_length=200)
        aiEnabled = serializers.BooleanField(
            default=False, help_text="Switch workspace AI on from the start (you are its admin)."
        )

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        aiEnabled = serializers.BooleanField(source="ai_enabled")

    @operation("List your workspaces", ValidationFailed)
    @page_schema(OutputSerializer, name="Workspace")
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        workspaces = selectors.workspace_list_for_member(user=credential.user, team=credential.team)
        return paginated(request, workspaces, ordering=("pk",), serializer=self.OutputSerializer)

    @operation(
        "Create a workspace (you are its admin)",
        NameTaken,
        example=("A workspace", {"name": "Research"}),
        request=InputSerializer,
        responses={201: OutputSerializer},
    )
    def post(self, request: Request) -> Response:
        credential = request_credential(request)
        data = validated(self.InputSerializer(data=request.data))
        workspace = services.workspace_create(
            team=credential.team,
            name=data["name"],
            admin=credential.user,
            ai_enabled=data["aiEnabled"],
        )
        return Response(self.OutputSerializer(workspace).data, status=status.HTTP_201_CREATED)


class WorkspaceMemberOutputSerializer(serializers.Serializer):
    userId = serializers.IntegerField(source="user_id")
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=WorkspaceMembership.Role.choices)
    joinedAt = serializers.DateTimeField(source="created_at")


class WorkspaceMemberListApi(ApiView):
    class InputSerializer(StrictSerializer):
        userId = serializers.IntegerField(min_value=1, required=False)
        username = serializers.CharField(max_length=150, required=False)
        role = serializers.ChoiceField(
            choices=WorkspaceMembership.Role.choices, default=WorkspaceMembership.Role.MEMBER
        )

        def validate(self, data: dict[str, Any]) -> dict[str, Any]:
            if ("userId" in data) == ("username" in data):
                raise serializers.ValidationError(
                    "Name the person by exactly one of userId or username."
                )
            return data

    @operation("List a workspace's members", *MEMBER_REFUSALS, ValidationFailed)
    @page_schema(WorkspaceMemberOutputSerializer, name="WorkspaceMember")
    def get(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        return paginated(
            request,
            selectors.workspace_member_list(workspace=membership.workspace),
            ordering=("created_at", "pk"),
            serializer=WorkspaceMemberOutputSerializer,
        )

    @operation(
        "Add a member of the team to the workspace",
        *MEMBER_REFUSALS,
        WorkspaceAdminRequired,
        NotTeamMember,
        AlreadyMember,
        example=("By username", {"username": "ada"}),
        request=InputSerializer,
        responses={201: WorkspaceMemberOutputSerializer},
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        data = validated(self.InputSerializer(data=request.data))
        added = services.workspace_member_add(
            workspace=membership.workspace,
            actor=membership.user,
            user_id=data.get("userId"),
            username=data.get("username"),
            role=data["role"],
        )
        body = WorkspaceMemberOutputSerializer(added).data
        return Response(body, status=status.HTTP_201_CREATED)


class WorkspaceMemberApi(ApiView):
    class InputSerializer(StrictSerializer):
        role = serializers.ChoiceField(choices=WorkspaceMembership.Role.choices)

    @operation(
        "Make a member an admin, or an admin a member",
        *MEMBER_REFUSALS,
        WorkspaceAdminRequired,
        LastWorkspaceAdmin,
        example=("Make an admin", {"role": "admin"}),
        request=InputSerializer,
        responses={200: WorkspaceMemberOutputSerializer},
        description="Admins only. The workspace always keeps at least one admin.",
    )
    def patch(self, request: Request, workspace_id: int, user_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        data = validated(self.InputSerializer(data=request.data))
        changed = services.workspace_member_role_set(
            workspace=membership.workspace,
            actor=membership.user,
            user_id=user_id,
            role=data["role"],
        )
        return Response(WorkspaceMemberOutputSerializer(changed).data)

    @operation(
        "Remove a member, or leave",
        *MEMBER_REFUSALS,
        WorkspaceAdminRequired,
        LastWorkspaceAdmin,
        *NO_BODY_REFUSALS,
        responses={204: None},
        description="Remove a member (admins only), or leave: your own user id.",
    )
    def delete(self, request: Request, workspace_id: int, user_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        no_body_require(request)
        services.workspace_member_remove(
            workspace=membership.workspace, actor=membership.user, user_id=user_id
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkspaceAiConsentApi(WorkspaceSettingApi):
    class InputSerializer(StrictSerializer):
        enabled = serializers.BooleanField()
        expectedRevision = serializers.IntegerField(min_value=0)

    class OutputSerializer(serializers.Serializer):
        enabled = serializers.BooleanField(source="ai_enabled")
        consentRevision = serializers.IntegerField(source="ai_consent_revision")

    summaries = {
        "get": "Read the workspace's AI setting",
        "put": "Switch the workspace's AI on or off",
    }
    example = {"enabled": True, "expectedRevision": 0}
    put_refusals = (WorkspaceAdminRequired, ConsentRevisionConflict)

    def setting_get(self, workspace: Workspace) -> Workspace:
        return workspace

    def setting_set(self, *, workspace: Workspace, actor: User, data: dict[str, Any]) -> Workspace:
        return services.workspace_ai_consent_set(
            workspace=workspace,
            enabled=data["enabled"],
            expected_revision=data["expectedRevision"],
            actor=actor,
        )


class TokenOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    scope = serializers.ChoiceField(choices=ApiToken.Scope.choices)
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at")
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)
    lastUsedAt = serializers.DateTimeField(
        source="last_used_at",
        allow_null=True,
        help_text="When it last authenticated a request, to the minute; null if never.",
    )


class TokenListCreateApi(ApiView):
    class InputSerializer(StrictSerializer):
        name = DisplayNameField(max_length=100)
        # A bot's token is issued for its bot (`/api/v1/bots/{id}/tokens`), never here.
        scope = serializers.ChoiceField(
            choices=[
                (ApiToken.Scope.API, ApiToken.Scope.API.label),
                (ApiToken.Scope.MCP, ApiToken.Scope.MCP.label),
            ],
            default=ApiToken.Scope.API,
            help_text="`api`: the person API. `mcp`: only the MCP server, refused on /api/.",
        )
        expiresInDays = serializers.IntegerField(min_value=1, max_value=365, required=False)

    class CreatedSerializer(TokenOutputSerializer):
        token = serializers.CharField(help_text="Shown once; only its hash is kept.")

    @operation("List your personal access tokens", ValidationFailed)
    @page_schema(TokenOutputSerializer, name="Token")
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        tokens = selectors.api_token_list_for_user(user=credential.user, team=credential.team)
        return paginated(
            request, tokens, ordering=("-created_at", "-pk"), serializer=TokenOutputSerializer
        )

    @operation(
        "Create a personal access token (shown once)",
        CredentialKindRefused,
        example=("A token for the API", {"name": "laptop", "scope": "api", "expiresInDays": 30}),
        request=InputSerializer,
        responses={201: CreatedSerializer},
    )
    def post(self, request: Request) -> Response:
        credential = request_credential(request)
        data = validated(self.InputSerializer(data=request.data))
        token, raw = services.api_token_create(
            user=credential.user,
            team=credential.team,
            name=data["name"],
            scope=data["scope"],
            ttl_days=data.get("expiresInDays"),
            minted_with=credential.kind,
        )
        body = dict(TokenOutputSerializer(token).data, token=raw)
        return Response(body, status=status.HTTP_201_CREATED)


class TokenRevokeApi(RevokeApi):
    summary = "Revoke one of your tokens"

    def revocation(self, credential: Credential, **route: Any) -> Callable[[], object]:
        token = selectors.api_token_get_for_user(
            user=credential.user, team=credential.team, token_id=route["token_id"]
        )
        return lambda: services.api_token_revoke(token=token, actor=credential.user)


class JwtIssueApi(ApiView):
    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField()
        expiresAt = serializers.DateTimeField()
        expiresInSeconds = serializers.IntegerField()

    @operation(
        "Exchange your credential for a short-lived JWT",
        CredentialKindRefused,
        *NO_BODY_REFUSALS,
        request=None,
        responses={201: OutputSerializer},
    )
    def post(self, request: Request) -> Response:
        no_body_require(request)
        token, expires_at = services.jwt_issue(credential=request_credential(request))
        body = {
            "token": token,
            "expiresAt": expires_at,
            "expiresInSeconds": settings.JWT_TTL_SECONDS,
        }
        return Response(self.OutputSerializer(body).data, status=status.HTTP_201_CREATED)


class KeySessionListCreateApi(ApiView):
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

    class CreatedSerializer(OutputSerializer):
        # Only when the session is opened: each use restarts the idle timeout, so a listed
        # session's moment would be a guess (`live` says whether its key is still held).
        expiresAt = serializers.SerializerMethodField(
            help_text="When the key idles out if the session is not used; each use restarts it."
        )

        def get_expiresAt(self, session: KeySession) -> datetime:
            return session.created_at + timedelta(seconds=settings.KEY_SESSION_IDLE_SECONDS)

    @operation(
        "Open a key session on the workspace",
        *MEMBER_REFUSALS,
        KeySessionStoreUnavailable,
        CredentialOwnerInactive,
        *NO_BODY_REFUSALS,
        request=None,
        responses={201: CreatedSerializer},
    )
    def post(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        no_body_require(request)
        # Opened from a browser session (or a JWT minted from one), it ends with that session.
        session = services.key_session_open(
            workspace=membership.workspace,
            user=membership.user,
            browser_session_key=request_credential(request).session_key,
        )
        return Response(self.CreatedSerializer(session).data, status=status.HTTP_201_CREATED)

    @operation("List your key sessions on the workspace", *MEMBER_REFUSALS, ValidationFailed)
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


class KeySessionRevokeApi(RevokeApi):
    summary = "Revoke one of your key sessions"

    def revocation(self, credential: Credential, **route: Any) -> Callable[[], object]:
        session = selectors.key_session_get_for_owner(
            user=credential.user, team=credential.team, session_id=route["session_id"]
        )
        return lambda: services.key_session_revoke(session=session, revoked_by=credential.user)


class PingApi(ApiView):
    """A trivial authenticated read: the yardstick for route overhead in benchmarks."""

    # The answer's schema; `get` builds the two fields itself, already JSON types, without
    # a serializer's per-request copy of its fields (as the recall does).
    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()
        teamId = serializers.IntegerField()

    @operation("Check a credential", responses=OutputSerializer)
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        return Response({"ok": True, "teamId": credential.team.pk})
