"""Base views for route kinds several apps serve the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from memory_project.api.schema import Refusal, refuses
from memory_project.api.views import ApiView
from workspaces.api.access import MEMBER_REFUSALS, caller_membership
from workspaces.api.input import NO_BODY_REFUSALS, no_body_require, validated
from workspaces.authentication import Credential, request_credential
from workspaces.errors import NotFound
from workspaces.models import User, Workspace


# A workspace setting under compare-and-set. GET reads it; PUT changes it for the revision
# the client last read (`expectedRevision` in the body) and answers the state it left. A
# subclass names its two serializers, its selector and its service, and for the schema the
# two operations' summaries, a valid PUT example and what only PUT refuses (its conflict).
# (Comments, not a docstring: the schema would publish a docstring as every subclass's
# description.)
class WorkspaceSettingApi(ApiView):
    InputSerializer: type[serializers.Serializer]
    OutputSerializer: type[serializers.Serializer]
    summaries: dict[str, str]
    example: dict[str, Any]
    put_refusals: tuple[Refusal, ...]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)

        # The handlers are made per subclass, so that marking their refusals marks no other view.
        def get(self: WorkspaceSettingApi, request: Request, workspace_id: int) -> Response:
            return self.read(request, workspace_id)

        def put(self: WorkspaceSettingApi, request: Request, workspace_id: int) -> Response:
            return self.change(request, workspace_id)

        cls.get = refuses(*MEMBER_REFUSALS)(get)  # type: ignore[attr-defined]
        cls.put = refuses(*MEMBER_REFUSALS, *cls.put_refusals)(put)  # type: ignore[attr-defined]
        extend_schema_view(
            get=extend_schema(summary=cls.summaries["get"], responses=cls.OutputSerializer),
            put=extend_schema(
                summary=cls.summaries["put"],
                request=cls.InputSerializer,
                responses=cls.OutputSerializer,
                examples=[OpenApiExample("Example", value=cls.example, request_only=True)],
            ),
        )(cls)

    def setting_get(self, workspace: Workspace) -> object:
        raise NotImplementedError

    def setting_set(self, *, workspace: Workspace, actor: User, data: dict[str, Any]) -> object:
        raise NotImplementedError

    def read(self, request: Request, workspace_id: int) -> Response:
        workspace = caller_membership(request, workspace_id).workspace
        return Response(self.OutputSerializer(self.setting_get(workspace)).data)

    def change(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        data = validated(self.InputSerializer(data=request.data))
        state = self.setting_set(workspace=membership.workspace, actor=membership.user, data=data)
        return Response(self.OutputSerializer(state).data)


# DELETE of something the caller may revoke (a token, a key session), answered 204. A
# subclass's `revocation` finds it for the caller from the route's arguments (404 if the
# caller may not see it, declared here for every subclass) and returns what revokes it, run
# once the request is known to carry no body: a body is refused only of what the caller may
# see. It names the operation's `summary` and declares with `refuses` what else it refuses
# with. (A comment, not a docstring: see WorkspaceSettingApi.)
@refuses(NotFound, *NO_BODY_REFUSALS)
class RevokeApi(ApiView):
    summary: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        extend_schema_view(delete=extend_schema(summary=cls.summary, responses={204: None}))(cls)

    def delete(self, request: Request, **route: Any) -> Response:
        revoke = self.revocation(request_credential(request), **route)
        no_body_require(request)
        revoke()
        return Response(status=status.HTTP_204_NO_CONTENT)

    def revocation(self, credential: Credential, **route: Any) -> Callable[[], object]:
        raise NotImplementedError
