"""Workspace documents for everything that is not a person in the app: the assistant's
tools and the automation routes (agent runtimes, external clients such as an MCP server).

Every function here takes the path exactly as it was supplied and checks it in one order:

1. the memory namespace, in any spelling, is refused (MEMORY_NAMESPACE_RESERVED) before
   anything is read, written or even decrypted, so neither the model nor an external
   client can read memory while it is Off, or write it outside the commit fence;
2. a spelling other than the canonical one is refused (INVALID_DOCUMENT_PATH, with
   `detail.canonical`);
3. only then is the workspace key obtained and the store touched.

Listing and search do not refuse: they leave the namespace out, as if it did not exist.

Who acts, and with which key, is a `DocumentActor`:

- `document_actor_for_turn(admission=...)` for the assistant: writes are `automatic`, and
  the workspace key comes only from the turn's live key session, so revoking it (or
  letting it idle out) withdraws the assistant's access to notes as it does to memory;
- `document_actor_for_person(workspace=..., user=...)` for a client acting as its user with
  a personal access token or JWT: writes are `human`, and the deployment unwraps the key,
  as it does for the app's own routes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from automation.errors import CredentialSuperseded, WorkspaceAiDisabled
from automation.models import Admission
from automation.selectors import credential_slot_get, turn_expiry_refuse
from memory.namespace import is_memory_namespace, memory_namespace_refuse
from workspaces.errors import KeySessionUnavailable, NotFound, RateLimited
from workspaces.models import File, FileVersion, User, Workspace
from workspaces.paths import document_path_require_canonical
from workspaces.ratelimit import TooManyInProgress, in_progress_slot
from workspaces.selectors import (
    file_list,
    file_read_text,
    file_search,
    workspace_data_key,
    workspace_membership_get,
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


@dataclass(frozen=True)
class DocumentActor:
    """Who acts on a workspace's documents, recorded as which kind of author, and (for the
    assistant) the key session through which the workspace key is reached."""

    workspace: Workspace
    user: User
    author_kind: str
    key_session_id: uuid.UUID | None = None

    @property
    def is_assistant(self) -> bool:
        return self.author_kind == FileVersion.AuthorKind.AUTOMATIC


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


def document_actor_for_turn(
    *, admission: Admission, key_session_id: uuid.UUID | None = None
) -> DocumentActor:
    """The assistant acting for one admitted turn, in the admission's workspace.

    Refused once the turn is past its expiry (the delivery credential's life), when the
    sender is no longer a member of the workspace (404, as for any other caller), when
    workspace AI was switched off since, or when a newer message in the conversation took
    the credential slot (as recall then withholds memory). The key session is the
    admission's unless the caller names one (a tool that was handed it); either way it is
    checked on first use.
    """
    now = timezone.now()
    slot = credential_slot_get(admission=admission, now=now)
    turn_expiry_refuse(admission=admission, slot=slot, now=now)
    membership = workspace_membership_get(
        user=admission.owner, team=admission.workspace.team, workspace_id=admission.workspace_id
    )
    if not membership.workspace.ai_enabled:
        raise WorkspaceAiDisabled()
    if not slot.is_current:
        raise CredentialSuperseded()
    return DocumentActor(
        workspace=membership.workspace,
        user=admission.owner,
        author_kind=FileVersion.AuthorKind.AUTOMATIC,
        key_session_id=key_session_id or admission.key_session_id,
    )


def document_actor_for_person(*, workspace: Workspace, user: User) -> DocumentActor:
    """A client acting as its user (a personal access token or JWT). The caller has already
    established the user's membership of `workspace`."""
    return DocumentActor(workspace=workspace, user=user, author_kind=FileVersion.AuthorKind.HUMAN)


def assistant_document_paths(*raw_paths: str) -> list[str]:
    """The guard every operation on named documents starts with: refuse the memory
    namespace in any spelling of any of the paths, and only then a non-canonical spelling
    of any of them. Returns the canonical paths, in order.

    The functions below call it themselves; a route may call it first as well, to judge
    the path before headers or body (calling it again on a canonical path is a no-op).
    """
    memory_namespace_refuse(*raw_paths)
    return [document_path_require_canonical(raw) for raw in raw_paths]


def assistant_document_path(raw_path: str) -> str:
    """`assistant_document_paths` for one path."""
    return assistant_document_paths(raw_path)[0]


def assistant_document_read(*, actor: DocumentActor, raw_path: str) -> DocumentText:
    """Read a live document. NotFound if it is missing or deleted."""
    path = assistant_document_path(raw_path)
    data_key = _read_key(actor)
    if data_key is None:
        raise NotFound("No such document.", path=path)
    revision, content = file_read_text(workspace=actor.workspace, path=path, data_key=data_key)
    return DocumentText(
        path=path, content=content, version=revision.version, bytes=revision.size_bytes
    )


def assistant_document_list(
    *, actor: DocumentActor, prefix: str | None, include_deleted: bool = False
) -> list[File]:
    """Documents by path (at most 500), without any under the memory namespace.

    `prefix` matches the start of the canonical path literally. Reads no text, but the
    assistant still needs its live key session.
    """
    _authority_check(actor)
    files = file_list(workspace=actor.workspace, prefix=prefix, include_deleted=include_deleted)
    return [file for file in files if not is_memory_namespace(file.path)]


def assistant_document_search(
    *,
    actor: DocumentActor,
    query: str,
    limit: int = SEARCH_DEFAULT_LIMIT,
    cursor: str | None = None,
) -> SearchResults:
    """Live documents containing `query` (case-insensitive), with a snippet each, from the
    first path after `cursor` (the `next_cursor` of the previous page).

    Documents under the memory namespace are skipped before they are decrypted. Documents
    are sealed at rest, so a search decrypts them one at a time; one call decrypts at most
    SEARCH_MAX_DECRYPTED_BYTES (see `workspaces.selectors.file_search`) and says where to
    continue, and one person runs at most SEARCH_CONCURRENCY_PER_USER searches at once
    (RATE_LIMITED beyond), whichever credentials they use, so no one's searches can hold
    the server for everyone else.
    """
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
                after=cursor,
                is_hidden=is_memory_namespace,
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
        next_cursor=page.resume_after,
    )


