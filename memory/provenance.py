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
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from memory.models import MEMORY_PATH, LineProvenance, LineReview
from workspaces.errors import DocumentUnreadable
from workspaces.models import FileVersion, Workspace
from workspaces.selectors import file_current_version, file_version_plaintext, workspace_data_key

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
    shorter = min(len(previous), len(current))
    head = 0
    while head < shorter and previous[head] == current[head]:
        head += 1
    tail = 0
    while tail < shorter - head and previous[-1 - tail] == current[-1 - tail]:
        tail += 1
    # Set aside first, so that a one-line edit of a long document stays one pass: difflib
    # compares only what lies between.
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


# Revision ids in, the capture behind each revision that has one out.
CaptureLinkResolver = Callable[[list[int]], dict[int, CaptureLink]]

_capture_link_resolvers: list[CaptureLinkResolver] = []


def capture_links_register(resolver: CaptureLinkResolver) -> None:
    """Let `resolver` name the turn behind revisions. Registering it again changes nothing."""
    if resolver not in _capture_link_resolvers:
        _capture_link_resolvers.append(resolver)


def _capture_links(revision_ids: list[int]) -> dict[int, CaptureLink]:
    links: dict[int, CaptureLink] = {}
    for resolver in _capture_link_resolvers:
        links |= resolver(revision_ids)
    return links


# ---- origins of a revision -----------------------------------------------------------------


def revision_origins(*, workspace: Workspace, revision: FileVersion) -> list[Origin]:
    """The origin of each line of `revision`, from the cache, or carried forward from the
    latest cached revision before it (from the first revision when none is), caching each
    revision on the way. The cache is derived and written once per revision: two requests
    that fill it at once write the same rows, and the second insert is skipped."""
    latest = (
        LineProvenance.objects.filter(
            revision__file_id=revision.file_id, revision__version__lte=revision.version
        )
        .order_by("-revision__version")
        .values_list("revision__version", "origin_runs")
        .first()
    )
    if latest is not None and latest[0] == revision.version:
        return origins_of_runs(latest[1])
    data_key = workspace_data_key(workspace=workspace)
    if data_key is None:
        raise DocumentUnreadable(version=revision.version)
    lines: list[str] = []
    origins: list[Origin] = []
    after = 0
    if latest is not None:
        after, runs = latest
        origins = origins_of_runs(runs)
    # The cached revision itself comes first (its lines are what the next one is diffed
    # against), then every revision after it up to `revision`.
    steps = FileVersion.objects.filter(
        file_id=revision.file_id, version__gte=after, version__lte=revision.version
    ).order_by("version")
    computed = []
    for step in steps.iterator(chunk_size=50):
        current = text_lines(_opened(step, workspace, data_key))
        if step.version == after:
            lines = current
            continue
        origins = origins_carry(lines, origins, current, step.version)
        lines = current
        computed.append(
            LineProvenance(revision=step, line_count=len(origins), origin_runs=origin_runs(origins))
        )
    LineProvenance.objects.bulk_create(computed, batch_size=200, ignore_conflicts=True)
    return origins


def _opened(revision: FileVersion, workspace: Workspace, data_key: bytes) -> str:
    return file_version_plaintext(version=revision, workspace=workspace, data_key=data_key)


# ---- blame ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BlameLine:
    line: int  # from 1
    origin: FileVersion  # the revision that introduced the line
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
    """The live memory revision (None when there is none, or it is deleted) and the origin
    of each of its lines."""
    current = file_current_version(workspace=workspace, path=MEMORY_PATH)
    if current is None:
        return None, []
    return current, revision_origins(workspace=workspace, revision=current)


def memory_blame(*, workspace: Workspace, now: datetime | None = None) -> Blame:
    """Where each line of the saved memory came from, and which lines are stale at `now`.

    Ids, versions and times only: the caller pairs line numbers with the text it has.
    """
    now = now or timezone.now()
    stale_days = settings.MEMORY_STALE_DAYS
    current, origins = memory_line_origins(workspace=workspace)
    if current is None:
        return Blame(version=0, stale_days=stale_days, lines=[])
    revisions = {
        revision.version: revision
        for revision in FileVersion.objects.select_related("author")
        .defer("ciphertext")
        .filter(file_id=current.file_id, version__in={version for version, _ in origins})
    }
    revision_ids = [revision.pk for revision in revisions.values()]
    captures = _capture_links(revision_ids)
    reviews = {
        (row["origin_id"], row["origin_line"]): row["latest"]
        for row in LineReview.objects.filter(origin_id__in=revision_ids)
        .values("origin_id", "origin_line")
        .annotate(latest=Max("reviewed_at"))
    }
    stale_before = now - timedelta(days=stale_days)
    lines = []
    for number, (version, index) in enumerate(origins, start=1):
        origin = revisions[version]
        reviewed_at = reviews.get((origin.pk, index))
        last_looked_at = max(origin.created_at, reviewed_at or origin.created_at)
        lines.append(
            BlameLine(
                line=number,
                origin=origin,
                origin_line=index,
                capture=captures.get(origin.pk),
                reviewed_at=reviewed_at,
                is_stale=last_looked_at < stale_before,
            )
        )
    return Blame(version=current.version, stale_days=stale_days, lines=lines)
