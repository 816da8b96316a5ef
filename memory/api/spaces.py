"""The memory space routes (`/api/v1/memory/...`). Thin: parse the space and the headers,
call `memory.spaces` (the one write path and its reads), render.

The space comes from the query; its tenant (the credential's team) and user (the
credential's user) never do. Every refusal has one code and one status on every verb.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import IO

from django.http import FileResponse, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from memory.errors import (
    ArchiveChecksumMismatch,
    ArchiveInvalid,
    GlobalSpaceWriteDenied,
    SecretDetected,
    SpaceInvalid,
    SpaceQuotaExceeded,
    StoreBusy,
    StoreUnavailable,
)
from memory.spaces import archive
from memory.spaces.handle import QUALIFIERS, SpaceHandle, Visibility, space_handle_parse
from memory.spaces.selectors import (
    space_document_entry,
    space_document_read,
    space_documents_list,
    space_usage,
)
from memory.spaces.services import (
    SpaceWriter,
    WriterKind,
    space_document_delete,
    space_document_write,
    space_document_write_admit,
)
from memory_project.api.parsers import ArchiveParser, MarkdownParser, raw_body
from memory_project.api.schema import refuses
from memory_project.api.views import ApiView
from workspaces.api.headers import (
    BASE_VERSION_PARAMETERS,
    BASE_VERSION_REFUSALS,
    base_version_from,
    entity_tag,
)
from workspaces.api.input import NO_BODY_REFUSALS, no_body_require
from workspaces.authentication import request_credential
from workspaces.errors import (
    DocumentTooLarge,
    DocumentUnreadable,
    InvalidDocumentPath,
    InvalidText,
    NotFound,
    TenantQuotaExceeded,
    ValidationFailed,
)

MARKDOWN = "text/markdown; charset=utf-8"

SPACE_PARAMETERS = [
    OpenApiParameter(
        "visibility",
        str,
        OpenApiParameter.QUERY,
        required=True,
        enum=[visibility.value for visibility in Visibility],
        description="Which kind of space; each takes the qualifiers it needs, no others.",
    ),
    OpenApiParameter(
        "name", str, OpenApiParameter.QUERY, required=True, description="One path segment."
    ),
    *(
        OpenApiParameter(
            qualifier,
            str,
            OpenApiParameter.QUERY,
            description=f"One path segment; only for the visibilities that take `{qualifier}`.",
        )
        for qualifier in QUALIFIERS
    ),
]
PATH_PARAMETER = OpenApiParameter(
    "path", str, OpenApiParameter.QUERY, required=True, description="The canonical path."
)


# What the one write path refuses a document with, whoever writes it (schema only).
SPACE_WRITE_REFUSALS = (
    GlobalSpaceWriteDenied,
    DocumentTooLarge,
    SpaceQuotaExceeded,
    TenantQuotaExceeded,
    SecretDetected,
    StoreUnavailable,
    StoreBusy,
)


# What a space route refuses its query with, for the schema: a space it does not name, and a
# parameter it does not take (QueryStringMiddleware: the tenant and the user of a space come
# from the credential, never from `?user=` or `?tenant=`).
SPACE_QUERY_REFUSALS = (SpaceInvalid, ValidationFailed)


def _space(request: Request) -> SpaceHandle:
    credential = request_credential(request)
    return space_handle_parse(
        request.query_params, tenant_id=credential.team.pk, user_id=credential.user.pk
    )


def _writer(request: Request) -> SpaceWriter:
    credential = request_credential(request)
    return SpaceWriter.of_user(credential.user, tenant_id=credential.team.pk)


def _declared_length(request: Request) -> int:
    # The transport gate (memory_project/middleware.py) has refused any Content-Length that
    # is not a number, so this one is.
    return int(request.META.get("CONTENT_LENGTH") or 0)


class SpaceSerializer(serializers.Serializer):
    id = serializers.CharField()
    visibility = serializers.CharField()
    name = serializers.CharField()
    project = serializers.CharField()
    bot = serializers.CharField()
    run = serializers.CharField()


class SpaceDocumentSerializer(serializers.Serializer):
    path = serializers.CharField(source="meta.path")
    title = serializers.CharField()
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    size = serializers.IntegerField(source="meta.size")
    checksum = serializers.CharField(source="meta.checksum")
    revision = serializers.IntegerField(source="meta.revision")
    updatedBy = serializers.CharField(source="meta.updated_by")
    updatedAt = serializers.DateTimeField(source="meta.updated_at")


class SpaceUsageApi(ApiView):
    class OutputSerializer(serializers.Serializer):
        space = SpaceSerializer(source="handle")
        usedBytes = serializers.IntegerField(source="used_bytes")
        quotaBytes = serializers.IntegerField(source="quota_bytes")
        tenantUsedBytes = serializers.IntegerField(source="tenant_used_bytes")
        tenantQuotaBytes = serializers.IntegerField(source="tenant_quota_bytes")

    @extend_schema(summary="Read a memory space's usage and quotas")
    @refuses(*SPACE_QUERY_REFUSALS, StoreUnavailable)
    @extend_schema(parameters=SPACE_PARAMETERS, responses=OutputSerializer)
    def get(self, request: Request) -> Response:
        return Response(self.OutputSerializer(space_usage(handle=_space(request))).data)


class SpaceDocumentListApi(ApiView):
    class OutputSerializer(serializers.Serializer):
        documents = SpaceDocumentSerializer(many=True)

    @extend_schema(summary="List a memory space's documents")
    @refuses(*SPACE_QUERY_REFUSALS, InvalidDocumentPath, DocumentUnreadable, StoreUnavailable)
    @extend_schema(
        parameters=[
            *SPACE_PARAMETERS,
            OpenApiParameter(
                "dir",
                str,
                OpenApiParameter.QUERY,
                description="A canonical directory to list under (recursively); all if absent.",
            ),
        ],
        responses=OutputSerializer,
    )
    def get(self, request: Request) -> Response:
        documents = space_documents_list(
            handle=_space(request), directory=request.query_params.get("dir", "")
        )
        return Response(self.OutputSerializer({"documents": documents}).data)


def document_put(request: Request, *, handle: SpaceHandle, writer: SpaceWriter) -> Response:
    """Write `?path=` of `handle` from the request's raw Markdown at X-Base-Version, as
    `writer`, and answer the document's entry: what a space's PUT does, whoever's space."""
    path = request.query_params.get("path", "")
    base_version = base_version_from(request)
    # Refuse an over-size body from its declared length, before reading a byte of it.
    space_document_write_admit(
        handle=handle, path=path, size=_declared_length(request), writer=writer
    )
    body = raw_body(request, MarkdownParser)
    meta = space_document_write(
        handle=handle, path=path, body=body, expected_revision=base_version, writer=writer
    )
    return Response(SpaceDocumentSerializer(space_document_entry(meta, body)).data)


