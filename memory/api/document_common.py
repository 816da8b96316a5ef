"""What a person's document routes (`memory.api.documents`, `memory.api.search`) and the
automation document routes (`automation.api.documents`) share: the shapes they parse and
render (automation names its own schema components by subclassing these), their schema
parameters, the read-or-list GET and the search. The component names are those the schema
has always published (the serializers were nested in their views then), so generated
clients keep their types."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from memory import documents
from memory_project.api.pagination import PAGE_PARAMETERS, paginated
from memory_project.api.schema import Refusal, operation
from memory_project.api.serializers import QuerySerializer, StrictSerializer
from workspaces.api.access import caller_membership
from workspaces.api.headers import (
    BASE_VERSION_PARAMETERS,
    BASE_VERSION_REFUSALS,
    base_version_from,
    entity_tag,
)
from workspaces.api.input import NO_BODY_REFUSALS, no_body_require, validated
from workspaces.errors import (
    DocumentExists,
    DocumentTooLarge,
    DocumentUnreadable,
    InvalidDocumentPath,
    InvalidText,
    TenantQuotaExceeded,
    ValidationFailed,
)
from workspaces.models import ChangeKind, File


def _path_parameter(*, required: bool) -> OpenApiParameter:
    return OpenApiParameter(
        "path", str, required=required, description="The document's canonical path."
    )


PATH_PARAMETER = _path_parameter(required=False)
PATH_REQUIRED = _path_parameter(required=True)


class PathField(serializers.CharField):
    """A document path exactly as sent.

    Not trimmed, and NUL or lone surrogates are not refused here: the path rules decide
    (the namespace, then the canonical spelling), with their own codes, so that no spelling
    of a reserved path is answered by a generic validation error instead.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, allow_blank=True, **kwargs)
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(
                validator, ProhibitNullCharactersValidator | ProhibitSurrogateCharactersValidator
            )
        ]


class DocumentListQuerySerializer(QuerySerializer):
    prefix = serializers.CharField(required=False, trim_whitespace=False, max_length=1024)
    includeDeleted = serializers.BooleanField(default=False)


class DocumentContentSerializer(StrictSerializer):
    # Never trimmed or normalised: the saved text is exactly the text sent.
    content = serializers.CharField(allow_blank=True, trim_whitespace=False)


@extend_schema_serializer(component_name="DocumentApiDocument")
class DocumentSerializer(serializers.Serializer):
    path = serializers.CharField()
    content = serializers.CharField()
    version = serializers.IntegerField()
    bytes = serializers.IntegerField()


class DocumentStateSerializer(serializers.Serializer):
    """The state a delete, move or restore leaves: the version to name in the next change."""

    path = serializers.CharField()
    version = serializers.IntegerField(source="current_version")
    updatedAt = serializers.DateTimeField(source="updated_at")
    deleted = serializers.BooleanField(source="is_deleted")


class DocumentListItemSerializer(DocumentStateSerializer):
    bytes = serializers.IntegerField(source="current_bytes", allow_null=True)


@extend_schema_serializer(component_name="DocumentMoveApiDocumentMove")
class DocumentMoveSerializer(StrictSerializer):
    to = PathField()

    def get_fields(self) -> dict[str, serializers.Field]:
        # `from` is a Python keyword, so it cannot be declared as a class attribute.
        return {"from": PathField(), **super().get_fields()}


@extend_schema_serializer(component_name="DocumentRestoreApiDocumentRestore")
class DocumentRestoreSerializer(StrictSerializer):
    path = PathField()


CLEAR_HEADER = OpenApiParameter(
    "X-Memory-Clear",
    int,
    OpenApiParameter.HEADER,
    description="1 with empty content, on the memory path only: Clear.",
)


@extend_schema_serializer(component_name="DocumentApiDocumentSave")
class DocumentSaveSerializer(DocumentContentSerializer):
    # A person's save; a Clear (X-Memory-Clear: 1, in the context) sends empty content.
    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.context["is_clear"] and attrs["content"] != "":
            raise serializers.ValidationError("A Clear sends empty content.")
        return attrs


class RevisionSerializer(serializers.Serializer):
    # The revision a write made. (Not a docstring: it would describe every subclass.)
    path = serializers.CharField(source="file.path")
    version = serializers.IntegerField()
    bytes = serializers.IntegerField(source="size_bytes")


@extend_schema_serializer(component_name="DocumentApiDocumentWritten")
class DocumentWrittenSerializer(RevisionSerializer):
    changeKind = serializers.ChoiceField(source="change_kind", choices=ChangeKind.choices)


class SearchQuerySerializer(QuerySerializer):
    q = serializers.CharField(min_length=1, max_length=200)
    limit = serializers.IntegerField(
        min_value=1,
        max_value=documents.SEARCH_MAX_LIMIT,
        default=documents.SEARCH_DEFAULT_LIMIT,
    )
    cursor = serializers.CharField(
        required=False,
        trim_whitespace=False,
        max_length=documents.SEARCH_CURSOR_MAX_CHARS,
        help_text="The `nextCursor` of the previous page, to continue a truncated search.",
    )


class SearchHitSerializer(serializers.Serializer):
    path = serializers.CharField()
    version = serializers.IntegerField()
    snippet = serializers.CharField()


class SearchResultsSerializer(serializers.Serializer):
    results = SearchHitSerializer(source="hits", many=True)
    truncated = serializers.BooleanField(source="is_truncated")
    nextCursor = serializers.CharField(source="next_cursor", allow_null=True)


# Why a search may answer part of its matches; each search route's description ends the
# sentence.
SEARCH_BOUND = (
    "Documents are encrypted at rest, so one request decrypts a bounded number of bytes: "
    "when it stops early, `truncated` is true and `nextCursor` continues"
)


