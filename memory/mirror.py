"""The auto-memory mirror: a bot space folded into a directory of Markdown files that an
agent runtime (Claude Code's auto-memory directory) reads and edits, and folded back.

The space is the bot's `bot` space named `auto-memory` (only the mirror writes a space of
that name), keyed on the project: the last segment of the git root of the working
directory, so every worktree of a repository shares it. The bot is the one acting: the bot
token's (remote) or `--bot` of `--team` (local).

One round trip (docs/mirror.md):

- the switch resolves by precedence (flag > bot > team > AUTO_MEMORY > off); off does
  nothing;
- hydrate reads the whole space in one call into a node directory
  `<state>/auto-memory/<sha256 of the space id>/node-XXXX`, files 0600, and records a
  sha256 manifest beside it; the node's lock and manifest sit beside the directory, out of
  the runtime's reach;
- sync-back walks the directory, writes what differs from the manifest, and deletes a
  document only when the completed walk saw its file gone;
- release removes the node; sweep removes nodes idle past 48 hours whose lock is free.

Nothing here follows a symlink: directories are opened with O_NOFOLLOW relative to their
parent's descriptor, and a symlink where a file or directory should be is skipped and
reported.
"""

from __future__ import annotations

import enum
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

from memory.bots import auto_memory_parse
from memory.cli import RemoteRefusal, RemoteSpaceClient
from memory.errors import (
    AutoMemoryValueInvalid,
    MirrorNodeBusy,
    MirrorNotHydrated,
    MirrorStateUnsafe,
)
from memory.spaces.handle import SpaceHandle, Visibility, space_handle_parse
from memory.spaces.quotas import store_get
from memory.spaces.selectors import stored_text_or_none
from memory.spaces.services import (
    AUTO_MEMORY_SPACE_NAME,
    SpaceWriter,
    WriterKind,
    space_document_delete,
    space_document_write,
)
from workspaces.errors import DomainError, InvalidDocumentPath, NotFound
from workspaces.models import AutoMemorySetting, Bot
from workspaces.paths import document_path_require_canonical

# A node idle this long, with its lock free, is the sweep's to remove.
NODE_MAX_AGE_SECONDS = 48 * 3600
# Sync-back's time budget: a base, a share per document (the manifest's and the walk's),
# and a cap, so a large space gets longer but a stuck store cannot hold a node for ever.
SYNC_BUDGET_BASE_SECONDS = 30.0
SYNC_BUDGET_PER_DOCUMENT_SECONDS = 0.5
SYNC_BUDGET_CAP_SECONDS = 600.0
NODE_NAME = re.compile(r"node-[0-9a-f]{4,32}")
MANIFEST_FORMAT = "auto-memory-manifest.v1"
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Level(enum.StrEnum):
    """Where the switch was decided, highest first."""

    FLAG = "flag"
    BOT = "bot"
    TEAM = "team"
    ENVIRONMENT = "environment"
    DEFAULT = "default"


class _Printed:
    """A result the `memory` command prints as JSON: every field, in order, under its
    camelCase name, with a path or an enum member as its text."""

    def as_json(self) -> dict[str, Any]:
        printed: dict[str, Any] = {}
        for each in fields(self):  # type: ignore[arg-type]  # only dataclasses take this base
            value = getattr(self, each.name)
            if isinstance(value, Path | enum.Enum):
                value = value.value if isinstance(value, enum.Enum) else str(value)
            printed[re.sub(r"_(\w)", lambda match: match[1].upper(), each.name)] = value
        return printed


@dataclass(frozen=True)
class Switch(_Printed):
    enabled: bool
    level: Level


def auto_memory_resolve(*, flag: object, bot: object, team: object, environment: object) -> Switch:
    """The first level, highest first, whose value is on or off decides; blank (or None)
    defers to the next, and with every level blank the mirror is off. Each value parses as
    `auto_memory_parse`; an invalid one at any level consulted is `AutoMemoryValueInvalid`
    (C131), naming that level, rather than a silent skip to the next."""
    for level, value in (
        (Level.FLAG, flag),
        (Level.BOT, bot),
        (Level.TEAM, team),
        (Level.ENVIRONMENT, environment),
    ):
        try:
            setting = auto_memory_parse(value)
        except ValueError:
            raise AutoMemoryValueInvalid(level=level.value, diagnostic="C131") from None
        if setting != AutoMemorySetting.UNSET:
            return Switch(enabled=setting == AutoMemorySetting.ON, level=level)
    return Switch(enabled=False, level=Level.DEFAULT)


