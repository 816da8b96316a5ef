"""Line provenance ("blame") of the memory document, and stale lines.

Every line of the current revision is traced to the revision that introduced it: consecutive
revisions are compared line by line (difflib, after the unchanged head and tail are set
aside) and each line that survives unchanged keeps the origin it had, while a line a
revision added or changed takes that revision as its origin. So an Undo or a restore is the
origin of the lines it changed, like any Save: what it brings back was put back by a person
at that revision, and its revision in Changes shows what it restored. A line that only moved
is, to a line diff, removed in one place and added in another: its origin is the revision
that moved it.

A line's origin is its origin revision and its index there, which stays the same for as
long as the line is unchanged. The origins of each revision are cached (`LineProvenance`,
origin versions and indexes in runs, never text), so the blame of version N opens only N-1
and N once N-1's origins are known, and never replays the history again.

A line is stale when neither its origin nor its latest review ("Keep": `LineReview`, no
revision) is newer than MEMORY_STALE_DAYS.

Memory does not know about the assistant: the app that records captures registers a
resolver (`capture_links_register`) that names the conversation and admission behind the
revisions it wrote.
"""

from __future__ import annotations

import difflib
import itertools
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from memory.edits import unchanged_ends
from memory.models import MEMORY_PATH, LineProvenance, LineReview
from workspaces import sql
from workspaces.crypto import data_key_unwrap
from workspaces.errors import DocumentUnreadable
from workspaces.models import ChangeKind, File, FileVersion, User, Workspace, WorkspaceKey
from workspaces.selectors import file_version_plaintext

# A line's origin: the version of the revision that introduced it, and its index there.
Origin = tuple[int, int]


