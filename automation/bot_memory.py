"""A bot's memory tools: the one gate from a bot credential to its space, and the three
tools `memory_read`, `memory_list` and `memory_write` that the MCP server and the REST
routes for bots both call.

The gate (`bot_memory_access`) resolves, from the bot alone, the space its spec names
(`memory.bots.memory_spec_space`; a `private` space needs the run) and what the spec lets
it do: `read:` (default on) gates read and list, `write:` (default on) gates write. No
argument of a tool names a space, so a bot reaches only its own spec's space.

Every tool goes through the memory-spaces service, so a bot's read and write meet the
same path rule, ceiling, secret scan and quotas as a person's; its writes are attributed
`bot:<id>`. A write is based on the revision the bot last read, listed or wrote at that
path (`BotDocumentSeen`): if the document changed since, whoever changed it, the write is
refused (`MEMORY_WRITE_STALE`) with a message telling the model to read it again. What a bot
has seen is kept per run (the runtime's `X-Memory-Run`, or `run` over REST): two runs of
one bot working at once each write over what they themselves read.

Results are the short plain text a model reads well: a document's text, one path a line
or `(empty)`, `written: <path> (N bytes, revision R)`.
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from automation.errors import (
    BotMemoryDisabled,
    BotMemoryToolDenied,
    BotMemoryUserUnavailable,
    MemoryWriteStale,
)
from automation.models import BotDocumentSeen
from memory.bots import memory_spec_space
from memory.spaces.handle import USER_BOUND, SpaceHandle
from memory.spaces.selectors import space_document_metas, space_document_read
from memory.spaces.services import SpaceWriter, WriterKind, space_document_write
from memory.spaces.store import DocumentMeta
from workspaces.errors import NotFound, VersionConflict
from workspaces.models import Bot, TeamMembership, User
from workspaces.paths import document_path_require_canonical
from workspaces.sql import starts_with

EMPTY_LISTING = "(empty)"


class BotMemoryTool(enum.StrEnum):
    READ = "memory_read"
    LIST = "memory_list"
    WRITE = "memory_write"


def bot_memory_tools(bot: Bot) -> tuple[BotMemoryTool, ...]:
    """The memory tools a bot's spec gives it, in a fixed order; none when its memory is
    off. What the MCP server lists for the bot: a read-only spec lists no write tool."""
    spec = bot.memory_spec
    if spec is None or not spec.get("enabled", True):
        return ()
    tools = []
    if spec.get("read", True):
        tools += [BotMemoryTool.READ, BotMemoryTool.LIST]
    if spec.get("write", True):
        tools.append(BotMemoryTool.WRITE)
    return tuple(tools)


@dataclass(frozen=True)
class BotMemoryAccess:
    """A bot, the space its spec names, the tools it may call there, and the run its calls
    come with ("" for none)."""

    bot: Bot
    spec: Mapping[str, Any]
    handle: SpaceHandle
    tools: tuple[BotMemoryTool, ...]
    run: str

    @functools.cached_property
    def seen_key(self) -> dict[str, Any]:
        """The columns of `BotDocumentSeen` that name this run's view of the bot's space."""
        return {
            "bot": self.bot,
            "space_digest": hashlib.sha256(self.handle.id.encode()).hexdigest(),
            # surrogatepass: a header or JSON string may carry a lone surrogate; it still
            # names a run.
            "run_digest": hashlib.sha256(
                self.run.encode("utf-8", errors="surrogatepass")
            ).hexdigest(),
        }

    def seen(self) -> QuerySet[BotDocumentSeen]:
        """What this run of the bot has seen in its space."""
        return BotDocumentSeen.objects.filter(**self.seen_key)

    @property
    def writer(self) -> SpaceWriter:
        return SpaceWriter(
            kind=WriterKind.BOT, ident=self.bot.slug, tenant_id=self.bot.team_id, user=None
        )

    def require(self, tool: BotMemoryTool) -> None:
        if tool not in self.tools:
            raise BotMemoryToolDenied(tool=tool.value)


def bot_memory_access(*, bot: Bot, issuer: User, run: str = "") -> BotMemoryAccess:
    """The gate: the space `bot`'s spec names (`run` completes a `private` one) and the
    tools it may call, for a token of the bot that `issuer` issued. BotMemoryDisabled
    without an enabled spec; SpaceInvalid for a `private` space without a valid run;
    BotMemoryUserUnavailable for a `user` or `private` space whose person is no longer an
    active member of the bot's team, or is not `issuer`: a person's own space reaches a bot
    only through a token that person issued, never through a co-owner's token of that bot."""
    spec = bot.memory_spec
    handle = None
    if spec is not None:
        handle = memory_spec_space(spec, team_id=bot.team_id, bot_slug=bot.slug, run=run)
    if spec is None or handle is None:
        raise BotMemoryDisabled()
    if handle.visibility in USER_BOUND and (
        handle.user_id != issuer.pk or not _member_active(bot, handle.user_id)
    ):
        raise BotMemoryUserUnavailable()
    return BotMemoryAccess(bot=bot, spec=spec, handle=handle, tools=bot_memory_tools(bot), run=run)