def project_root(start: Path) -> Path | None:
    """The git root of `start`, shared by every worktree of one repository; None outside
    a repository. Read from the `.git` entries, without running git: a `.git` directory
    marks the root; a `.git` file (a worktree, a submodule) points at its git directory,
    whose `commondir`, when present, leads to the repository's own `.git`."""
    start = start.absolute()
    for directory in (start, *start.parents):
        marker = directory / ".git"
        if marker.is_dir():
            return directory
        if marker.is_file():
            return _root_of_linked(directory, marker)
    return None


def _root_of_linked(directory: Path, marker: Path) -> Path:
    text = marker.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        return directory
    git_dir = (directory / text.removeprefix("gitdir:").strip()).resolve()
    common_file = git_dir / "commondir"
    if not common_file.is_file():
        return directory  # a submodule: its own repository
    common = (git_dir / common_file.read_text(encoding="utf-8").strip()).resolve()
    return common.parent if common.name == ".git" else common


def mirror_space_handle(*, team_id: int, bot_slug: str, project: str) -> SpaceHandle:
    """The bot's auto-memory space for `project` (SpaceInvalid for a project or bot id that
    is not one path segment)."""
    query = {
        "visibility": Visibility.BOT.value,
        "name": AUTO_MEMORY_SPACE_NAME,
        "project": project,
        "bot": bot_slug,
    }
    return space_handle_parse(query, tenant_id=team_id, user_id=0)


# The space, locally or remotely


@dataclass(frozen=True)
class MirrorDocument:
    path: str
    revision: int
    # None: the stored body is not UTF-8 (`stored_text`), listed as `unreadable` by the
    # route; hydrate reports it and writes no file.
    body: bytes | None


class MirrorSpace(Protocol):
    """The auto-memory space as the mirror uses it. A refusal is a DomainError (local) or
    a RemoteRefusal (remote); either carries `code` and `message`."""

    space_id: str

    def documents(self) -> Sequence[MirrorDocument]:
        """Every document of the space with its body, in one call."""

    def write(self, path: str, body: bytes, *, expected_revision: int) -> int:
        """Create (`expected_revision` 0) or replace revision N; answer the new revision."""

    def delete(self, path: str, *, expected_revision: int) -> None:
        """Delete revision N; NotFound (or a remote 404) when it is already gone."""


class LocalMirrorSpace:
    """The bot's auto-memory space through the memory-spaces services, written as
    `mirror:<bot id>`."""

    def __init__(self, *, bot: Bot, project: str) -> None:
        self.handle = mirror_space_handle(team_id=bot.team_id, bot_slug=bot.slug, project=project)
        self.space_id = self.handle.id
        self.writer = SpaceWriter(
            kind=WriterKind.MIRROR, ident=bot.slug, tenant_id=bot.team_id, user=None
        )

    def documents(self) -> Sequence[MirrorDocument]:
        return [
            MirrorDocument(
                path=each.meta.path,
                revision=each.meta.revision,
                body=None if stored_text_or_none(each.meta.path, each.body) is None else each.body,
            )
            for each in store_get().read_all(self.handle)
        ]

    def write(self, path: str, body: bytes, *, expected_revision: int) -> int:
        meta = space_document_write(
            handle=self.handle,
            path=path,
            body=body,
            expected_revision=expected_revision,
            writer=self.writer,
        )
        return meta.revision

    def delete(self, path: str, *, expected_revision: int) -> None:
        space_document_delete(
            handle=self.handle, path=path, expected_revision=expected_revision, writer=self.writer
        )


class RemoteMirrorSpace:
    """The bot's auto-memory space over `/api/v1/mirror/...`, as the bot whose token this is."""

    def __init__(self, *, base_url: str, token: str, project: str) -> None:
        self.client = RemoteSpaceClient(base_url=base_url, token=token, space={"project": project})
        self.client.base_url = base_url.rstrip("/") + "/api/v1/mirror/"
        self.space_id = ""

    def describe(self) -> dict[str, Any]:
        """The bot, its space and the bot's and team's auto-memory levels; remembers the
        space id."""
        answer = self.client.request_json("GET", "space")
        self.space_id = str(answer["space"]["id"])
        return answer

    def documents(self) -> Sequence[MirrorDocument]:
        listing = self.client.request_json("GET", "docs")
        return [
            MirrorDocument(
                path=each["path"], revision=int(each["revision"]), body=each["content"].encode()
            )
            for each in listing["documents"]
        ] + [
            # Never materialised, so its revision is never recorded.
            MirrorDocument(path=path, revision=0, body=None)
            for path in listing.get("unreadable", [])
        ]

    def write(self, path: str, body: bytes, *, expected_revision: int) -> int:
        response = self.client.request(
            "PUT",
            "doc",
            query={"path": path},
            headers={
                "Content-Type": "text/markdown; charset=utf-8",
                "X-Base-Version": str(expected_revision),
            },
            data=body,
        )
        return int(response.json()["revision"])

    def delete(self, path: str, *, expected_revision: int) -> None:
        self.client.request(
            "DELETE",
            "doc",
            query={"path": path},
            headers={"X-Base-Version": str(expected_revision)},
            answer=None,
        )


