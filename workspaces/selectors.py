"""Reads with tenancy: every lookup is bounded by the caller's team and membership."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection
from django.db.models import F, OuterRef, QuerySet, Subquery

from workspaces.crypto import data_key_unwrap, revision_open
from workspaces.errors import CACHE_ERRORS, NotFound, OrgPendingDeletion
from workspaces.models import (
    ApiToken,
    Bot,
    File,
    FileVersion,
    KeySession,
    Org,
    Team,
    TeamMembership,
    User,
    Workspace,
    WorkspaceKey,
    WorkspaceMembership,
)
from workspaces.sql import starts_with, table, workspace_membership_of

logger = logging.getLogger(__name__)


def org_require_active(*, org: Org) -> None:
    """Refuse everything of an org that is not active (pending deletion or being purged).

    Its people are still authenticated, so they get the precise reason; nothing of the
    org can be used until it is restored. Every credential check and every workspace
    lookup goes through here.
    """
    if not org.is_active:
        raise OrgPendingDeletion(deletionDueAt=org.deletion_due_at)


def workspace_list_for_member(*, user: User, team: Team) -> QuerySet[Workspace]:
    return Workspace.objects.filter(team=team, memberships__user=user).order_by("pk")


def workspace_membership_get(*, user: User, team: Team, workspace_id: int) -> WorkspaceMembership:
    """Return the caller's membership of a workspace in their team.

    A workspace of another team and one the caller is not a member of are the same
    404, so a probe learns nothing about what exists elsewhere.
    """
    membership = workspace_membership_of(user=user, team=team, workspace_id=workspace_id)
    if membership is None:
        raise NotFound("No such workspace.")
    org_require_active(org=membership.workspace.team.org)
    return membership


def workspace_member_list(*, workspace: Workspace) -> QuerySet[WorkspaceMembership]:
    """Who is in the workspace, in the order they joined. Call with a workspace the caller
    reached through `workspace_membership_get`: any member may see the others."""
    return (
        WorkspaceMembership.objects.select_related("user")
        .filter(workspace=workspace)
        .order_by("created_at", "pk")
    )


def team_members_outside_workspace(*, workspace: Workspace) -> QuerySet[User]:
    """The active members of the workspace's team who are not in it: whom its admins may add."""
    return (
        User.objects.filter(team_memberships__team_id=workspace.team_id, is_active=True)
        .exclude(workspace_memberships__workspace=workspace)
        .order_by("username")
    )


def team_member_names(*, team: Team) -> dict[int, str]:
    """The username of each active member of `team`, by user id."""
    members = User.objects.filter(team_memberships__team=team, is_active=True)
    return dict(members.values_list("pk", "username"))


def api_token_list_for_user(*, user: User, team: Team) -> QuerySet[ApiToken]:
    """The person's own tokens: not the bot tokens they issued, which belong to the bots."""
    return ApiToken.objects.filter(user=user, team=team, bot__isnull=True).order_by(
        "-created_at", "-pk"
    )


def team_owner_is(*, team: Team, user: User) -> bool:
    """Whether `user` owns `team`: what managing its bots takes."""
    return TeamMembership.objects.filter(
        team=team, user=user, role=TeamMembership.Role.OWNER
    ).exists()


def bot_token_list(*, bot: Bot) -> QuerySet[ApiToken]:
    """Every token issued to `bot`, revoked and expired ones too, newest first."""
    return ApiToken.objects.filter(bot=bot).order_by("-created_at", "-pk")


def api_token_get_for_user(*, user: User, team: Team, token_id: int) -> ApiToken:
    token = ApiToken.objects.filter(user=user, team=team, bot__isnull=True, pk=token_id).first()
    if token is None:
        raise NotFound("No such token.")
    return token


def file_get(*, workspace: Workspace, path: str) -> File | None:
    return File.objects.filter(workspace=workspace, path=path).first()


def file_version_get(*, workspace: Workspace, path: str, version: int) -> FileVersion:
    found = (
        FileVersion.objects.select_related("file")
        .filter(file__workspace=workspace, file__path=path, version=version)
        .first()
    )
    if found is None:
        raise NotFound("No such version.", version=version)
    return found


