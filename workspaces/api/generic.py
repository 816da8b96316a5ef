"""Base views for route kinds several apps serve the same way."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workspaces.api.access import caller_membership
from workspaces.api.input import validated
from workspaces.authentication import Credential, request_credential
from workspaces.models import User, Workspace


# A workspace setting under compare-and-set. GET reads it; PUT changes it for the revision
# the client last read (`expectedRevision` in the body) and answers the state it left. A
# subclass names its two serializers, its selector and its service. (Comments, not a
# docstring: the schema would publish a docstring as every subclass's description.)
class WorkspaceSettingApi(APIView):
    InputSerializer: type[serializers.Serializer]
    OutputSerializer: type[serializers.Serializer]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(
            get=extend_schema(responses=cls.OutputSerializer),
            put=extend_schema(request=cls.InputSerializer, responses=cls.OutputSerializer),
        )(cls)

    def setting_get(self, workspace: Workspace) -> object:
        raise NotImplementedError

    def setting_set(self, *, workspace: Workspace, actor: User, data: dict[str, Any]) -> object:
        raise NotImplementedError

    def get(self, request: Request, workspace_id: int) -> Response:
        workspace = caller_membership(request, workspace_id).workspace
        return Response(self.OutputSerializer(self.setting_get(workspace)).data)

    def put(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        data = validated(self.InputSerializer(data=request.data))
        state = self.setting_set(workspace=membership.workspace, actor=membership.user, data=data)
        return Response(self.OutputSerializer(state).data)


# DELETE of something the caller may revoke (a token, a key session), answered 204. A
# subclass's `revoke` finds it for the caller from the route's arguments (404 if the caller
# may not see it) and revokes it. (A comment, not a docstring: see WorkspaceSettingApi.)
class RevokeApi(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, **route: Any) -> Response:
        self.revoke(request_credential(request), **route)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def revoke(self, credential: Credential, **route: Any) -> None:
        raise NotImplementedError