# The node's place on disk


@dataclass(frozen=True)
class Node:
    """One node's directory (the runtime's), and beside it its lock and manifest (not)."""

    leaf: Path
    name: str

    @property
    def directory(self) -> Path:
        return self.leaf / self.name

    @property
    def lock(self) -> Path:
        return self.leaf / f"{self.name}.lock"

    @property
    def manifest(self) -> Path:
        return self.leaf / f"{self.name}.manifest.json"


def node_name_new() -> str:
    return f"node-{secrets.token_hex(4)}"


def mirror_node(*, state_dir: Path, space_id: str, name: str) -> Node:
    """The node `name` of the space `space_id`, creating the state directories (0700) and
    refusing any of them that is a symlink or not a directory (MirrorStateUnsafe)."""
    if not NODE_NAME.fullmatch(name):
        raise MirrorStateUnsafe(
            "A node is named node- and 4 to 32 lowercase hex digits.", path=name
        )
    digest = hashlib.sha256(space_id.encode()).hexdigest()[:32]
    leaf = state_dir / "auto-memory" / digest
    for directory in (state_dir, state_dir / "auto-memory", leaf):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise MirrorStateUnsafe(
                f"Cannot create the mirror's state directory: {error.strerror}.",
                path=str(directory),
            ) from None
        if not stat.S_ISDIR(directory.lstat().st_mode):
            raise MirrorStateUnsafe(path=str(directory))
    return Node(leaf=leaf, name=name)