@dataclass(frozen=True)
class VersionPage:
    revisions: list[FileVersion]
    # The `before` of the next page; None once the page reaches version 1.
    next_before: int | None


def file_version_page(
    *, workspace: Workspace, path: str, before: int | None, limit: int
) -> VersionPage:
    """Revisions newest first, keyset-paginated on the version number."""
    versions = FileVersion.objects.select_related("author").filter(
        file__workspace=workspace, file__path=path
    )
    if before is not None:
        versions = versions.filter(version__lt=before)
    revisions = list(versions.order_by("-version")[:limit])
    is_full = bool(revisions) and len(revisions) == limit and revisions[-1].version > 1
    return VersionPage(revisions=revisions, next_before=revisions[-1].version if is_full else None)


def file_version_plaintext(
    *, version: FileVersion, workspace: Workspace, data_key: bytes | None
) -> str:
    """Decrypt a revision, binding it to the workspace, file and version it is read as."""
    plaintext = revision_open(
        data_key=data_key,
        ciphertext=bytes(version.ciphertext),
        workspace_id=workspace.pk,
        file_id=version.file_id,
        version=version.version,
    )
    return plaintext.decode()


def key_session_list_for_user(*, user: User, workspace: Workspace) -> QuerySet[KeySession]:
    """The caller's key sessions on a workspace, newest first."""
    return KeySession.objects.filter(user=user, workspace=workspace).order_by("-created_at", "-pk")


def key_session_liveness(*, sessions: list[KeySession]) -> list[tuple[KeySession, bool]]:
    """Each session with whether its key is still cached (none is while the cache cannot be
    reached: no key can be used then)."""
    try:
        cached = cache.get_many([session.cache_key for session in sessions])
    except CACHE_ERRORS:
        logger.warning("key-session cache unreachable; listing key sessions as not live")
        cached = {}
    return [
        (session, not session.is_revoked and session.cache_key in cached) for session in sessions
    ]


def key_session_get_for_owner(*, user: User, team: Team, session_id: uuid.UUID) -> KeySession:
    session = KeySession.objects.filter(pk=session_id, user=user, workspace__team=team).first()
    if session is None:
        raise NotFound("No such key session.")
    return session


def workspace_data_key(*, workspace: Workspace) -> bytes | None:
    """The workspace's unwrapped data key, or None before its first write."""
    with connection.cursor() as cursor:
        # SQL because it was measured: the ORM's read of the key row (all its columns,
        # compiled anew) took longer than the unwrap it feeds, on every read and write.
        cursor.execute(
            f"SELECT wrapped_key FROM {table(WorkspaceKey)} WHERE workspace_id = %s",
            [workspace.pk],
        )
        row = cursor.fetchone()
    return None if row is None else data_key_unwrap(bytes(row[0]))


def file_current_version(*, workspace: Workspace, path: str) -> FileVersion | None:
    """The live revision of a file, in one query; None if never written or deleted."""
    return (
        FileVersion.objects.select_related("file", "author")
        .filter(
            file__workspace=workspace,
            file__path=path,
            file__deleted_at__isnull=True,
            version=F("file__current_version"),
        )
        .first()
    )


# Bounds that keep a listing or a search one bounded pass over the store.
FILE_LIST_LIMIT = 500
FILE_SEARCH_SCAN_LIMIT = 500
SNIPPET_CONTEXT_CHARS = 60


def file_list(*, workspace: Workspace, prefix: str | None, include_deleted: bool) -> list[File]:
    """A workspace's files ordered by path, at most FILE_LIST_LIMIT of them.

    `prefix` matches the start of the stored (canonical) path literally. Each file carries
    `current_bytes`, the size of its current revision, read in the same query.
    """
    return list(
        file_list_query(workspace=workspace, prefix=prefix, include_deleted=include_deleted)[
            :FILE_LIST_LIMIT
        ]
    )


