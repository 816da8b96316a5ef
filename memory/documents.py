"""The one document service: every read, list, search, write, move, delete and restore of a
workspace's documents, whoever acts, goes through these functions.

The acting party is a `DocumentActor`, built by the caller once it has established who
acts: a person in the app, a member's client (the automation routes, the MCP server), or
an admitted assistant turn (whose turn checks live in automation, which builds the actor
and passes it in). The rules each function applies, and their order per actor, are stated
once in docs/architecture.md ("One document service").

The state changes themselves are the store's (`workspaces.services.file_*`) and, for a
person's write of the memory document, `memory.services.memory_write`; this module only
decides who may make them, on which path, with which key, attributed to whom.
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

from django.conf import settings
from django.core import signing
from django.db.models import QuerySet

from memory.models import MEMORY_PATH
from memory.namespace import (
    MEMORY_NAMESPACE_PREFIX,
    is_memory_namespace,
    memory_namespace_refuse,
)
from memory.services import memory_write
from memory.spaces.archive import ExportReport, archive_export
from memory.spaces.store import DocumentMeta, StoredDocument
from workspaces.errors import (
    InvalidHeader,
    KeySessionUnavailable,
    NotFound,
    RateLimited,
    ValidationFailed,
)
from workspaces.models import File, FileVersion, User, Workspace, WorkspaceMembership
from workspaces.paths import document_path_require_canonical
from workspaces.ratelimit import TooManyInProgress, in_progress_slot
from workspaces.selectors import (
    file_current_revisions,
    file_list,
    file_list_query,
    file_read_text,
    file_search,
    file_version_plaintext,
    workspace_data_key,
)
from workspaces.services import (
    file_delete,
    file_move,
    file_restore,
    file_write,
    key_session_resolve,
    workspace_key_ensure,
)

SEARCH_DEFAULT_LIMIT = 20
SEARCH_MAX_LIMIT = 50
# How long a search slot outlives a process that died holding it.
SEARCH_SLOT_TIMEOUT_SECONDS = 120
# A search's cursor: a path (at most 1024 UTF-8 bytes, so characters) and its signature.
SEARCH_CURSOR_MAX_CHARS = 1024 + 64


class ActorKind(enum.Enum):
    PERSON = "person"  # a member in the app, on its own document routes
    CLIENT = "client"  # a member's client: the automation routes or the MCP server
    ASSISTANT = "assistant"  # an admitted assistant turn: its delivery credential or tools


class Operation(enum.Enum):
    READ = "read"
    WRITE = "write"
    DELETE = "delete"
    RESTORE = "restore"
    MOVE = "move"


class _Namespace(enum.Enum):
    OPEN = "open"
    MEMORY_DOCUMENT = "memory_document"
    CLOSED = "closed"


# What of the memory namespace a person may name. It holds only their memory document: they
# read, list, write (as a memory Save or Clear), delete and restore it like any document,
# but never move it, in or out. Every other actor may name nothing in it, in any spelling,
# and its listings and searches leave it out.
_PERSON_NAMESPACE = {
    Operation.READ: _Namespace.OPEN,
    Operation.WRITE: _Namespace.MEMORY_DOCUMENT,
    Operation.DELETE: _Namespace.MEMORY_DOCUMENT,
    Operation.RESTORE: _Namespace.MEMORY_DOCUMENT,
    Operation.MOVE: _Namespace.CLOSED,
}


@dataclass(frozen=True)
class DocumentActor:
    """Who acts on a workspace's documents. The builder has already established that
    `user` may act in `workspace` (membership; for the assistant, the turn's checks).
    `key_session_id` is the assistant's only way to the workspace key."""

    kind: ActorKind
    workspace: Workspace
    user: User
    key_session_id: uuid.UUID | None = None

    @classmethod
    def of_member(cls, membership: WorkspaceMembership, kind: ActorKind) -> DocumentActor:
        return cls(kind=kind, workspace=membership.workspace, user=membership.user)

    @property
    def author_kind(self) -> str:
        if self.kind is ActorKind.ASSISTANT:
            return FileVersion.AuthorKind.AUTOMATIC
        return FileVersion.AuthorKind.HUMAN

    @property
    def is_namespace_hidden(self) -> bool:
        return self.kind is not ActorKind.PERSON


@dataclass(frozen=True)
class DocumentText:
    path: str
    content: str
    version: int
    bytes: int


@dataclass(frozen=True)
class SearchHit:
    path: str
    version: int
    snippet: str


@dataclass(frozen=True)
class SearchResults:
    hits: list[SearchHit]
    # Set when the search stopped at its bound before the last document: pass it back as
    # `cursor` to continue.
    next_cursor: str | None

    @property
    def is_truncated(self) -> bool:
        return self.next_cursor is not None


def document_paths(
    *, actor: DocumentActor, operation: Operation, raw_paths: Sequence[str]
) -> list[str]:
    """The namespace rule and the path rule for `operation`, in the actor's order; returns
    the canonical paths, in order.

    Every function below starts with it; a route may call it first as well, to judge the
    paths before headers or body (again on canonical paths, it is a no-op).
    """
    if actor.is_namespace_hidden:
        memory_namespace_refuse(*raw_paths)
        return [document_path_require_canonical(raw) for raw in raw_paths]
    paths = [document_path_require_canonical(raw) for raw in raw_paths]
    rule = _PERSON_NAMESPACE[operation]
    if rule is _Namespace.CLOSED:
        memory_namespace_refuse(*paths)
    elif rule is _Namespace.MEMORY_DOCUMENT:
        memory_namespace_refuse(*(path for path in paths if path != MEMORY_PATH))
    return paths


def document_read(*, actor: DocumentActor, raw_path: str) -> DocumentText:
    """Read a live document. NotFound if it is missing or deleted, or if the workspace has
    no key yet (no key is made for a read)."""
    (path,) = document_paths(actor=actor, operation=Operation.READ, raw_paths=[raw_path])
    data_key = _read_key(actor)
    if data_key is None:
        raise NotFound("No such document.", path=path)
    revision, content = file_read_text(workspace=actor.workspace, path=path, data_key=data_key)
    return DocumentText(
        path=path, content=content, version=revision.version, bytes=revision.size_bytes
    )


def document_list(
    *, actor: DocumentActor, prefix: str | None, include_deleted: bool = False
) -> list[File]:
    """Documents by path (at most 500); `prefix` matches the start of the canonical path
    literally. Reads no text, but the assistant still needs its live key session."""
    _authority_check(actor)
    files = file_list(workspace=actor.workspace, prefix=prefix, include_deleted=include_deleted)
    return document_visible(actor=actor, files=files)


def document_list_query(
    *, actor: DocumentActor, prefix: str | None, include_deleted: bool = False
) -> QuerySet[File]:
    """`document_list` unbounded, by path, for a route that pages through it. The memory
    namespace is left out in the query where it is hidden; `document_visible` drops any
    other spelling of it from a page."""
    _authority_check(actor)
    files = file_list_query(
        workspace=actor.workspace, prefix=prefix, include_deleted=include_deleted
    )
    if actor.is_namespace_hidden:
        files = files.exclude(path__istartswith=MEMORY_NAMESPACE_PREFIX)
    return files


def document_visible(*, actor: DocumentActor, files: list[File]) -> list[File]:
    """The files of `files` that `actor` may see listed."""
    if not actor.is_namespace_hidden:
        return files
    return [file for file in files if not is_memory_namespace(file.path)]


def document_search(
    *,
    actor: DocumentActor,
    query: str,
    limit: int = SEARCH_DEFAULT_LIMIT,
    cursor: str | None = None,
) -> SearchResults:
    """Live documents containing `query` (case-insensitive), with a snippet each, from the
    first path after `cursor` (the `next_cursor` of the previous page).

    What a listing leaves out is skipped before it is decrypted. Documents are sealed at
    rest, so a search decrypts them one at a time; one call decrypts at most
    SEARCH_MAX_DECRYPTED_BYTES (see `workspaces.selectors.file_search`) and says where to
    continue, and one person runs at most SEARCH_CONCURRENCY_PER_USER searches at once
    (RATE_LIMITED beyond), whichever credentials they use, so no one's searches can hold
    the server for everyone else.
    """
    signer = _search_signer(actor.workspace, query)
    after = None if cursor is None else _search_position(signer, cursor)
    data_key = _read_key(actor)
    if data_key is None:
        return SearchResults(hits=[], next_cursor=None)
    try:
        with in_progress_slot(
            key=f"searches-in-progress:user-{actor.user.pk}",
            limit=settings.SEARCH_CONCURRENCY_PER_USER,
            timeout=SEARCH_SLOT_TIMEOUT_SECONDS,
        ):
            page = file_search(
                workspace=actor.workspace,
                query=query,
                data_key=data_key,
                limit=min(limit, SEARCH_MAX_LIMIT),
                byte_budget=settings.SEARCH_MAX_DECRYPTED_BYTES,
                after=after,
                is_hidden=is_memory_namespace if actor.is_namespace_hidden else None,
            )
    except TooManyInProgress:
        raise RateLimited(
            "Too many searches of yours are running; retry when one has finished.",
            retryAfterSeconds=1,
        ) from None
    return SearchResults(
        hits=[
            SearchHit(path=file.path, version=file.current_version, snippet=snippet)
            for file, snippet in page.hits
        ],
        next_cursor=None if page.resume_after is None else signer.sign(page.resume_after),
    )


def _search_signer(workspace: Workspace, query: str) -> signing.Signer:
    """What signs a search's cursor, for one workspace and query, as a list's cursor is
    signed (memory_project.api.pagination): the position is the last path searched, so a
    forged one silently skipped every document before it, and one from another workspace's
    or query's search is no position in this one."""
    return signing.Signer(salt=f"{__name__}.search:{workspace.pk}:{query}")


def _search_position(signer: signing.Signer, cursor: str) -> str:
    try:
        return signer.unsign(cursor)
    except signing.BadSignature:
        raise ValidationFailed(fields={"cursor": ["Not a cursor this search gave out."]}) from None


def notes_export(*, actor: DocumentActor, out: IO[bytes]) -> ExportReport:
    """Write the workspace's live notes (never memory) to `out` as one archive of the
    memory-space format, `iterion.memory.v1`, so a team memory space can import it.

    The archive's writer reads and scans every note before its first byte: a credential
    in any note is SecretDetected and `out` stays empty, never a partial archive."""
    _authority_check(actor)
    data_key = _read_key(actor)
    workspace = actor.workspace
    space = {"visibility": "workspace", "name": workspace.name, "workspace": workspace.pk}
    documents = _notes_read(workspace, data_key) if data_key is not None else iter(())
    return archive_export(out=out, space=space, documents=documents)


def _notes_read(workspace: Workspace, data_key: bytes) -> Iterator[StoredDocument]:
    for revision in file_current_revisions(workspace=workspace).iterator(chunk_size=50):
        # Memory is skipped before it is decrypted: a notes archive never holds it.
        if is_memory_namespace(revision.file.path):
            continue
        text = file_version_plaintext(version=revision, workspace=workspace, data_key=data_key)
        body = text.encode()
        meta = DocumentMeta(
            path=revision.file.path,
            size=len(body),
            checksum="sha256:" + hashlib.sha256(body).hexdigest(),
            revision=revision.version,
            updated_by=f"user:{revision.author_id}" if revision.author_id else "",
            updated_at=revision.created_at,
        )
        yield StoredDocument(meta=meta, body=body)


def document_write(
    *,
    actor: DocumentActor,
    raw_path: str,
    content: str,
    base_version: int,
    is_clear: bool = False,
) -> FileVersion:
    """Save a document by compare-and-set on `base_version` (0 creates it; a deleted
    document is not revived), sealed and attributed to the actor.

    A person's write of the memory document is a memory Save, or a Clear with `is_clear`
    (X-Memory-Clear), through `memory_write`, so memory changes one way only; `is_clear`
    on any other document is refused rather than ignored.
    """
    (path,) = document_paths(actor=actor, operation=Operation.WRITE, raw_paths=[raw_path])
    if path == MEMORY_PATH:
        return memory_write(
            workspace=actor.workspace,
            author=actor.user,
            base_version=base_version,
            content=content,
            is_clear=is_clear,
        )
    if is_clear:
        raise InvalidHeader(
            "X-Memory-Clear applies only to the memory document.", header="X-Memory-Clear"
        )
    return file_write(
        workspace=actor.workspace,
        path=path,
        plaintext=content,
        base_version=base_version,
        data_key=_write_key(actor),
        author=actor.user,
        author_kind=actor.author_kind,
        change_kind=FileVersion.ChangeKind.SAVE,
    )


def document_delete(*, actor: DocumentActor, raw_path: str, base_version: int) -> File:
    """Delete a live document at `base_version`; its revisions are kept for a restore.

    A person may delete the memory document: recall then answers `deleted` and every
    write to it conflicts until it is restored (a write never revives a deleted document).
    """
    (path,) = document_paths(actor=actor, operation=Operation.DELETE, raw_paths=[raw_path])
    _authority_check(actor)
    return file_delete(workspace=actor.workspace, path=path, base_version=base_version)


def document_restore(*, actor: DocumentActor, raw_path: str, base_version: int) -> File:
    """Restore a deleted document at `base_version`, with the text it had."""
    (path,) = document_paths(actor=actor, operation=Operation.RESTORE, raw_paths=[raw_path])
    _authority_check(actor)
    return file_restore(workspace=actor.workspace, path=path, base_version=base_version)


def document_move(
    *, actor: DocumentActor, raw_source: str, raw_destination: str, base_version: int
) -> File:
    """Move a live document at `base_version`; a taken destination is DOCUMENT_EXISTS.

    The namespace is refused at either end for every actor, the memory document included:
    a note moved in would become memory without a Save (no recall bound, no Clear
    generation), and memory moved out would take it and its history beyond its policy.
    """
    source, destination = document_paths(
        actor=actor, operation=Operation.MOVE, raw_paths=[raw_source, raw_destination]
    )
    _authority_check(actor)
    return file_move(
        workspace=actor.workspace, source=source, destination=destination, base_version=base_version
    )


def _read_key(actor: DocumentActor) -> bytes | None:
    """The workspace key to read with; None if the workspace has none yet (so no documents).

    The assistant reaches the key only through a live, unrevoked key session of the turn's
    sender; a person and a member's client get the key the deployment unwraps.
    """
    if actor.kind is ActorKind.ASSISTANT:
        return _key_session_key(actor)
    return workspace_data_key(workspace=actor.workspace)


def _write_key(actor: DocumentActor) -> bytes:
    """The workspace key to write with, made on a member's first write if need be."""
    if actor.kind is ActorKind.ASSISTANT:
        return _key_session_key(actor)
    return workspace_key_ensure(workspace=actor.workspace)


def _key_session_key(actor: DocumentActor) -> bytes:
    if actor.key_session_id is None:
        raise KeySessionUnavailable(reason="missing")
    return key_session_resolve(
        session_id=actor.key_session_id, workspace=actor.workspace, user=actor.user
    )


def _authority_check(actor: DocumentActor) -> None:
    """Operations that open no text still need the assistant's live key session, so that
    withdrawing the session withdraws all of its access to documents at once."""
    if actor.kind is ActorKind.ASSISTANT:
        _key_session_key(actor)