def search_operation(
    summary: str, *refusals: Refusal, results: type[SearchResultsSerializer], description: str
) -> Callable[[Any], Any]:
    """A search route's schema: `operation` with the search's query and `results`."""
    return operation(
        summary,
        *refusals,
        ValidationFailed,
        parameters=[SearchQuerySerializer],
        responses=results,
        description=description,
    )


def search(request: Request, actor: documents.DocumentActor) -> documents.SearchResults:
    """The search the query asks for, as `actor`."""
    query = validated(SearchQuerySerializer(data=request.query_params))
    return documents.document_search(
        actor=actor, query=query["q"], limit=query["limit"], cursor=query.get("cursor")
    )


@dataclass(frozen=True)
class ReadOrList:
    """GET on a documents route: with `path`, read that document (one object); without,
    list the documents (an array of `item`)."""

    component_name: str
    document: type[serializers.Serializer]
    item: type[serializers.Serializer]
    description: str

    def schema(self) -> Callable[..., Any]:
        page = inline_serializer(
            name=f"{self.component_name}Page",
            fields={
                "results": self.item(many=True),
                "next": serializers.URLField(allow_null=True),
                "previous": serializers.URLField(allow_null=True),
            },
        )
        return extend_schema(
            parameters=[PATH_PARAMETER, DocumentListQuerySerializer, *PAGE_PARAMETERS],
            responses=PolymorphicProxySerializer(
                component_name=self.component_name,
                serializers=[self.document, page],
                resource_type_field_name=None,
                many=False,
            ),
            description=self.description,
        )

    def respond(self, request: Request, actor: documents.DocumentActor) -> Response:
        raw_path = request.query_params.get("path")
        if raw_path is not None:
            document = documents.document_read(actor=actor, raw_path=raw_path)
            return Response(
                self.document(document).data, headers={"ETag": entity_tag(document.version)}
            )
        query = validated(DocumentListQuerySerializer(data=request.query_params))
        files = documents.document_list_query(
            actor=actor, prefix=query.get("prefix"), include_deleted=query["includeDeleted"]
        )
        return paginated(
            request,
            files,
            ordering=("path",),
            render=lambda page: (
                self.item(documents.document_visible(actor=actor, files=page), many=True).data
            ),
        )


@dataclass(frozen=True)
class DocumentSchemas:
    """The schema of one surface's document operations, declared once so that its route
    module holds only parse, call, render. Both surfaces call the same service, so an
    operation refuses alike on both, beside what the surface's caller can be refused
    (`refusals`); the surfaces differ in the noun of their summaries and in the component
    names of their shapes."""

    noun: str
    refusals: tuple[Refusal, ...]
    read_or_list: ReadOrList
    save_request: type[serializers.Serializer]
    move_request: type[serializers.Serializer]
    restore_request: type[serializers.Serializer]
    written: type[serializers.Serializer]
    state: type[serializers.Serializer]
    write_parameters: tuple[OpenApiParameter, ...] = ()

    def read(self) -> Callable[..., Any]:
        listed = self.read_or_list.schema()
        described = operation(
            f"Read a {self.noun}, or list {self.noun}s",
            *self.refusals,
            InvalidDocumentPath,
            ValidationFailed,
            DocumentUnreadable,
        )
        return lambda method: described(listed(method))

    def write(self) -> Callable[..., Any]:
        return operation(
            f"Write a {self.noun}",
            *self._changing(InvalidText, DocumentTooLarge, TenantQuotaExceeded),
            example=("Save", {"content": "# Meeting notes\n"}),
            parameters=[PATH_REQUIRED, *BASE_VERSION_PARAMETERS, *self.write_parameters],
            request=self.save_request,
            responses=self.written,
        )

    def delete(self) -> Callable[..., Any]:
        return operation(
            f"Delete a {self.noun}",
            *self._changing(*NO_BODY_REFUSALS),
            parameters=[PATH_REQUIRED, *BASE_VERSION_PARAMETERS],
            responses={200: self.state},
        )

    def move(self) -> Callable[..., Any]:
        return operation(
            f"Move a {self.noun} to another path",
            *self._changing(DocumentExists),
            example=("Move", {"from": "notes/a.md", "to": "archive/a.md"}),
            parameters=BASE_VERSION_PARAMETERS,
            request=self.move_request,
            responses=self.state,
        )

    def restore(self) -> Callable[..., Any]:
        return operation(
            f"Restore a deleted {self.noun}",
            *self._changing(TenantQuotaExceeded),
            example=("Restore", {"path": "notes/a.md"}),
            parameters=BASE_VERSION_PARAMETERS,
            request=self.restore_request,
            responses=self.state,
        )

    def _changing(self, *refusals: Refusal) -> tuple[Refusal, ...]:
        """What a change of a document refuses with: the caller, the path, X-Base-Version,
        then the operation's own `refusals`."""
        return (*self.refusals, InvalidDocumentPath, *BASE_VERSION_REFUSALS, *refusals)


def document_delete(request: Request, actor: documents.DocumentActor, raw_path: str) -> File:
    """Delete `raw_path` as `actor` at X-Base-Version: both actors' DELETE, which takes no
    body."""
    no_body_require(request)
    return documents.document_delete(
        actor=actor, raw_path=raw_path, base_version=base_version_from(request)
    )


def person_actor(request: Request, workspace_id: int) -> documents.DocumentActor:
    """The caller as a person acting in the workspace (404 for a non-member)."""
    membership = caller_membership(request, workspace_id)
    return documents.DocumentActor.of_member(membership, documents.ActorKind.PERSON)
