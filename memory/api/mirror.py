"""The auto-memory mirror's routes (`/api/v1/mirror/...`), for a bot token only: what
`manage.py memory mirror --remote` needs and nothing more. Thin: parse, call the
memory-spaces services through `memory.mirror`, render; a document's PUT and DELETE are the
space routes' own (`memory.api.spaces.document_put`, `document_delete`) on the bot's space.

The space is always the calling bot's own auto-memory space of `?project=`; the team and
the bot come from the token, never from the request.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from memory.api.spaces import (
    PATH_PARAMETER,
    SPACE_WRITE_REFUSALS,
    RawBodyApi,
    SpaceDocumentSerializer,
    SpaceSerializer,
    document_delete,
    document_put,
)
from memory.errors import SpaceInvalid, StoreBusy, StoreUnavailable
from memory.mirror import LocalMirrorSpace
from memory_project.api.parsers import MarkdownParser
from memory_project.api.schema import refuses
from memory_project.api.views import ApiView
from workspaces.api.headers import BASE_VERSION_PARAMETERS, BASE_VERSION_REFUSALS
from workspaces.api.input import NO_BODY_REFUSALS
from workspaces.authentication import BotBearerAuthentication, request_credential
from workspaces.errors import (
    CredentialKindRefused,
    DocumentUnreadable,
    InvalidDocumentPath,
    InvalidText,
    NotFound,
)

# A bot token only; the project must name a space the bot may have; the store must answer.
MIRROR_REFUSALS = (CredentialKindRefused, SpaceInvalid, StoreUnavailable, StoreBusy)

PROJECT_PARAMETER = OpenApiParameter(
    "project",
    str,
    OpenApiParameter.QUERY,
    required=True,
    description="The project (one path segment): the last segment of the git root.",
)


def _mirror_space(request: Request) -> LocalMirrorSpace:
    credential = request_credential(request)
    # BotBearerAuthentication admits bot tokens only, and every bot token names its bot.
    assert credential.bot is not None
    return LocalMirrorSpace(bot=credential.bot, project=request.query_params.get("project", ""))


class MirrorBotApi(ApiView):
    authentication_classes = [BotBearerAuthentication]

    class OutputSerializer(serializers.Serializer):
        class LevelsSerializer(serializers.Serializer):
            bot = serializers.CharField(help_text="The bot's setting: on, off or blank.")
            team = serializers.CharField(help_text="The team's default: on, off or blank.")

        bot = serializers.CharField()
        space = SpaceSerializer()
        autoMemory = LevelsSerializer()

    @extend_schema(
        summary="The bot's auto-memory space and its switch levels",
        parameters=[PROJECT_PARAMETER],
        responses=OutputSerializer,
    )
    @refuses(*MIRROR_REFUSALS)
    def get(self, request: Request) -> Response:
        space = _mirror_space(request)
        bot = request_credential(request).bot
        assert bot is not None
        data = {
            "bot": bot.slug,
            "space": space.handle,
            "autoMemory": {"bot": bot.auto_memory, "team": bot.team.auto_memory_default},
        }
        return Response(self.OutputSerializer(data).data)


class MirrorDocumentListApi(ApiView):
    """Every document of the space with its body: a hydrate's one bulk read."""

    authentication_classes = [BotBearerAuthentication]

    class OutputSerializer(serializers.Serializer):
        class DocumentSerializer(serializers.Serializer):
            path = serializers.CharField()
            revision = serializers.IntegerField()
            content = serializers.CharField(allow_blank=True)

        documents = DocumentSerializer(many=True)
        # Stored bodies that are not UTF-8 (DOCUMENT_UNREADABLE when read one at a time).
        unreadable = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        summary="Every document of the auto-memory space, with its body",
        parameters=[PROJECT_PARAMETER],
        responses=OutputSerializer,
    )
    @refuses(*MIRROR_REFUSALS, DocumentUnreadable)
    def get(self, request: Request) -> Response:
        documents, unreadable = [], []
        for each in _mirror_space(request).documents():
            if each.body is None:
                unreadable.append(each.path)
            else:
                content = each.body.decode()  # the space checked it is UTF-8
                documents.append({"path": each.path, "revision": each.revision, "content": content})
        answer = {"documents": documents, "unreadable": unreadable}
        return Response(self.OutputSerializer(answer).data)


class MirrorDocumentApi(RawBodyApi):
    authentication_classes = [BotBearerAuthentication]
    parser_classes = [MarkdownParser]

    @extend_schema(
        summary="Write a document of the auto-memory space",
        parameters=[PROJECT_PARAMETER, PATH_PARAMETER, *BASE_VERSION_PARAMETERS],
        request={"text/markdown": OpenApiTypes.STR},
        responses=SpaceDocumentSerializer,
    )
    @refuses(
        *MIRROR_REFUSALS,
        *SPACE_WRITE_REFUSALS,
        *BASE_VERSION_REFUSALS,
        InvalidDocumentPath,
        InvalidText,
    )
    def put(self, request: Request) -> Response:
        space = _mirror_space(request)
        return document_put(request, handle=space.handle, writer=space.writer)

    @extend_schema(
        summary="Delete a document of the auto-memory space",
        parameters=[PROJECT_PARAMETER, PATH_PARAMETER, *BASE_VERSION_PARAMETERS],
        responses={204: None},
    )
    @refuses(
        *MIRROR_REFUSALS, *BASE_VERSION_REFUSALS, *NO_BODY_REFUSALS, InvalidDocumentPath, NotFound
    )
    def delete(self, request: Request) -> Response:
        space = _mirror_space(request)
        return document_delete(request, handle=space.handle, writer=space.writer)