def file_list_query(
    *, workspace: Workspace, prefix: str | None, include_deleted: bool
) -> QuerySet[File]:
    """`file_list` unbounded, for a caller that pages through it."""
    files = File.objects.filter(workspace=workspace)
    if prefix:
        files = files.filter(starts_with("path", prefix))
    if not include_deleted:
        files = files.filter(deleted_at__isnull=True)
    current_bytes = FileVersion.objects.filter(
        file=OuterRef("pk"), version=OuterRef("current_version")
    ).values("size_bytes")[:1]
    return files.annotate(current_bytes=Subquery(current_bytes)).order_by("path")


def file_read_text(*, workspace: Workspace, path: str, data_key: bytes) -> tuple[FileVersion, str]:
    """The current revision of a live file and its text; NotFound if missing or deleted."""
    revision = file_current_version(workspace=workspace, path=path)
    if revision is None:
        raise NotFound("No such document.", path=path)
    return revision, file_version_plaintext(
        version=revision, workspace=workspace, data_key=data_key
    )


def file_current_revisions(
    *, workspace: Workspace, after: str | None = None
) -> QuerySet[FileVersion]:
    """The current revision of every live file of the workspace (after the path `after`),
    by path, each with its file. Iterate with `.iterator()`: ciphertexts can each be
    megabytes, and a search or an export needs one chunk at a time, not all."""
    revisions = FileVersion.objects.select_related("file").filter(
        file__workspace=workspace,
        file__deleted_at__isnull=True,
        version=F("file__current_version"),
    )
    if after is not None:
        revisions = revisions.filter(file__path__gt=after)
    return revisions.order_by("file__path")


@dataclass(frozen=True)
class SearchPage:
    hits: list[tuple[File, str]]
    # Where the next page starts (after this path) when the scan stopped before the last
    # document; None when every document was considered.
    resume_after: str | None


def file_search(
    *,
    workspace: Workspace,
    query: str,
    data_key: bytes,
    limit: int,
    byte_budget: int,
    after: str | None = None,
    is_hidden: Callable[[str], bool] | None = None,
) -> SearchPage:
    """Live files whose text contains `query` (case-insensitive), each with a short snippet
    around its first match, in path order, at most `limit` of them, from the first path
    after `after`.

    Documents are sealed at rest, so there is no plaintext index to query: this opens the
    current revision of each file in turn. One call stops before it would decrypt more
    than `byte_budget` bytes (it always opens at least one document) or consider more than
    FILE_SEARCH_SCAN_LIMIT documents, and says where to resume, so no search holds the
    server for longer than that bound. Files for which `is_hidden(path)` is true are
    skipped before they are opened, so their text is never decrypted, and never count
    towards the bounds or become the resume point.
    A revision that fails its integrity check raises DocumentUnreadable, as a read would.
    """
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    revisions = file_current_revisions(workspace=workspace, after=after)
    found: list[tuple[File, str]] = []
    considered = decrypted = 0
    last_path: str | None = None
    for revision in revisions.iterator(chunk_size=50):
        if is_hidden is not None and is_hidden(revision.file.path):
            continue
        if (
            len(found) >= limit
            or considered >= FILE_SEARCH_SCAN_LIMIT
            or (decrypted and decrypted + revision.size_bytes > byte_budget)
        ):
            return SearchPage(hits=found, resume_after=last_path)
        considered += 1
        decrypted += revision.size_bytes
        last_path = revision.file.path
        text = file_version_plaintext(version=revision, workspace=workspace, data_key=data_key)
        match = pattern.search(text)
        if match is not None:
            found.append((revision.file, _snippet(text, match.start(), match.end())))
    return SearchPage(hits=found, resume_after=None)


def _snippet(text: str, start: int, end: int) -> str:
    """The match with up to SNIPPET_CONTEXT_CHARS either side, on one line, marked where cut."""
    left = max(0, start - SNIPPET_CONTEXT_CHARS)
    right = min(len(text), end + SNIPPET_CONTEXT_CHARS)
    body = " ".join(text[left:right].split())
    return ("…" if left > 0 else "") + body + ("…" if right < len(text) else "")