@contextmanager
def node_locked(node: Node) -> Iterator[None]:
    """Hold the node's lock (MirrorNodeBusy when another process holds it), and mark the
    node used now, which is what the sweep's age reads."""
    try:
        handle = os.open(node.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise MirrorStateUnsafe(path=str(node.lock)) from None
        raise
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MirrorNodeBusy(node=node.name) from None
        os.utime(handle)
        yield
    finally:
        os.close(handle)


# The manifest


@dataclass(frozen=True)
class ManifestEntry:
    sha256: str
    revision: int


def manifest_read(node: Node) -> dict[str, ManifestEntry] | None:
    """What the last hydrate (or sync-back) left in the node; None before any hydrate."""
    try:
        data = json.loads(node.manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if data.get("format") != MANIFEST_FORMAT:
        raise MirrorStateUnsafe("The node's manifest is not one this mirror wrote.")
    return {
        path: ManifestEntry(sha256=entry["sha256"], revision=int(entry["revision"]))
        for path, entry in data["files"].items()
    }


def _manifest_write(node: Node, *, space_id: str, files: dict[str, ManifestEntry]) -> None:
    data = {
        "format": MANIFEST_FORMAT,
        "space": space_id,
        "files": {
            path: {"sha256": entry.sha256, "revision": entry.revision}
            for path, entry in sorted(files.items())
        },
    }
    temporary = node.leaf / f".{node.name}.manifest.{secrets.token_hex(4)}"
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, sort_keys=True)
    os.replace(temporary, node.manifest)


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


# Hydrate


@dataclass
class HydrateReport(_Printed):
    directory: Path
    written: list[str] = field(default_factory=list)
    # Documents at a path that is not canonical: not materialised, never deleted.
    skipped: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    # Documents the runtime's own entries kept off the disk (a directory where the file
    # goes): not in the manifest, so never a deletion either.
    errors: list[dict[str, str]] = field(default_factory=list)


def mirror_hydrate(*, space: MirrorSpace, state_dir: Path, node_name: str) -> HydrateReport:
    """Materialise the space into the node's directory (created even for an empty space):
    every document at its canonical path, files 0600 and directories 0700, then the
    manifest of what was written. A file a previous hydrate wrote whose document is gone is
    pruned, not one whose document became unreadable; files the mirror never wrote are
    left alone."""
    node = mirror_node(state_dir=state_dir, space_id=space.space_id, name=node_name)
    with node_locked(node):
        previous = manifest_read(node) or {}
        documents = space.documents()
        report = HydrateReport(directory=node.directory)
        files: dict[str, ManifestEntry] = {}
        root = _directory_open(node.leaf, node.name, create=True)
        try:
            for document in sorted(documents, key=lambda each: each.path):
                if not _is_canonical(document.path):
                    report.skipped.append(document.path)
                    continue
                if document.body is None:
                    report.errors.append(_unreadable(document.path))
                    # Still in the space: a copy an earlier hydrate wrote is its last
                    # readable text, kept (and known, so no sync reads it as a deletion).
                    if document.path in previous:
                        files[document.path] = previous[document.path]
                    continue
                try:
                    _file_replace(root, document.path, document.body)
                except (OSError, MirrorStateUnsafe) as error:
                    report.errors.append(_blocked(document.path, error))
                    continue
                files[document.path] = ManifestEntry(_digest(document.body), document.revision)
                report.written.append(document.path)
            for path in sorted(set(previous) - set(files)):
                if _file_remove(root, path):
                    report.pruned.append(path)
        finally:
            os.close(root)
        _manifest_write(node, space_id=space.space_id, files=files)
    return report


def _unreadable(path: str) -> dict[str, str]:
    message = "The stored document is not valid UTF-8; write it again or delete it."
    return {"path": path, "code": "DOCUMENT_UNREADABLE", "message": message}


def _blocked(path: str, error: OSError | MirrorStateUnsafe) -> dict[str, str]:
    message = error.strerror if isinstance(error, OSError) else error.message
    return {"path": path, "code": "NOT_WRITTEN", "message": message or type(error).__name__}


def _is_canonical(path: str) -> bool:
    try:
        document_path_require_canonical(path)
    except InvalidDocumentPath:
        return False
    return True


def _directory_open(parent: Path | int, name: str, *, create: bool) -> int:
    """A descriptor of the directory `name` in `parent` (a path or a descriptor), never
    through a symlink (MirrorStateUnsafe for one)."""
    parent_fd = os.open(parent, _DIRECTORY_FLAGS) if isinstance(parent, Path) else os.dup(parent)
    try:
        if create:
            with suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=parent_fd)
        try:
            return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent_fd)
        except OSError as error:
            if error.errno in {errno.ELOOP, errno.ENOTDIR}:
                raise MirrorStateUnsafe(
                    "A symlink or a file stands where the mirror needs a directory.", path=name
                ) from None
            raise
    finally:
        os.close(parent_fd)


def _parent_open(root: int, directories: Sequence[str], *, create: bool) -> int:
    """A descriptor of the directory `directories` names under `root`, segment by segment,
    never through a symlink."""
    parent = os.dup(root)
    try:
        for directory in directories:
            inner = _directory_open(parent, directory, create=create)
            os.close(parent)
            parent = inner
    except BaseException:
        os.close(parent)
        raise
    return parent


def _file_replace(root: int, path: str, body: bytes) -> None:
    """Write `body` at `path` under `root`: a new file 0600 renamed over whatever was there
    (a symlink the runtime left is replaced, never followed)."""
    *directories, name = path.split("/")
    parent = _parent_open(root, directories, create=True)
    try:
        temporary = f".{name}.{secrets.token_hex(4)}.tmp"
        handle = os.open(
            temporary,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=parent,
        )
        with os.fdopen(handle, "wb") as out:
            out.write(body)
        os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    finally:
        os.close(parent)


def _file_remove(root: int, path: str) -> bool:
    """Remove the regular file at `path` under `root`; False when there is none (or
    something else stands there, which is left alone)."""
    *directories, name = path.split("/")
    try:
        parent = _parent_open(root, directories, create=False)
    except (FileNotFoundError, MirrorStateUnsafe):
        return False
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            return False
        os.unlink(name, dir_fd=parent)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(parent)


# Sync-back


@dataclass
class Walk:
    """What a walk of the node's directory found: the Markdown files it read, every path
    present in any form (what a deletion is judged against), what it skipped, the errors it
    met, and whether it saw every directory."""

    files: dict[str, bytes] = field(default_factory=dict)
    present: set[str] = field(default_factory=set)
    # Symlinks and other non-regular entries: what a manifest path under one would be is
    # unknown, so it is never taken for a deletion.
    opaque: set[str] = field(default_factory=set)
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    complete: bool = True

    def missing(self, paths: Iterable[str]) -> set[str]:
        """The paths this walk saw go missing: absent, and under no opaque entry."""
        return {
            path
            for path in paths
            if path not in self.present
            and not any(
                "/".join(path.split("/")[:end]) in self.opaque
                for end in range(1, path.count("/") + 1)
            )
        }