def _member_active(bot: Bot, user_id: int | None) -> bool:
    return (
        user_id is not None
        and TeamMembership.objects.filter(
            team_id=bot.team_id, user_id=user_id, user__is_active=True
        ).exists()
    )


def memory_read(*, access: BotMemoryAccess, path: str) -> str:
    """The document's text, and the revision read is what the bot's next write of it is
    based on. NotFound for a document that does not exist, which the bot has then seen as
    absent: its next write of the path creates it."""
    access.require(BotMemoryTool.READ)
    path = document_path_require_canonical(path)
    try:
        document = space_document_read(handle=access.handle, path=path)
    except NotFound:
        _seen_forget(access, prefix=None, paths=[path])
        raise
    _seen_record(access, [document.meta])
    # space_document_read refused a body that is not UTF-8 (DOCUMENT_UNREADABLE).
    return document.body.decode("utf-8")


def memory_list(*, access: BotMemoryAccess, path: str = "") -> str:
    """The paths under the directory `path` ("" for the whole space), one a line, or
    `(empty)`; each revision listed is what the bot's next write of that path is based on,
    and a path no longer listed is seen as absent."""
    access.require(BotMemoryTool.LIST)
    metas = space_document_metas(handle=access.handle, directory=path)
    with transaction.atomic():
        _seen_forget(access, prefix=path, paths=None)
        _seen_record(access, metas)
    return "\n".join(meta.path for meta in metas) or EMPTY_LISTING


def memory_write(*, access: BotMemoryAccess, path: str, content: str) -> str:
    """Create or replace the document at `path` with `content`, based on the revision the
    bot last read, listed or wrote there (none: create only). MemoryWriteStale when the
    document changed since; every refusal of the memory-spaces service otherwise."""
    access.require(BotMemoryTool.WRITE)
    path = document_path_require_canonical(path)
    seen = access.seen().filter(path=path).values_list("revision", flat=True).first()
    try:
        meta = space_document_write(
            handle=access.handle,
            path=path,
            # A lone surrogate, which JSON can carry, stays in the bytes so that the
            # service refuses it as INVALID_TEXT rather than this failing to encode.
            body=content.encode("utf-8", errors="surrogatepass"),
            expected_revision=seen or 0,
            writer=access.writer,
        )
    except VersionConflict as conflict:
        current = conflict.detail.get("currentVersion")
        raise MemoryWriteStale(
            f"{path} changed since you last read it (now revision {current}); nothing was "
            f"written. Call memory_read on {path} again and write your change over the "
            "text it returns.",
            path=path,
            currentRevision=current,
        ) from None
    _seen_record(access, [meta])
    return f"written: {meta.path} ({meta.size} bytes, revision {meta.revision})"


def _seen_record(access: BotMemoryAccess, metas: Sequence[DocumentMeta]) -> None:
    if not metas:
        return
    now = timezone.now()
    key = access.seen_key
    BotDocumentSeen.objects.bulk_create(
        [
            BotDocumentSeen(**key, path=meta.path, revision=meta.revision, seen_at=now)
            for meta in metas
        ],
        update_conflicts=True,
        unique_fields=[*key, "path"],
        update_fields=["revision", "seen_at"],
    )


def _seen_forget(
    access: BotMemoryAccess, *, prefix: str | None, paths: Sequence[str] | None
) -> None:
    """Forget what the bot saw at `paths`, or under the directory `prefix`."""
    seen = access.seen()
    if paths is not None:
        seen = seen.filter(path__in=paths)
    elif prefix:
        seen = seen.filter(starts_with("path", prefix + "/"))
    seen.delete()