def assistant_document_write(
    *, actor: DocumentActor, raw_path: str, content: str, base_version: int
) -> FileVersion:
    """Save a document by compare-and-set on `base_version` (0 creates it; a deleted
    document is not revived). The revision is sealed; it records the actor's author kind."""
    path = assistant_document_path(raw_path)
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


def assistant_document_delete(*, actor: DocumentActor, raw_path: str, base_version: int) -> File:
    """Delete a live document at `base_version`; its revisions are kept for a restore."""
    path = assistant_document_path(raw_path)
    _authority_check(actor)
    return file_delete(workspace=actor.workspace, path=path, base_version=base_version)


def assistant_document_restore(*, actor: DocumentActor, raw_path: str, base_version: int) -> File:
    """Restore a deleted document at `base_version`."""
    path = assistant_document_path(raw_path)
    _authority_check(actor)
    return file_restore(workspace=actor.workspace, path=path, base_version=base_version)


def assistant_document_move(
    *, actor: DocumentActor, raw_source: str, raw_destination: str, base_version: int
) -> File:
    """Move a live document at `base_version`. The namespace is refused at either end,
    before either path's spelling is judged; a taken destination is DOCUMENT_EXISTS."""
    source, destination = assistant_document_paths(raw_source, raw_destination)
    _authority_check(actor)
    return file_move(
        workspace=actor.workspace, source=source, destination=destination, base_version=base_version
    )


def _read_key(actor: DocumentActor) -> bytes | None:
    """The workspace key to read with; None if the workspace has none yet (so no documents).

    The assistant reaches the key only through a live, unrevoked key session of the turn's
    sender; a person's client gets the key the deployment unwraps, as the app's routes do.
    """
    if actor.is_assistant:
        return _key_session_key(actor)
    return workspace_data_key(workspace=actor.workspace)


def _write_key(actor: DocumentActor) -> bytes:
    """The workspace key to write with, made on a person's first write if need be."""
    if actor.is_assistant:
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
    if actor.is_assistant:
        _key_session_key(actor)
