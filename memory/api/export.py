"""A person's exports of a workspace: the notes as an archive (the memory document's own
export is `views.MemoryExportApi`)."""

from __future__ import annotations

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request

from memory import documents
from memory.api import document_common as common
from memory.api.spaces import RawBodyApi, archive_response
from memory.errors import SecretDetected
from memory.spaces import archive
from memory_project.api.schema import refuses
from workspaces.api.access import MEMBER_REFUSALS
from workspaces.errors import DocumentUnreadable


class NotesExportApi(RawBodyApi):
    @refuses(*MEMBER_REFUSALS, SecretDetected, DocumentUnreadable)
    @extend_schema(
        summary="Download the workspace's notes as an archive",
        responses={
            (200, archive.MEDIA_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The workspace's live notes (never memory) as one "
                "`iterion.memory.v1` archive, as an attachment.",
            )
        },
    )
    def get(self, request: Request, workspace_id: int) -> FileResponse:
        actor = common.person_actor(request, workspace_id)
        return archive_response(
            lambda out: documents.notes_export(actor=actor, out=out),
            filename=attachment_name("notes", actor.workspace.name, ".tar.gz"),
        )


def attachment_name(kind: str, workspace_name: str, suffix: str) -> str:
    """`<kind>-<workspace name>.<suffix>`, the name as `archive.file_name_word` keeps it."""
    word = archive.file_name_word(workspace_name)
    return f"{kind}-{word}{suffix}" if word else f"{kind}{suffix}"