def mirror_walk(directory: Path) -> Walk:
    """Walk `directory` without following a symlink: only regular `.md` files at most
    MEMORY_MAX_DOCUMENT_BYTES are read; symlinks, other kinds of file and other names are
    skipped and reported. A directory that cannot be listed (or the node directory gone)
    makes the walk incomplete."""
    walk = Walk()
    try:
        root = os.open(directory, _DIRECTORY_FLAGS)
    except OSError as error:
        walk.complete = False
        walk.errors.append(_problem("", "DIRECTORY_UNREADABLE", error))
        return walk
    try:
        _walk_into(root, "", walk)
    finally:
        os.close(root)
    return walk


def _walk_into(directory: int, prefix: str, walk: Walk) -> None:
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as error:
        walk.complete = False
        walk.errors.append(_problem(prefix.rstrip("/"), "DIRECTORY_UNREADABLE", error))
        return
    for entry in entries:
        path = prefix + entry.name
        walk.present.add(path)
        try:
            if entry.is_symlink():
                walk.opaque.add(path)
                walk.skipped.append({"path": path, "reason": "symlink"})
            elif entry.is_dir(follow_symlinks=False):
                inner = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=directory)
                try:
                    _walk_into(inner, path + "/", walk)
                finally:
                    os.close(inner)
            elif not entry.is_file(follow_symlinks=False):
                walk.opaque.add(path)
                walk.skipped.append({"path": path, "reason": "not_regular"})
            elif not entry.name.endswith(".md"):
                walk.skipped.append({"path": path, "reason": "not_markdown"})
            else:
                _file_read(directory, entry.name, path, walk)
        except OSError as error:
            # A directory that vanished or cannot be opened hides what it held.
            walk.complete = False
            walk.errors.append(_problem(path, "UNREADABLE", error))


def _file_read(directory: int, name: str, path: str, walk: Walk) -> None:
    try:
        handle = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory
        )
    except FileNotFoundError:
        walk.present.discard(path)  # gone between the listing and the read: a deletion
        return
    except OSError as error:
        walk.errors.append(_problem(path, "UNREADABLE", error))
        return
    with os.fdopen(handle, "rb") as source:
        status = os.fstat(source.fileno())
        if not stat.S_ISREG(status.st_mode):
            walk.skipped.append({"path": path, "reason": "not_regular"})
            return
        limit = settings.MEMORY_MAX_DOCUMENT_BYTES
        body = source.read(limit + 1)
    if len(body) > limit:
        walk.errors.append(
            {
                "path": path,
                "code": "DOCUMENT_TOO_LARGE",
                "message": f"Over the ceiling of {limit} bytes; not stored.",
            }
        )
        return
    walk.files[path] = body


def _problem(path: str, code: str, error: OSError) -> dict[str, str]:
    return {"path": path, "code": code, "message": error.strerror or type(error).__name__}


@dataclass
class SyncReport(_Printed):
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    # False: the walk missed part of the tree, so no document was deleted.
    walk_complete: bool = True


def sync_budget_seconds(document_count: int) -> float:
    return min(
        SYNC_BUDGET_CAP_SECONDS,
        SYNC_BUDGET_BASE_SECONDS + SYNC_BUDGET_PER_DOCUMENT_SECONDS * document_count,
    )