def text_lines(text: str) -> list[str]:
    """The lines of `text` as the Memory frame numbers them: split at "\\n" only (never at
    the other characters `str.splitlines` takes as breaks), a final newline ending the last
    line instead of starting an empty one."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def origins_carry(
    previous: list[str], previous_origins: list[Origin], current: list[str], version: int
) -> list[Origin]:
    """The origin of each line of `current`, revision `version`, which follows `previous`:
    the origin of the line of `previous` it continues unchanged, or its own place in
    `version` for a line that revision added or changed."""
    origins = [(version, index) for index in range(len(current))]
    head, tail = unchanged_ends(previous, current)
    origins[:head] = previous_origins[:head]
    origins[len(current) - tail :] = previous_origins[len(previous) - tail :]
    matcher = difflib.SequenceMatcher(
        None,
        previous[head : len(previous) - tail],
        current[head : len(current) - tail],
        autojunk=False,
    )
    for start_previous, start_current, size in matcher.get_matching_blocks():
        origins[head + start_current : head + start_current + size] = previous_origins[
            head + start_previous : head + start_previous + size
        ]
    return origins


def origin_runs(origins: list[Origin]) -> list[list[int]]:
    """`origins` as runs `[version, first index, count]` of consecutive lines of one origin."""
    runs: list[list[int]] = []
    for version, index in origins:
        if runs and runs[-1][0] == version and runs[-1][1] + runs[-1][2] == index:
            runs[-1][2] += 1
        else:
            runs.append([version, index, 1])
    return runs


def origins_of_runs(runs: list[list[int]]) -> list[Origin]:
    return [(version, start + offset) for version, start, count in runs for offset in range(count)]


# ---- the assistant's side of an origin, from the app that records captures ----------------


@dataclass(frozen=True)
class CaptureLink:
    conversation_id: uuid.UUID
    admission_id: uuid.UUID


# Revision ids in, the capture behind each revision that has one out. Asked only about
# revisions whose change kind is capture: no other revision is written with a turn behind it.
CaptureLinkResolver = Callable[[list[int]], dict[int, CaptureLink]]

_capture_link_resolvers: list[CaptureLinkResolver] = []


def capture_links_register(resolver: CaptureLinkResolver) -> None:
    """Let `resolver` name the turn behind revisions. Registering it again changes nothing."""
    if resolver not in _capture_link_resolvers:
        _capture_link_resolvers.append(resolver)


def _capture_links(revisions: Iterable[OriginRevision]) -> dict[int, CaptureLink]:
    """The capture behind each of `revisions` that has one, by revision id. Most blames have
    no capture among their origins, and ask no resolver (so send no statement)."""
    revision_ids = [
        revision.id for revision in revisions if revision.change_kind == ChangeKind.CAPTURE
    ]
    links: dict[int, CaptureLink] = {}
    if not revision_ids:
        return links
    for resolver in _capture_link_resolvers:
        links |= resolver(revision_ids)
    return links


# ---- origins of the live revision -----------------------------------------------------------


@dataclass(frozen=True)
class _OriginsStart:
    """What the origins of the live memory revision are worked out from, read in one
    statement: the live revision, the latest revision at or before it whose origins are
    cached (with those origins), and the workspace's wrapped data key. A ciphertext is
    read only when that revision has to be opened."""

    current: FileVersion
    cached: FileVersion | None
    cached_runs: list[list[int]]
    wrapped_key: bytes | None


def _origins_start(workspace: Workspace) -> _OriginsStart | None:
    # Raw: one statement where the ORM took four (the live revision, the cache, the data
    # key, the revisions to open), and it runs on every blame and every Keep.
    statement = f"""
        SELECT v.id, v.file_id, v.version, c.id, c.version, p.origin_runs, k.wrapped_key,
            CASE WHEN c.version = v.version THEN NULL ELSE v.ciphertext END,
            CASE WHEN c.version < v.version THEN c.ciphertext END
        FROM {sql.table(FileVersion)} v
        JOIN {sql.table(File)} f ON f.id = v.file_id AND v.version = f.current_version
        LEFT JOIN {sql.table(FileVersion)} c ON c.id = (
            SELECT cv.id FROM {sql.table(FileVersion)} cv
            WHERE cv.file_id = v.file_id AND cv.version <= v.version AND EXISTS (
                SELECT 1 FROM {sql.table(LineProvenance)} cp WHERE cp.revision_id = cv.id
            )
            ORDER BY cv.version DESC LIMIT 1
        )
        LEFT JOIN {sql.table(LineProvenance)} p ON p.revision_id = c.id
        LEFT JOIN {sql.table(WorkspaceKey)} k ON k.workspace_id = f.workspace_id
        WHERE f.workspace_id = %s AND f.path = %s AND f.deleted_at IS NULL
    """  # identifiers come from model metadata; every value is a parameter
    row = sql.fetch_one(statement, [workspace.pk, MEMORY_PATH])
    if row is None:
        return None
    (current_id, file_id, version, cached_id, cached_version, runs, wrapped_key, ciphertext,
     cached_ciphertext) = row  # fmt: skip
    cached = None
    if cached_id is not None:
        cached = FileVersion(
            id=cached_id,
            file_id=file_id,
            version=cached_version,
            ciphertext=None if cached_ciphertext is None else bytes(cached_ciphertext),
        )
    return _OriginsStart(
        current=FileVersion(
            id=current_id,
            file_id=file_id,
            version=version,
            ciphertext=None if ciphertext is None else bytes(ciphertext),
        ),
        cached=cached,
        # A JSON column reads back as its text on both databases, as the ORM reads it.
        cached_runs=json.loads(runs) if runs is not None else [],
        wrapped_key=None if wrapped_key is None else bytes(wrapped_key),
    )


_ORIGIN_RUNS = LineProvenance._meta.get_field("origin_runs")


# The origins of revisions, to be cached: (revision id, line count, origin runs).
_Uncached = list[tuple[int, int, list[list[int]]]]


def _origins(workspace: Workspace, start: _OriginsStart) -> tuple[list[Origin], _Uncached]:
    """The origin of each line of the live revision: from the cache, or carried forward from
    the latest cached revision before it (from the first revision when none is); and the
    origins of each revision on the way, for the caller to cache. Right after a Save that
    opens only the revision before it and the live one."""
    current, cached = start.current, start.cached
    if cached is not None and cached.version == current.version:
        return origins_of_runs(start.cached_runs), []
    if start.wrapped_key is None:
        raise DocumentUnreadable(version=current.version)
    data_key = data_key_unwrap(start.wrapped_key)
    lines: list[str] = []
    origins: list[Origin] = []
    after = 0
    if cached is not None:
        after = cached.version
        lines = text_lines(_opened(cached, workspace, data_key))
        origins = origins_of_runs(start.cached_runs)
    steps: Iterable[FileVersion] = [current]
    if current.version > after + 1:
        between = FileVersion.objects.filter(
            file_id=current.file_id, version__gt=after, version__lt=current.version
        ).order_by("version")
        steps = itertools.chain(between.iterator(chunk_size=50), steps)
    computed: _Uncached = []
    for step in steps:
        following = text_lines(_opened(step, workspace, data_key))
        origins = origins_carry(lines, origins, following, step.version)
        lines = following
        computed.append((step.pk, len(origins), origin_runs(origins)))
    return origins, computed


def _opened(revision: FileVersion, workspace: Workspace, data_key: bytes) -> str:
    return file_version_plaintext(version=revision, workspace=workspace, data_key=data_key)


# Rows in one insert of the cache: four parameters each, within SQLite's 999.
_CACHE_BATCH = 200


def origins_cache(
    rows: _Uncached, *, then: tuple[str, list[Any]] | None = None
) -> list[tuple[Any, ...]]:
    """Cache the origins of revisions, given as (revision id, line count, origin runs); then
    run `then`, a SELECT and its parameters, if given, and return its rows (fetched as
    `sql.rows_binary` fetches them).

    The cache is derived and written once per revision: two requests that fill it at once
    write the same rows, and the second insert is skipped. It is rebuilt from the revisions
    whenever a row is missing, so its insert commits without waiting for the WAL flush: a
    server crash may lose the last rows, never anything that cannot be recomputed. Each
    batch is one statement, so no transaction is opened around it; on PostgreSQL the last
    one is the same statement as `then`, which must not read the rows it inserts."""
    with_clause, from_item = sql.unsynchronized()
    created_at = sql.datetime_param(timezone.now())
    inserts = [
        _origins_insert(rows[first : first + _CACHE_BATCH], from_item, created_at)
        for first in range(0, len(rows), _CACHE_BATCH)
    ]
    if then is not None and inserts and connection.vendor == "postgresql":
        # One round trip where two were: a data-modifying WITH runs whether or not the query
        # reads it, within the statement's own transaction, as the insert alone.
        insert, params = inserts.pop()
        then = (f"{with_clause}, cached AS ({insert}) {then[0]}", params + then[1])
    if inserts:
        with connection.cursor() as cursor:
            for insert, params in inserts:
                cursor.execute(f"{with_clause} {insert}", params)
    return [] if then is None else sql.rows_binary(*then)


def _origins_insert(batch: _Uncached, from_item: str, created_at: Any) -> tuple[str, list[Any]]:
    """The INSERT of one batch of the cache, joining `from_item` (`sql.unsynchronized`'s), and
    its parameters."""
    values = ", ".join(["(%s, %s, %s, %s)"] * len(batch))
    # INSERT ... SELECT, so PostgreSQL's settings item can be joined in; its WHERE is what
    # SQLite needs to read the ON CONFLICT that follows as the upsert clause.
    statement = f"""
        INSERT INTO {sql.table(LineProvenance)} (revision_id, line_count, origin_runs, created_at)
        SELECT r.column1, r.column2, r.column3, r.column4
        FROM (VALUES {values}) r {f", {from_item}" if from_item else ""}
        WHERE true
        ON CONFLICT DO NOTHING
    """  # identifiers come from model metadata; every value is a parameter
    params: list[Any] = []
    for revision_id, line_count, runs in batch:
        params += [
            revision_id,
            line_count,
            _ORIGIN_RUNS.get_db_prep_value(runs, connection),
            created_at,
        ]
    return statement, params


# ---- blame ---------------------------------------------------------------------------------


# Slotted: a blame builds up to one of each per line, and a slotted frozen instance is built in
# about half the time.
@dataclass(frozen=True, slots=True)
class OriginRevision:
    """The revision that introduced a line, as blame shows it: who made it, how and when,
    never its text. Plain values rather than a `FileVersion`: a blame loads one for every
    distinct origin, up to one per line, and a model instance costs several times as much
    to build."""

    id: int
    version: int
    author: User | None  # its id and username; other fields load on access
    author_kind: str
    change_kind: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class BlameLine:
    line: int  # from 1
    origin: OriginRevision
    origin_line: int  # its index there, from 0
    capture: CaptureLink | None
    reviewed_at: datetime | None
    is_stale: bool

    @property
    def conversation_id(self) -> uuid.UUID | None:
        return self.capture.conversation_id if self.capture else None

    @property
    def admission_id(self) -> uuid.UUID | None:
        return self.capture.admission_id if self.capture else None


@dataclass(frozen=True)
class Blame:
    version: int
    stale_days: int
    lines: list[BlameLine]

    @property
    def stale_lines(self) -> int:
        return sum(line.is_stale for line in self.lines)


def memory_line_origins(*, workspace: Workspace) -> tuple[FileVersion | None, list[Origin]]:
    """The live memory revision (None when there is none, or it is deleted; its id, file and
    version only) and the origin of each of its lines."""
    start = _origins_start(workspace)
    if start is None:
        return None, []
    origins, uncached = _origins(workspace, start)
    origins_cache(uncached)
    return start.current, origins


# What blame reads of an origin revision, in the order its statement selects them.
_ORIGIN_SHOWN = ("id", "version", "author_kind", "change_kind", "created_at")
# What blame shows of an author; the rest of the user loads on access.
_AUTHOR_SHOWN = ("id", "username")
_AUTHOR_DEFERRED = tuple(
    field.attname for field in User._meta.concrete_fields if field.attname not in _AUTHOR_SHOWN
)


def _origin_revisions(
    file_id: int, versions: set[int], uncached: _Uncached
) -> tuple[dict[int, OriginRevision], dict[tuple[int, int], datetime]]:
    """The revisions of `versions` by version, and the latest review of each of their lines
    that has one, by (revision id, line index); caching `uncached` on the way."""
    if not versions:
        origins_cache(uncached)
        return {}, {}
    # Raw: one statement where the ORM took two (the revisions, the reviews), each compiled
    # anew for every length of the version list.
    among, among_params = sql.any_of("v.version", sorted(versions))
    statement = f"""
        SELECT {", ".join(f"v.{column}" for column in _ORIGIN_SHOWN)},
            {sql.columns(User, "u", deferred=_AUTHOR_DEFERRED)}, r.origin_line, MAX(r.reviewed_at)
        FROM {sql.table(FileVersion)} v
        LEFT JOIN {sql.table(User)} u ON u.id = v.author_id
        LEFT JOIN {sql.table(LineReview)} r ON r.origin_id = v.id
        WHERE v.file_id = %s AND {among}
        GROUP BY v.id, u.id, r.origin_line
    """  # identifiers come from model metadata; every value is a parameter
    rows = origins_cache(uncached, then=(statement, [file_id, *among_params]))
    created_at_loaded = sql.field_loader(FileVersion, "created_at")
    reviewed_at_loaded = sql.field_loader(LineReview, "reviewed_at")
    author_at = len(_ORIGIN_SHOWN)
    review_at = author_at + len(_AUTHOR_SHOWN)
    revisions: dict[int, OriginRevision] = {}
    authors: dict[int, User] = {}  # most revisions share a few authors: each loaded once
    reviews: dict[tuple[int, int], datetime] = {}
    for row in rows:
        revision_id, version, author_kind, change_kind, created_at = row[:author_at]
        author_id = row[author_at]  # the user's id column, None without an author
        if version not in revisions:
            author = None
            if author_id is not None:
                if author_id not in authors:
                    authors[author_id] = sql.instance(
                        User, row, author_at, deferred=_AUTHOR_DEFERRED
                    )
                author = authors[author_id]
            revisions[version] = OriginRevision(
                id=revision_id,
                version=version,
                author=author,
                author_kind=author_kind,
                change_kind=change_kind,
                created_at=created_at_loaded(created_at),
            )
        origin_line, reviewed_at = row[review_at:]
        if origin_line is not None:
            reviews[revision_id, origin_line] = reviewed_at_loaded(reviewed_at)
    return revisions, reviews


def memory_blame(*, workspace: Workspace, now: datetime | None = None) -> Blame:
    """Where each line of the saved memory came from, and which lines are stale at `now`.

    Ids, versions and times only: the caller pairs line numbers with the text it has.
    """
    now = now or timezone.now()
    stale_days = settings.MEMORY_STALE_DAYS
    start = _origins_start(workspace)
    if start is None:
        return Blame(version=0, stale_days=stale_days, lines=[])
    current = start.current
    origins, uncached = _origins(workspace, start)
    revisions, reviews = _origin_revisions(
        current.file_id, {version for version, _ in origins}, uncached
    )
    captures = _capture_links(revisions.values())
    stale_before = now - timedelta(days=stale_days)
    lines = []
    for number, (version, index) in enumerate(origins, start=1):
        origin = revisions[version]
        reviewed_at = reviews.get((origin.id, index))
        lines.append(
            BlameLine(
                line=number,
                origin=origin,
                origin_line=index,
                capture=captures.get(origin.id),
                reviewed_at=reviewed_at,
                # Neither changed nor kept since.
                is_stale=origin.created_at < stale_before
                and (reviewed_at is None or reviewed_at < stale_before),
            )
        )
    return Blame(version=current.version, stale_days=stale_days, lines=lines)
