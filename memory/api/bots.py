"""The bot routes (`/api/v1/bots...`), for the people of a team. Thin: parse, call
`memory.bots` and the token services, render.

The team is the credential's: a bot of another team is the same 404 as none. Every member
lists the team's bots and validates a spec; only team owners create bots and issue or revoke
their tokens (`TEAM_OWNER_REQUIRED`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.bots import bot_create, bot_get, bot_list, memory_spec_diagnostics
from memory.errors import AutoloadPatternInvalid, BotSlugTaken, BotSpecInvalid
from memory_project.api.pagination import page_schema, paginated
from memory_project.api.schema import refuses
from memory_project.api.serializers import StrictSerializer
from workspaces.api.views import TokenOutputSerializer
from workspaces.authentication import request_credential
from workspaces.errors import NotFound, QueryInvalid, TeamOwnerRequired
from workspaces.models import Bot
from workspaces.services import bot_token_issue, bot_token_revoke


class SpecSerializer(StrictSerializer):
    runtime = serializers.ChoiceField(choices=Bot.Runtime.choices)
    memory = serializers.JSONField(
        required=False, allow_null=True, help_text="The memory spec: an object, or null."
    )
    autoMemory = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="on, off, true, false, 1, 0 or blank; anything else is diagnostic C131.",
    )

    def validate_memory(self, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("The memory spec is an object or null.")
        return value


class DiagnosticSerializer(serializers.Serializer):
    code = serializers.CharField()
    severity = serializers.ChoiceField(choices=["error", "warning"])
    field = serializers.CharField()
    message = serializers.CharField()


class BotSerializer(serializers.Serializer):
    id = serializers.CharField(source="slug")
    name = serializers.CharField()
    runtime = serializers.ChoiceField(choices=Bot.Runtime.choices)
    memory = serializers.JSONField(source="memory_spec", allow_null=True)
    autoMemory = serializers.CharField(source="auto_memory", help_text="on, off, or blank.")
    createdAt = serializers.DateTimeField(source="created_at")


class BotSpecValidateApi(APIView):
    class OutputSerializer(serializers.Serializer):
        diagnostics = DiagnosticSerializer(many=True)

    @extend_schema(
        summary="Check a bot's memory spec",
        examples=[
            OpenApiExample(
                "No memory spec", value={"runtime": "claw", "memory": None}, request_only=True
            )
        ],
    )
    @extend_schema(
        request=SpecSerializer,
        responses=OutputSerializer,
        description="The diagnostics of a bot's spec (docs/bots.md); nothing is saved.",
    )
    def post(self, request: Request) -> Response:
        request_credential(request)
        data = SpecSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        diagnostics = memory_spec_diagnostics(
            runtime=data.validated_data["runtime"],
            memory=data.validated_data.get("memory"),
            auto_memory=data.validated_data.get("autoMemory"),
        )
        return Response({"diagnostics": [each.as_json() for each in diagnostics]})


class BotListCreateApi(APIView):
    class InputSerializer(SpecSerializer):
        id = serializers.CharField(max_length=64, help_text="A slug, unique in the team.")
        name = serializers.CharField(max_length=200)

    @extend_schema(summary="List the team's bots")
    @refuses(QueryInvalid)
    @page_schema(BotSerializer, name="Bot")
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        return paginated(
            request,
            bot_list(team=credential.team),
            ordering=("slug",),
            render=lambda page: BotSerializer(page, many=True).data,
        )

    @extend_schema(
        summary="Create a bot",
        examples=[
            OpenApiExample(
                "A bot",
                value={"id": "helper", "name": "Helper", "runtime": "claw"},
                request_only=True,
            )
        ],
    )
    @refuses(TeamOwnerRequired, BotSpecInvalid, AutoloadPatternInvalid, BotSlugTaken)
    @extend_schema(request=InputSerializer, responses={201: BotSerializer})
    def post(self, request: Request) -> Response:
        credential = request_credential(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        bot = bot_create(
            team=credential.team,
            actor=credential.user,
            slug=data.validated_data["id"],
            name=data.validated_data["name"],
            runtime=data.validated_data["runtime"],
            memory=data.validated_data.get("memory"),
            auto_memory=data.validated_data.get("autoMemory"),
        )
        return Response(BotSerializer(bot).data, status=status.HTTP_201_CREATED)


class BotTokenIssueApi(APIView):
    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=100)

    class CreatedSerializer(TokenOutputSerializer):
        token = serializers.CharField(help_text="Shown once; only its hash is kept.")

    @extend_schema(
        summary="Issue a token for a bot (shown once)",
        examples=[OpenApiExample("A token", value={"name": "ci"}, request_only=True)],
    )
    @refuses(NotFound, TeamOwnerRequired)
    @extend_schema(request=InputSerializer, responses={201: CreatedSerializer})
    def post(self, request: Request, bot_id: str) -> Response:
        credential = request_credential(request)
        bot = bot_get(team=credential.team, slug=bot_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token, raw = bot_token_issue(
            bot=bot,
            actor=credential.user,
            name=data.validated_data["name"],
            minted_with=credential.kind,
        )
        body = dict(TokenOutputSerializer(token).data, token=raw)
        return Response(body, status=status.HTTP_201_CREATED)


class BotTokenRevokeApi(APIView):
    @extend_schema(summary="Revoke a bot's token")
    @refuses(NotFound, TeamOwnerRequired)
    @extend_schema(responses={204: None})
    def delete(self, request: Request, bot_id: str, token_id: int) -> Response:
        credential = request_credential(request)
        bot = bot_get(team=credential.team, slug=bot_id)
        bot_token_revoke(bot=bot, token_id=token_id, actor=credential.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