def document_delete(request: Request, *, handle: SpaceHandle, writer: SpaceWriter) -> Response:
    """Delete `?path=` of `handle` at X-Base-Version, as `writer`: a space's DELETE."""
    no_body_require(request)
    space_document_delete(
        handle=handle,
        path=request.query_params.get("path", ""),
        expected_revision=base_version_from(request),
        writer=writer,
    )
    return Response(status=204)


class RawBodyApi(ApiView):
    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[BaseRenderer, str]:
        # The body leaves as raw bytes (Markdown, an archive) whatever Accept names (a plain
        # response, no renderer), and a refusal as JSON, the API's one error shape, even to a
        # client that accepts only the raw type: never a 406 instead of the body or the refusal.
        return super().perform_content_negotiation(request, force=True)


class SpaceDocumentApi(RawBodyApi):
    parser_classes = [MarkdownParser]

    @extend_schema(summary="Read a memory space document (raw Markdown)")
    @refuses(
        *SPACE_QUERY_REFUSALS, InvalidDocumentPath, NotFound, DocumentUnreadable, StoreUnavailable
    )
    @extend_schema(
        parameters=[*SPACE_PARAMETERS, PATH_PARAMETER],
        responses={
            (200, "text/markdown"): OpenApiResponse(
                OpenApiTypes.STR,
                description="The document's bytes; `ETag` and `X-Revision` carry its revision.",
            )
        },
    )
    def get(self, request: Request) -> HttpResponse:
        handle = _space(request)
        document = space_document_read(handle=handle, path=request.query_params.get("path", ""))
        revision = document.meta.revision
        return HttpResponse(
            document.body,
            content_type=MARKDOWN,
            headers={"ETag": entity_tag(revision), "X-Revision": str(revision)},
        )

    @extend_schema(summary="Write a memory space document (raw Markdown)")
    @refuses(*SPACE_QUERY_REFUSALS, InvalidDocumentPath, InvalidText, *BASE_VERSION_REFUSALS)
    @refuses(*SPACE_WRITE_REFUSALS)
    @extend_schema(
        parameters=[*SPACE_PARAMETERS, PATH_PARAMETER, *BASE_VERSION_PARAMETERS],
        request={"text/markdown": OpenApiTypes.STR},
        responses=SpaceDocumentSerializer,
    )
    def put(self, request: Request) -> Response:
        return document_put(request, handle=_space(request), writer=_writer(request))

    @extend_schema(summary="Delete a memory space document")
    @refuses(
        *SPACE_QUERY_REFUSALS,
        InvalidDocumentPath,
        NotFound,
        GlobalSpaceWriteDenied,
        *BASE_VERSION_REFUSALS,
        *NO_BODY_REFUSALS,
        StoreUnavailable,
        StoreBusy,
    )
    @extend_schema(
        parameters=[*SPACE_PARAMETERS, PATH_PARAMETER, *BASE_VERSION_PARAMETERS],
        responses={204: None},
    )
    def delete(self, request: Request) -> Response:
        return document_delete(request, handle=_space(request), writer=_writer(request))