def mirror_sync_back(
    *,
    space: MirrorSpace,
    state_dir: Path,
    node_name: str,
    clock: Callable[[], float] = time.monotonic,
) -> SyncReport:
    """Fold the node's edits back into the space, through the memory-spaces service (path,
    ceiling, secret scan, quotas). Only what differs from the manifest is written, each
    against the revision it was hydrated at (a document changed meanwhile is a reported
    conflict, never overwritten); a document is deleted only when its file is missing from
    a completed walk. Every refusal is reported with its path and the rest go on; past the
    time budget what is left is reported and stays for the next sync-back. MirrorNotHydrated
    before a hydrate."""
    node = mirror_node(state_dir=state_dir, space_id=space.space_id, name=node_name)
    with node_locked(node):
        manifest = manifest_read(node)
        if manifest is None:
            raise MirrorNotHydrated(node=node_name)
        walk = mirror_walk(node.directory)
        report = SyncReport(
            skipped=walk.skipped, errors=list(walk.errors), walk_complete=walk.complete
        )
        deadline = clock() + sync_budget_seconds(len(manifest) + len(walk.files))
        for path, body in sorted(walk.files.items()):
            entry = manifest.get(path)
            digest = _digest(body)
            if entry is not None and entry.sha256 == digest:
                report.unchanged += 1
                continue
            if clock() > deadline:
                report.errors.append(_over_budget(path))
                continue
            try:
                revision = space.write(path, body, expected_revision=entry.revision if entry else 0)
            except (DomainError, RemoteRefusal) as refusal:
                report.errors.append(_refused(path, refusal))
                continue
            manifest[path] = ManifestEntry(digest, revision)
            report.written.append(path)
        if walk.complete:
            for path in sorted(walk.missing(manifest)):
                if clock() > deadline:
                    report.errors.append(_over_budget(path))
                    continue
                try:
                    space.delete(path, expected_revision=manifest[path].revision)
                except (DomainError, RemoteRefusal) as refusal:
                    if not _is_gone(refusal):
                        report.errors.append(_refused(path, refusal))
                        continue
                del manifest[path]
                report.deleted.append(path)
        _manifest_write(node, space_id=space.space_id, files=manifest)
    return report


def _is_gone(refusal: DomainError | RemoteRefusal) -> bool:
    return isinstance(refusal, NotFound) or (
        isinstance(refusal, RemoteRefusal) and refusal.code == NotFound.code
    )


def _refused(path: str, refusal: DomainError | RemoteRefusal) -> dict[str, str]:
    return {"path": path, "code": refusal.code, "message": refusal.message}


def _over_budget(path: str) -> dict[str, str]:
    return {
        "path": path,
        "code": "TIME_BUDGET_EXHAUSTED",
        "message": "Not synced within the time budget; the next sync-back takes it up.",
    }


# Release and sweep


def mirror_release(*, state_dir: Path, space_id: str, node_name: str) -> bool:
    """Remove the node (directory, manifest, lock); False when there was nothing to remove.
    Releasing twice is fine."""
    node = mirror_node(state_dir=state_dir, space_id=space_id, name=node_name)
    existed = os.path.lexists(node.directory) or os.path.lexists(node.manifest)
    with node_locked(node):
        _node_remove(node)
    return existed


@dataclass
class SweepReport(_Printed):
    reaped: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    # Entries in the node's place that are not real directories (a decoy symlink): kept.
    ignored: list[str] = field(default_factory=list)


def mirror_sweep(*, state_dir: Path, now: float | None = None) -> SweepReport:
    """Remove every node idle for NODE_MAX_AGE_SECONDS (by the newer of its directory's
    and its lock's times) whose lock is free. Never follows a symlink: a symlinked space
    directory or node is reported and left alone."""
    now = time.time() if now is None else now
    report = SweepReport()
    root = state_dir / "auto-memory"
    if not _is_real_directory(root):
        return report
    for leaf in sorted(os.scandir(root), key=lambda entry: entry.name):
        if not leaf.is_dir(follow_symlinks=False):
            report.ignored.append(leaf.path)
            continue
        for entry in sorted(os.scandir(leaf.path), key=lambda entry: entry.name):
            if not NODE_NAME.fullmatch(entry.name):
                continue
            if not entry.is_dir(follow_symlinks=False):
                report.ignored.append(entry.path)
                continue
            node = Node(leaf=Path(leaf.path), name=entry.name)
            if now - _last_used(node) < NODE_MAX_AGE_SECONDS:
                continue
            try:
                with node_locked(node):
                    _node_remove(node)
            except MirrorNodeBusy:
                report.busy.append(entry.path)
                continue
            report.reaped.append(entry.path)
    return report


def _last_used(node: Node) -> float:
    times = [node.directory.lstat().st_mtime]
    if os.path.lexists(node.lock):
        times.append(node.lock.lstat().st_mtime)
    return max(times)


def _node_remove(node: Node) -> None:
    """Call holding the node's lock. shutil.rmtree removes a symlink inside the tree as a
    link (its fd-based walk never follows one)."""
    if _is_real_directory(node.directory):
        shutil.rmtree(node.directory)
    node.manifest.unlink(missing_ok=True)
    node.lock.unlink(missing_ok=True)


def _is_real_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except FileNotFoundError:
        return False
