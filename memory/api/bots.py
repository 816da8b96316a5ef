"""The bot routes (`/api/v1/bots...`), for the people of a team. Thin: parse, call
`memory.bots` and the token services, render.

The team is the credential's: a bot of another team is the same 404 as none. Every member
lists and reads the team's bots and their tokens (never a token's secret) and validates a
spec; only team owners create and change bots and issue or revoke their tokens
(`TEAM_OWNER_REQUIRED`).

A spec travels as a JSON object, or as YAML or JSON text (what a person pastes from a
runtime's config file); either way the route judges the object it denotes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from memory.bots import KEEP, bot_create, bot_get, bot_list, bot_update, memory_spec_diagnostics
from memory.errors import AutoloadPatternInvalid, BotSlugTaken, BotSpecInvalid
from memory_project.api.pagination import page_schema, paginated
from memory_project.api.schema import operation, refuses
from memory_project.api.serializers import DisplayNameField, StrictSerializer
from memory_project.api.views import ApiView
from workspaces.api.generic import RevokeApi
from workspaces.api.input import validated
from workspaces.api.views import TokenOutputSerializer
from workspaces.authentication import Credential, request_credential
from workspaces.errors import NotFound, TeamOwnerRequired, ValidationFailed
from workspaces.models import Bot
from workspaces.selectors import bot_token_list
from workspaces.services import bot_token_issue, bot_token_revoke

# What a change to one of the team's bots (or to its tokens) refuses with: a bot of another
# team, or none (404), and a caller who is not a team owner.
OWNER_REFUSALS = (NotFound, TeamOwnerRequired)
# What a spec with an error diagnostic is refused with, when a bot is created or changed.
SPEC_REFUSALS = (BotSpecInvalid, AutoloadPatternInvalid)


class SpecSerializer(StrictSerializer):
    runtime = serializers.ChoiceField(choices=Bot.Runtime.choices)
    memory = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="The memory spec: an object, YAML or JSON text of one, or null (blank text).",
    )
    autoMemory = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="on, off, true, false, 1, 0 or blank; anything else is diagnostic C131.",
    )

    def validate_memory(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                # YAML 1.1 reads JSON too; safe_load builds plain data, never objects.
                value = yaml.safe_load(value)
            except yaml.YAMLError as error:
                mark = getattr(error, "problem_mark", None)
                where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
                raise serializers.ValidationError(
                    f"The memory spec is not YAML or JSON{where}."
                ) from None
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


class BotSpecValidateApi(ApiView):
    class InputSerializer(SpecSerializer):
        bot = serializers.CharField(
            required=False,
            max_length=64,
            help_text=(
                "The id of the bot whose spec this would replace: the `user` its stored spec "
                "names may stay (C051), as on save. Without it, the spec of a new bot."
            ),
        )

    class OutputSerializer(serializers.Serializer):
        diagnostics = DiagnosticSerializer(many=True)

    @operation(
        "Check a bot's memory spec",
        NotFound,
        example=("No memory spec", {"runtime": "claw", "memory": None}),
        request=InputSerializer,
        responses=OutputSerializer,
        description=(
            "The diagnostics of a bot's spec (docs/bots.md), judged as saving it would judge "
            "the caller (C051); nothing is saved. A `bot` of another team, or none, is 404."
        ),
    )
    def post(self, request: Request) -> Response:
        credential = request_credential(request)
        data = validated(self.InputSerializer(data=request.data))
        edited = None if "bot" not in data else bot_get(team=credential.team, slug=data["bot"])
        diagnostics = memory_spec_diagnostics(
            runtime=data["runtime"],
            memory=data.get("memory"),
            auto_memory=data.get("autoMemory"),
            person=credential.user,
            before=None if edited is None else edited.memory_spec,
        )
        return Response({"diagnostics": [each.as_json() for each in diagnostics]})


class BotListCreateApi(ApiView):
    class InputSerializer(SpecSerializer):
        id = serializers.CharField(max_length=64, help_text="A slug, unique in the team.")
        name = DisplayNameField(max_length=200)

    @operation("List the team's bots", ValidationFailed)
    @page_schema(BotSerializer, name="Bot")
    def get(self, request: Request) -> Response:
        credential = request_credential(request)
        return paginated(
            request, bot_list(team=credential.team), ordering=("slug",), serializer=BotSerializer
        )

    @operation(
        "Create a bot",
        TeamOwnerRequired,
        *SPEC_REFUSALS,
        BotSlugTaken,
        example=("A bot", {"id": "helper", "name": "Helper", "runtime": "claw"}),
        request=InputSerializer,
        responses={201: BotSerializer},
    )
    def post(self, request: Request) -> Response:
        credential = request_credential(request)
        data = validated(self.InputSerializer(data=request.data))
        bot = bot_create(
            team=credential.team,
            actor=credential.user,
            slug=data["id"],
            name=data["name"],
            runtime=data["runtime"],
            memory=data.get("memory"),
            auto_memory=data.get("autoMemory"),
        )
        return Response(BotSerializer(bot).data, status=status.HTTP_201_CREATED)


class BotDetailApi(ApiView):
    class InputSerializer(SpecSerializer):
        runtime = serializers.ChoiceField(choices=Bot.Runtime.choices, required=False)
        name = DisplayNameField(max_length=200, required=False)

    @operation("Read a bot", NotFound, responses=BotSerializer)
    def get(self, request: Request, bot_id: str) -> Response:
        credential = request_credential(request)
        return Response(BotSerializer(bot_get(team=credential.team, slug=bot_id)).data)

    @operation(
        "Change a bot",
        *OWNER_REFUSALS,
        *SPEC_REFUSALS,
        example=(
            "Read-only memory",
            {"memory": {"visibility": "bot", "name": "notes", "write": False}},
        ),
        request=InputSerializer,
        responses=BotSerializer,
        description=(
            "Change the fields given; the resulting spec is judged against the "
            "resulting runtime, and one with an error diagnostic is refused whole."
        ),
    )
    def patch(self, request: Request, bot_id: str) -> Response:
        credential = request_credential(request)
        bot = bot_get(team=credential.team, slug=bot_id)
        given = validated(self.InputSerializer(data=request.data))
        bot = bot_update(
            bot=bot,
            actor=credential.user,
            name=given.get("name", KEEP),
            runtime=given.get("runtime", KEEP),
            memory=given.get("memory", KEEP),
            auto_memory=given.get("autoMemory", KEEP),
        )
        return Response(BotSerializer(bot).data)


class BotTokenIssueApi(ApiView):
    """A bot's tokens: listed to every member of its team, issued by an owner."""

    class InputSerializer(StrictSerializer):
        name = DisplayNameField(max_length=100)

    class CreatedSerializer(TokenOutputSerializer):
        token = serializers.CharField(help_text="Shown once; only its hash is kept.")

    class ListedSerializer(TokenOutputSerializer):
        lastUsedAt = serializers.DateTimeField(
            source="last_used_at", allow_null=True, help_text="To the minute; null: never."
        )

    @operation("List a bot's tokens (never their secrets)", NotFound)
    @page_schema(ListedSerializer, name="BotToken")
    def get(self, request: Request, bot_id: str) -> Response:
        credential = request_credential(request)
        bot = bot_get(team=credential.team, slug=bot_id)
        return paginated(
            request,
            bot_token_list(bot=bot),
            ordering=("-created_at", "-pk"),
            serializer=self.ListedSerializer,
        )

    @operation(
        "Issue a token for a bot (shown once)",
        *OWNER_REFUSALS,
        example=("A token", {"name": "ci"}),
        request=InputSerializer,
        responses={201: CreatedSerializer},
    )
    def post(self, request: Request, bot_id: str) -> Response:
        credential = request_credential(request)
        bot = bot_get(team=credential.team, slug=bot_id)
        data = validated(self.InputSerializer(data=request.data))
        token, raw = bot_token_issue(
            bot=bot,
            actor=credential.user,
            name=data["name"],
            minted_with=credential.kind,
        )
        body = dict(TokenOutputSerializer(token).data, token=raw)
        return Response(body, status=status.HTTP_201_CREATED)


@refuses(*OWNER_REFUSALS)
class BotTokenRevokeApi(RevokeApi):
    summary = "Revoke a bot's token"

    def revocation(self, credential: Credential, **route: Any) -> Callable[[], object]:
        bot = bot_get(team=credential.team, slug=route["bot_id"])
        return lambda: bot_token_revoke(bot=bot, token_id=route["token_id"], actor=credential.user)