class SpaceExportApi(RawBodyApi):
    @extend_schema(summary="Export a memory space as an archive")
    @refuses(*SPACE_QUERY_REFUSALS, SecretDetected, DocumentUnreadable, StoreUnavailable)
    @extend_schema(
        parameters=SPACE_PARAMETERS,
        responses={
            (200, archive.MEDIA_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The space as one `iterion.memory.v1` archive, as an attachment.",
            )
        },
    )
    def get(self, request: Request) -> FileResponse:
        handle = _space(request)
        return archive_response(
            lambda out: archive.space_export(handle=handle, out=out),
            filename=archive.space_export_file_name(handle),
        )


def archive_response(export: Callable[[IO[bytes]], object], *, filename: str) -> FileResponse:
    """The archive `export(out)` writes, as an attachment. An export refuses before its first
    byte (a credential, an unreadable document), so a refusal leaves as the JSON error and
    never as a 200 with part of an archive."""
    # Spooled, not held as one string: a large archive goes to disk past the spool size.
    # Not a `with` block: the response closes the file once it has sent it.
    spool = tempfile.SpooledTemporaryFile(max_size=archive.SPOOL_MEMORY_BYTES)  # noqa: SIM115
    try:
        export(spool)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return FileResponse(
        spool, as_attachment=True, filename=filename, content_type=archive.MEDIA_TYPE
    )


class SpaceImportApi(ApiView):
    parser_classes = [ArchiveParser]

    class OutputSerializer(serializers.Serializer):
        imported = serializers.IntegerField()
        replaced = serializers.IntegerField()
        skipped = serializers.IntegerField()
        renamed = serializers.IntegerField()
        ignored = serializers.ListField(child=serializers.CharField())
        dryRun = serializers.BooleanField(source="dry_run")

        # What the import does (or, on a dry run, would do) with each document of the archive.
        class PlannedSerializer(serializers.Serializer):
            path = serializers.CharField()
            action = serializers.CharField()
            target = serializers.CharField()

        documents = PlannedSerializer(many=True)

    @extend_schema(summary="Import an archive into a memory space")
    @refuses(*SPACE_QUERY_REFUSALS, ArchiveInvalid, ArchiveChecksumMismatch, InvalidText)
    @refuses(*SPACE_WRITE_REFUSALS)
    @extend_schema(
        parameters=[
            *SPACE_PARAMETERS,
            OpenApiParameter(
                "strategy",
                str,
                OpenApiParameter.QUERY,
                enum=[strategy.value for strategy in archive.ImportStrategy],
                description="What to do with a document the space already has; skip if absent.",
            ),
            OpenApiParameter(
                "dryRun",
                str,
                OpenApiParameter.QUERY,
                enum=["0", "1"],
                description="1: answer the plan, every refusal included, and write nothing.",
            ),
        ],
        request={archive.MEDIA_TYPE: OpenApiTypes.BINARY},
        responses=OutputSerializer,
    )
    def post(self, request: Request) -> Response:
        handle = _space(request)
        writer = replace(_writer(request), kind=WriterKind.IMPORT)
        strategy = archive.import_strategy_parse(request.query_params.get("strategy"))
        dry_run = _query_flag(request, "dryRun")
        with raw_body(request, ArchiveParser) as body:
            report = archive.space_import(
                handle=handle, archive=body, strategy=strategy, dry_run=dry_run, writer=writer
            )
        return Response(self.OutputSerializer({**vars(report), "dry_run": dry_run}).data)


def _query_flag(request: Request, name: str) -> bool:
    """A 0/1 query flag; absent is 0, anything else is VALIDATION_FAILED."""
    value = request.query_params.get(name, "0")
    if value not in {"0", "1"}:
        raise ValidationFailed(fields={name: ["Must be 0 or 1."]})
    return value == "1"
