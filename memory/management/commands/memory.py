"""`manage.py memory <subcommand>`: the memory spaces from a terminal or a script.

Every subcommand but `reconcile` names one space with the space flags and reaches it either
here, through the same services and selectors as the REST routes (so it meets every refusal
they have, on the store MEMORY_STORE names), or with `--remote URL` over those routes
(`memory.cli`). `--json` prints the routes' JSON shapes, refusals included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from memory.api.spaces import SpaceUsageApi
from memory.bots import bot_get
from memory.cli import (
    ArchiveUpload,
    LocalSpaceClient,
    RemoteRefusal,
    RemoteSpaceClient,
    RemoteUnreachable,
    SpaceClient,
)
from memory.errors import ArchiveInvalid
from memory.mirror import (
    LocalMirrorSpace,
    MirrorSpace,
    RemoteMirrorSpace,
    auto_memory_resolve,
    mirror_hydrate,
    mirror_release,
    mirror_sweep,
    mirror_sync_back,
    node_name_new,
    project_root,
)
from memory.spaces.archive import ImportStrategy
from memory.spaces.handle import QUALIFIERS, USER_BOUND, SpaceHandle, space_handle_parse
from memory.spaces.quotas import store_get
from memory.spaces.selectors import space_usages_of_tenant
from memory.spaces.services import SpaceWriter, WriterKind
from memory_project.api.exceptions import error_body
from memory_project.env import base_url_problem
from workspaces.api.headers import MAX_HEADER_DIGITS, whole_number
from workspaces.errors import DomainError, InvalidHeader, NotFound
from workspaces.models import Team, TeamMembership, User

EXIT_CODES = (
    "Exit codes: 0 done; 1 refused (the message names the refusal's code and what to do, "
    "and nothing was changed), or stdout closed or full; 2 usage (a malformed command line or "
    "space flags); 130 interrupted (Ctrl-C)."
)
MIRROR_EXIT_CODES = (
    "Exit codes: 0 done (or auto-memory off: nothing to do); 1 refused, nothing changed; "
    "2 usage; 3 sync-back done except for the files it reports as not stored; 130 "
    "interrupted (Ctrl-C)."
)
SPACE_FLAGS = ("visibility", "name", *QUALIFIERS)
# The refusals whose fix is in the command line itself: usage, not a refusal.
USAGE_CODES = frozenset({"SPACE_INVALID", "VALIDATION_FAILED", "AUTO_MEMORY_VALUE_INVALID"})
_TOKEN_HINT = "check --token or MEMORY_REMOTE_TOKEN (a personal access token of the person acting)"
# The mirror acts as a bot: a person's token is the very mistake its refusal should name.
_BOT_TOKEN_HINT = (
    "check --token or MEMORY_REMOTE_TOKEN (the bot's token, from POST /api/v1/bots/{id}/tokens)"
)


class Refused(CommandError):
    """Exit 1: the space or the server refused; nothing changed."""


class UsageError(CommandError):
    """Exit 2: the command line cannot be run as given."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=2)


class StdoutUnwritable(Exception):
    """stdout takes no more output: its reader left early (`| head -1`), or it is full (`>
    /dev/full`). Told apart from any other OSError, which is no fault of stdout's."""


@contextmanager
def _stdout_writes() -> Iterator[None]:
    try:
        yield
    except OSError as error:
        raise StdoutUnwritable(error.strerror) from error


class _Stdout(OutputWrapper):
    def write(  # type: ignore[override]  # as OutputWrapper's own (django-stubs)
        self,
        msg: str = "",
        style_func: Callable[[str], str] | None = None,
        ending: str | None = None,
    ) -> None:
        with _stdout_writes():
            super().write(msg, style_func, ending)

    def flush(self) -> None:
        with _stdout_writes():
            super().flush()


def _hint(
    code: str, detail: dict[str, Any], subcommand: str, *, routes_missing: bool = False
) -> str | None:
    """What to do about a refusal of `subcommand`, from its detail; None when its message
    says it all. `routes_missing`: a remote 404 from a URL with no memory routes under it."""
    if routes_missing:
        return (
            "the server has no memory routes under that URL: it is not this API, or not at "
            "that path; check --remote (the server's address, like https://host:port, "
            "without /api/v1)"
        )
    match code:
        case "VERSION_CONFLICT" if subcommand == "import":
            # Another write to the space between the import's plan and its write.
            return (
                f"{detail.get('path')} changed while the archive was being imported; nothing "
                "was imported; run the import again"
            )
        case "VERSION_CONFLICT":
            revision = detail.get("currentVersion")
            return (
                f"the document is at revision {revision}; re-read it and retry with "
                f"--base-version {revision}"
            )
        case "BASE_VERSION_REQUIRED":
            return (
                "pass --base-version N, the revision you read (0 creates the document; "
                "`memory ls` shows each revision)"
            )
        case "NOT_FOUND" if "field" not in detail and subcommand in {"cat", "put", "rm"}:
            return "no such document in this space; check PATH and the space flags (`memory ls`)"
        case "INVALID_DOCUMENT_PATH":
            if "target" in detail:
                return (
                    f"the renamed copy of {detail.get('path')} would be an invalid path "
                    f"({detail.get('reason')}); shorten its name in the archive, or import "
                    "with another --strategy"
                )
            if "canonical" in detail:
                return f"use the path's one spelling, {detail['canonical']!r}"
            return f"the path is not valid ({detail.get('reason')}); choose another"
        case "DOCUMENT_TOO_LARGE":
            return (
                f"the document is {detail.get('bytes')} bytes, over the ceiling of "
                f"{detail.get('limitBytes')}; split it into smaller documents"
            )
        case "SPACE_QUOTA_EXCEEDED" | "TENANT_QUOTA_EXCEEDED":
            whose = "space holds" if code == "SPACE_QUOTA_EXCEEDED" else "team's spaces hold"
            return (
                f"the {whose} {detail.get('usedBytes')} of {detail.get('quotaBytes')} "
                f"bytes and this adds {detail.get('deltaBytes')}; remove documents "
                "(`memory rm`) or ask an operator for a larger quota"
            )
        case "SECRET_DETECTED":
            return (
                f"{detail.get('path')} line {detail.get('line')} looks like a credential "
                f"({detail.get('rule')}); remove it and retry"
            )
        case "SPACE_INVALID":
            return (
                f"--{detail.get('field')} does not name a valid space ({detail.get('reason')}); "
                "see --help for the flags each visibility takes"
            )
        case "AUTO_MEMORY_VALUE_INVALID":
            return "--auto-memory is on, off, true, false, 1, 0 or blank (C131)"
        case "MIRROR_NOT_HYDRATED":
            return "run `memory mirror hydrate` first; nothing was synced"
        case "MIRROR_NODE_BUSY":
            return "another process is using this node; retry when it is done"
        case "INVALID_TEXT":
            return f"{detail.get('path')} is not UTF-8 text; convert it and retry"
        case "DOCUMENT_UNREADABLE":
            return (
                f"{detail.get('path')} at revision {detail.get('revision')} fails its integrity "
                "check (altered where it is stored); put a good copy over it, or remove it "
                "(`memory rm`), and retry"
            )
        case "AUTO_MEMORY_SPACE_RESERVED":
            return (
                "only the auto-memory mirror writes a space named auto-memory; choose another "
                "--name"
            )
        case "GLOBAL_SPACE_WRITE_DENIED":
            return "only a superuser may change the global space; act as one"
        case "STORE_BUSY" | "STORE_UNAVAILABLE" | "RATE_LIMITED":
            return "nothing was written; retry in a moment"
        case "ARCHIVE_INVALID":
            return (
                f"the archive is refused ({detail.get('reason')}"
                + (f" at {detail['entry']}" if "entry" in detail else "")
                + "); nothing was imported"
            )
        case "ARCHIVE_CHECKSUM_MISMATCH":
            return (
                f"{detail.get('entry')} does not match its checksum; the archive is damaged, "
                "export it again; nothing was imported"
            )
        case (
            "AUTHENTICATION_REQUIRED"
            | "TOKEN_INVALID"
            | "TOKEN_EXPIRED"
            | "TOKEN_REVOKED"
            | "TOKEN_SCOPE_REFUSED"
        ):
            return _BOT_TOKEN_HINT if subcommand == "mirror" else _TOKEN_HINT
    return None


class Command(BaseCommand):
    help = (
        "Memory spaces from the command line: du, ls, cat, put, rm, export, import on one "
        "space (locally, or with --remote URL over the REST API), and reconcile. " + EXIT_CODES
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.epilog = EXIT_CODES
        output = CommandParser(add_help=False)
        output.add_argument(
            "--json", action="store_true", help="Print the result (or refusal) as JSON."
        )
        space = CommandParser(add_help=False, parents=[output])
        flags = space.add_argument_group("space")
        flags.add_argument("--team", type=int, help="The team's id (local mode).")
        flags.add_argument(
            "--visibility", help="private, bot, project, cross_project, user, org or global."
        )
        flags.add_argument("--name", help="The space's name.")
        flags.add_argument("--project", help="For bot and project spaces.")
        flags.add_argument("--bot", help="For bot spaces.")
        flags.add_argument("--run", help="For private spaces.")
        flags.add_argument(
            "--user",
            metavar="USERNAME",
            help=(
                "Local mode: the person acting (needed to write; a member of --team) and "
                "whose private or user space it is."
            ),
        )
        _remote_flags(
            space.add_argument_group("remote"),
            whose="A personal access token",
        )

        subcommands = parser.add_subparsers(dest="subcommand", required=True)

        def add(name: str, parents: list[CommandParser], summary: str) -> CommandParser:
            return subcommands.add_parser(
                name, parents=parents, help=summary, description=summary, epilog=EXIT_CODES
            )

        add(
            "du",
            [space],
            "Usage and quotas of one space; with only --team, of every space of the team.",
        )
        ls = add("ls", [space], "List the space's documents with their revisions.")
        ls.add_argument("--dir", default="", help="Only under this directory.")
        cat = add("cat", [space], "Print one document.")
        cat.add_argument("path", metavar="PATH")
        put = add("put", [space], "Create or replace one document.")
        put.add_argument("path", metavar="PATH")
        put.add_argument(
            "--file", default="-", help="Read the body from FILE (- or absent: stdin)."
        )
        put.add_argument(
            "--base-version", type=_revision, help="The revision you read; 0 creates the document."
        )
        rm = add("rm", [space], "Delete one document.")
        rm.add_argument("path", metavar="PATH")
        rm.add_argument("--base-version", type=_revision, help="The revision you read.")
        export = add("export", [space], "Write the space to an iterion.memory.v1 archive.")
        export.add_argument(
            "--out", required=True, metavar="FILE", help="Write the archive to FILE (-: stdout)."
        )
        archive_import = add("import", [space], "Import an iterion.memory.v1 archive.")
        archive_import.add_argument(
            "--in", dest="archive", required=True, metavar="FILE", help="Read FILE (-: stdin)."
        )
        archive_import.add_argument(
            "--strategy",
            choices=[strategy.value for strategy in ImportStrategy],
            default=ImportStrategy.SKIP.value,
            help="What to do with a document the space already has (default skip).",
        )
        archive_import.add_argument(
            "--dry-run", action="store_true", help="Answer the plan; write nothing."
        )
        self.add_mirror(add, output)
        add(
            "reconcile",
            [output],
            "Recompute every space and tenant byte counter from the documents, fix the ones "
            "that drifted, and print the drift found for each (local only).",
        )

    def add_mirror(
        self, add: Callable[[str, list[CommandParser], str], CommandParser], output: CommandParser
    ) -> None:
        flags = CommandParser(add_help=False, parents=[output])
        flags.add_argument("--team", type=int, help="Local mode: the bot's team id.")
        flags.add_argument("--bot", help="Local mode: the bot's id (remotely, the token's bot).")
        flags.add_argument(
            "--project",
            help="The project (default: the last segment of the git root of --cwd).",
        )
        flags.add_argument("--cwd", default=".", help="The working directory (default: here).")
        flags.add_argument(
            "--state-dir",
            type=Path,
            default=settings.AUTO_MEMORY_STATE_DIR,
            help="Where nodes live (default AUTO_MEMORY_STATE_DIR).",
        )
        flags.add_argument(
            "--auto-memory",
            metavar="VALUE",
            help="The switch's highest level: on, off, true, false, 1, 0 or blank.",
        )
        _remote_flags(flags, whose="The bot's token")
        named = CommandParser(add_help=False, parents=[flags])
        named.add_argument("--node", required=True, help="The node (node-XXXX) hydrate named.")
        mirror = add(
            "mirror", [], "The auto-memory mirror of a bot space: " + MIRROR_EXIT_CODES
        ).add_subparsers(dest="mirror_action", required=True)

        def action(name: str, parents: list[CommandParser], summary: str) -> CommandParser:
            return mirror.add_parser(
                name, parents=parents, help=summary, description=summary, epilog=MIRROR_EXIT_CODES
            )

        hydrate = action(
            "hydrate", [flags], "Materialise the space into a node directory; print its path."
        )
        hydrate.add_argument("--node", help="Re-hydrate this node (default: a new one).")
        action("sync-back", [named], "Fold the node's edits back into the space.")
        action("release", [named], "Remove the node (fine when already removed).")
        action(
            "sweep",
            [output, CommandParser(add_help=False)],
            "Remove nodes idle over 48 hours whose lock is free.",
        ).add_argument(
            "--state-dir",
            type=Path,
            default=settings.AUTO_MEMORY_STATE_DIR,
            help="Where nodes live (default AUTO_MEMORY_STATE_DIR).",
        )

    def execute(self, *args: Any, **options: Any) -> str | None:
        """The command, ended without a traceback by Ctrl-C, or by a stdout that is closed
        (`>&-`), full, or whose reader left early (`| head -1`)."""
        if sys.stdout is None:
            # Python's stdout when descriptor 1 was closed: checked before anything is done,
            # as the command's result could not be told.
            raise Refused("stdout is closed; nothing was done")
        if not options.get("stdout"):
            self.stdout = _Stdout(sys.stdout)
        try:
            result = super().execute(*args, **options)
            # Flushed here, a failing stdout is met below, not in the interpreter's exit.
            self.stdout.flush()
        except KeyboardInterrupt:
            raise CommandError(
                "interrupted: a write already sent may have been stored; check with `memory ls`",
                returncode=130,
            ) from None
        except StdoutUnwritable as error:
            # Python's advice: stdout at /dev/null, so that the exit's flush does not fail too.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            if isinstance(error.__cause__, BrokenPipeError):
                raise Refused("stdout was closed before all the output was written") from None
            raise Refused(f"cannot write to stdout: {error}") from None
        return result

    def handle(self, *args: Any, **options: Any) -> None:
        self.as_json = bool(options["json"])
        try:
            if options["subcommand"] == "reconcile":
                self.reconcile()
            elif options["subcommand"] == "mirror":
                MirrorCommand(self, options).run()
            elif options["subcommand"] == "du" and _names_no_space(options):
                self.du_team(options)
            else:
                actions: dict[str, Callable[[SpaceClient, dict[str, Any]], None]] = {
                    "du": self.du,
                    "ls": self.ls,
                    "cat": self.cat,
                    "put": self.put,
                    "rm": self.rm,
                    "export": self.export,
                    "import": self.import_,
                }
                actions[options["subcommand"]](self.client(options), options)
        except DomainError as error:
            raise self.refusal(
                error.code, error.message, error.detail, subcommand=options["subcommand"]
            ) from None
        except RemoteRefusal as error:
            raise self.refusal(
                error.code,
                error.message,
                error.detail,
                subcommand=options["subcommand"],
                routes_missing=error.routes_missing,
            ) from None
        except RemoteUnreachable as error:
            raise Refused(f"cannot reach the server: {error}") from None

    def refusal(
        self,
        code: str,
        message: str,
        detail: dict[str, Any],
        *,
        subcommand: str,
        routes_missing: bool = False,
    ) -> CommandError:
        if self.as_json:
            self.stdout.write(json.dumps(error_body(code, message, detail)))
        hint = _hint(code, detail, subcommand, routes_missing=routes_missing)
        text = f"{code}: {hint}" if hint else f"{code}: {message}"
        # A document's text refused (a NUL in `content`) is the file's fault, not the command
        # line's: a refusal, as a file that is not UTF-8 is.
        is_usage = code in USAGE_CODES and "content" not in detail.get("fields", {})
        return UsageError(text) if is_usage else Refused(text)

    # Which space, and how it is reached

    def client(self, options: dict[str, Any]) -> SpaceClient:
        space = {flag: options[flag] for flag in SPACE_FLAGS if options[flag] is not None}
        if options["remote"]:
            return self.remote_client(options, space)
        user = _user_get(options["user"])
        team = _team_get(options["team"], user)
        if space.get("visibility") in USER_BOUND and user is None:
            raise UsageError(f"--user USERNAME names whose {space['visibility']} space this is.")
        handle = space_handle_parse(
            space,
            tenant_id=team.pk if team else None,
            # Read only for the user-bound visibilities, which need --user (above).
            user_id=user.pk if user else 0,
        )
        if handle.tenant_id is None and not handle.is_global:
            raise UsageError(f"--team ID names the team whose {handle.visibility} space this is.")
        if options["subcommand"] in {"put", "rm", "import"} and user is None:
            raise UsageError("--user USERNAME names who writes; a local write needs one.")
        writer = (
            SpaceWriter(
                kind=WriterKind.USER,
                ident=str(user.pk),
                tenant_id=team.pk if team else None,
                user=user,
            )
            if user
            else None
        )
        return LocalSpaceClient(handle=handle, writer=writer)

    def remote_client(self, options: dict[str, Any], space: dict[str, str]) -> SpaceClient:
        if problem := base_url_problem(options["remote"]):
            raise UsageError(f"--remote is not a base URL: {problem}.")
        if options["team"] is not None or options["user"] is not None:
            raise UsageError(
                "--team and --user are for local mode; remotely the token names the team and "
                "the person."
            )
        if not options["token"]:
            raise UsageError("--remote needs --token TOKEN or MEMORY_REMOTE_TOKEN.")
        return RemoteSpaceClient(base_url=options["remote"], token=options["token"], space=space)

    # Subcommands

    def du(self, client: SpaceClient, options: dict[str, Any]) -> None:
        usage = client.usage()
        if self.as_json:
            return self.emit(usage)
        space = usage["space"]
        self.stdout.write(f"space  {space['id']}")
        self.stdout.write(f"used   {_share(usage['usedBytes'], usage['quotaBytes'])}")
        if space["visibility"] != "global":
            self.stdout.write(
                f"team   {_share(usage['tenantUsedBytes'], usage['tenantQuotaBytes'])}"
            )

    def du_team(self, options: dict[str, Any]) -> None:
        if options["remote"]:
            raise UsageError(
                "du of a whole team is local only; remotely name one space with "
                "--visibility and --name."
            )
        if options["team"] is None:
            raise UsageError("du needs --team ID, or the space flags of one space.")
        team = _team_get(options["team"], None)
        assert team is not None
        reports = space_usages_of_tenant(tenant_id=team.pk)
        if self.as_json:
            usages = [SpaceUsageApi.OutputSerializer(report).data for report in reports]
            return self.emit({"team": team.pk, "spaces": usages})
        rows = [
            (
                report.handle.visibility.value,
                report.handle.name,
                _qualifiers(report.handle),
                str(report.used_bytes),
                _quota(report.quota_bytes),
                _percent(report.used_bytes, report.quota_bytes),
            )
            for report in reports
        ]
        self.table(("VISIBILITY", "NAME", "QUALIFIERS", "USED", "QUOTA", "USE"), rows)
        if reports:
            total = _share(reports[0].tenant_used_bytes, reports[0].tenant_quota_bytes)
            self.stdout.write(f"team {team.pk}: {total}")
        else:
            self.stdout.write(f"team {team.pk} has no memory space holding a document.")

    def ls(self, client: SpaceClient, options: dict[str, Any]) -> None:
        listing = client.documents(directory=options["dir"])
        if self.as_json:
            return self.emit(listing)
        rows = [
            (
                document["path"],
                str(document["revision"]),
                str(document["size"]),
                document["updatedBy"],
                document["updatedAt"],
                document["title"],
            )
            for document in listing["documents"]
        ]
        self.table(("PATH", "REV", "BYTES", "UPDATED BY", "UPDATED AT", "TITLE"), rows)

    def cat(self, client: SpaceClient, options: dict[str, Any]) -> None:
        document = client.read(path=options["path"])
        if self.as_json:
            return self.emit(document)
        self.stdout.write(document["content"], ending="")
        if sys.stderr.isatty():
            self.stderr.write(f"(revision {document['revision']})")

    def put(self, client: SpaceClient, options: dict[str, Any]) -> None:
        body = _input_read(options["file"])
        meta = client.write(path=options["path"], body=body, base_version=options["base_version"])
        if self.as_json:
            return self.emit(meta)
        self.stdout.write(
            f"wrote {meta['path']} at revision {meta['revision']} ({meta['size']} bytes)"
        )

    def rm(self, client: SpaceClient, options: dict[str, Any]) -> None:
        client.delete(path=options["path"], base_version=options["base_version"])
        if self.as_json:
            return self.emit({"path": options["path"], "deleted": True})
        self.stdout.write(f"deleted {options['path']}")

    def export(self, client: SpaceClient, options: dict[str, Any]) -> None:
        to_stdout = options["out"] == "-"
        if to_stdout and self.as_json:
            raise UsageError("--json writes its report to stdout, which --out - gives the archive")
        if to_stdout and sys.stdout.isatty():
            raise UsageError(
                "will not write an archive to a terminal: redirect it or use --out FILE"
            )
        target = Path(options["out"])
        with _stdout_spool() if to_stdout else _replacing(target) as out:
            with self.progress("export") as progress:
                summary = client.export(out=out, progress=progress)
            archive_bytes = out.tell()
        report = {"file": str(target), "archiveBytes": archive_bytes, **summary}
        if self.as_json:
            return self.emit(report)
        # With the archive on stdout, what the export says goes to stderr.
        say = self.stderr if to_stdout else self.stdout
        say.write(
            f"exported {summary['docCount']} document(s), {summary['docBytes']} bytes, to "
            f"{'stdout' if to_stdout else target} ({archive_bytes} bytes)"
        )
        for path in summary["unaddressable"]:
            self.stderr.write(f"not exported, its path is no longer valid: {path}")
        for path in summary["unreadable"]:
            self.stderr.write(f"not exported, its stored body is not UTF-8: {path}")

    def import_(self, client: SpaceClient, options: dict[str, Any]) -> None:
        source = Path(options["archive"])
        try:
            archive = _archive_open(source)
        except OSError as error:
            raise UsageError(f"cannot read {source}: {error.strerror}") from None
        with archive, self.progress("import") as progress:
            upload = ArchiveUpload(
                file=archive,
                size=os.fstat(archive.fileno()).st_size,
                strategy=ImportStrategy(options["strategy"]),
                dry_run=options["dry_run"],
            )
            report = client.import_archive(upload, progress=progress)
        if self.as_json:
            return self.emit(report)
        prefix = "dry run, nothing written: would have " if options["dry_run"] else ""
        self.stdout.write(
            f"{prefix}imported {report['imported']}, replaced {report['replaced']}, "
            f"skipped {report['skipped']}, renamed {report['renamed']}"
        )
        for entry in report["ignored"]:
            self.stdout.write(f"ignored (outside docs/): {entry}")

    def reconcile(self) -> None:
        drifts = store_get().reconcile()
        fixed = sum(1 for drift in drifts if drift.drift != 0)
        if self.as_json:
            counters = [
                {
                    "scope": drift.scope,
                    "drift": drift.drift,
                    "recorded": drift.recorded,
                    "actual": drift.actual,
                }
                for drift in drifts
            ]
            return self.emit({"counters": counters, "fixed": fixed})
        for drift in drifts:
            self.stdout.write(
                f"{drift.scope}\tdrift {drift.drift}\trecorded {drift.recorded}\t"
                f"actual {drift.actual}"
            )
        self.stdout.write(f"{len(drifts)} counter(s) checked, {fixed} fixed.")

    # Output

    def emit(self, data: Any) -> None:
        self.stdout.write(json.dumps(data, ensure_ascii=False, sort_keys=True))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
        for row in (header, *rows):
            self.stdout.write(
                "  ".join(
                    cell.ljust(width) for cell, width in zip(row, widths, strict=True)
                ).rstrip()
            )

    @contextmanager
    def progress(self, label: str) -> Iterator[Callable[[int, int], None]]:
        """A progress bar on stderr while the block runs; quiet when either stream is not a
        terminal, or with --json, so scripts and pipes see only the result."""
        quiet = self.as_json or not (sys.stdout.isatty() and sys.stderr.isatty())
        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            console=Console(stderr=True),
            disable=quiet,
            transient=True,
        )
        with bar:
            task = bar.add_task(label, total=None)

            def report(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total or None)

            yield report


class MirrorCommand:
    """`memory mirror ...`: one action on one node of the acting bot's auto-memory space."""

    def __init__(self, command: Command, options: dict[str, Any]) -> None:
        self.command, self.options = command, options
        self.state_dir: Path = options["state_dir"]

    def run(self) -> None:
        self.state_dir_check()
        action = self.options["mirror_action"]
        if action == "sweep":
            return self.report(mirror_sweep(state_dir=self.state_dir).as_json(), "sweep")
        space, levels = self.space()
        if action == "release":
            released = mirror_release(
                state_dir=self.state_dir, space_id=space.space_id, node_name=self.options["node"]
            )
            return self.report({"node": self.options["node"], "released": released}, action)
        switch = auto_memory_resolve(
            flag=self.options["auto_memory"],
            bot=levels["bot"],
            team=levels["team"],
            environment=settings.AUTO_MEMORY,
        )
        if not switch.enabled:
            return self.report({"switch": switch.as_json()}, "off")
        if action == "hydrate":
            node = self.options["node"] or node_name_new()
            hydrated = mirror_hydrate(space=space, state_dir=self.state_dir, node_name=node)
            return self.report(
                {"switch": switch.as_json(), "node": node, **hydrated.as_json()}, action
            )
        synced = mirror_sync_back(
            space=space, state_dir=self.state_dir, node_name=self.options["node"]
        )
        self.report({"switch": switch.as_json(), **synced.as_json()}, action)
        if synced.errors:
            raise CommandError(
                f"{len(synced.errors)} file(s) not stored; each is reported above.", returncode=3
            )

    def state_dir_check(self) -> None:
        """--state-dir holds as AUTO_MEMORY_STATE_DIR, which it overrides, must: absolute (a
        relative one would be another state in each working directory, and sync-back would
        not find the node hydrate made), and a directory or one the mirror can create. Else
        the command line is wrong, which the mirror's own refusal would not say."""
        given = self.state_dir
        if not given.is_absolute():
            raise UsageError(f"--state-dir {given}: must be an absolute path.")
        not_a_directory = given if given.exists() else given.parent
        if not not_a_directory.is_dir():
            raise UsageError(f"--state-dir {given}: {not_a_directory} is not a directory.")

    def space(self) -> tuple[MirrorSpace, dict[str, str]]:
        """The acting bot's auto-memory space for the project, and the bot's and the team's
        levels of the switch."""
        options = self.options
        project = options["project"]
        if project is None:
            root = project_root(Path(options["cwd"]))
            if root is None:
                raise UsageError(
                    f"{options['cwd']} is not inside a git repository; pass --project."
                )
            project = root.name
        if options["remote"]:
            if problem := base_url_problem(options["remote"]):
                raise UsageError(f"--remote is not a base URL: {problem}.")
            if options["team"] is not None or options["bot"] is not None:
                raise UsageError(
                    "--team and --bot are for local mode; remotely the token names the bot."
                )
            if not options["token"]:
                raise UsageError("--remote needs --token TOKEN (the bot's) or MEMORY_REMOTE_TOKEN.")
            remote = RemoteMirrorSpace(
                base_url=options["remote"], token=options["token"], project=project
            )
            return remote, remote.describe()["autoMemory"]
        if options["team"] is None or options["bot"] is None:
            raise UsageError("local mode needs --team ID and --bot ID (or --remote URL).")
        team = _team_get(options["team"], None)
        assert team is not None
        bot = bot_get(team=team, slug=options["bot"])
        levels = {"bot": bot.auto_memory, "team": team.auto_memory_default}
        return LocalMirrorSpace(bot=bot, project=project), levels

    def report(self, data: dict[str, Any], action: str) -> None:
        if self.command.as_json:
            return self.command.emit(data)
        out, err = self.command.stdout, self.command.stderr
        if action == "off":
            out.write(
                f"auto-memory is off (decided by the {data['switch']['level']} level); "
                "nothing to do"
            )
        elif action == "hydrate":
            out.write(data["directory"])
            err.write(
                f"node {data['node']}: {len(data['written'])} document(s) written, "
                f"{len(data['pruned'])} pruned (on by the {data['switch']['level']} level)"
            )
            for path in data["skipped"]:
                err.write(f"skipped, its stored path is not canonical: {path}")
            for error in data["errors"]:
                err.write(f"not written: {error['path']}: {error['message']}")
        elif action == "sync-back":
            out.write(
                f"{len(data['written'])} written, {len(data['deleted'])} deleted, "
                f"{data['unchanged']} unchanged"
            )
            if not data["walkComplete"]:
                err.write("the walk did not see every directory: nothing was deleted")
            for skipped in data["skipped"]:
                err.write(f"skipped ({skipped['reason']}): {skipped['path']}")
            for error in data["errors"]:
                err.write(
                    f"not stored: {error['path'] or '.'}: {error['code']}: {error['message']}"
                )
        elif action == "release":
            out.write(
                f"released {data['node']}" if data["released"] else f"{data['node']} was not there"
            )
        else:
            for path in data["reaped"]:
                out.write(f"reaped {path}")
            for path in data["busy"]:
                err.write(f"kept, its lock is held: {path}")
            for path in data["ignored"]:
                err.write(f"left alone, not a directory: {path}")


def _remote_flags(group: Any, *, whose: str) -> None:
    group.add_argument(
        "--remote",
        metavar="URL",
        default=settings.MEMORY_REMOTE_URL,
        help="Go over the REST API of this server (default MEMORY_REMOTE_URL).",
    )
    group.add_argument(
        "--token",
        default=settings.MEMORY_REMOTE_TOKEN,
        help=f"{whose} for --remote (default MEMORY_REMOTE_TOKEN).",
    )


def _revision(value: str) -> int:
    """--base-version as the routes take X-Base-Version: a whole number of at most 18 digits.
    Parsed here, a value out of range is the same usage error in both modes, not a conflict
    locally and INVALID_HEADER remotely."""
    message = f"a revision is a whole number from 0 (creates) to {10**MAX_HEADER_DIGITS - 1}"
    try:
        return whole_number(value.strip(), header="X-Base-Version", message=message)
    except InvalidHeader:
        raise argparse.ArgumentTypeError(f"{message}, not {value!r}") from None


def _names_no_space(options: dict[str, Any]) -> bool:
    return all(options[flag] is None for flag in SPACE_FLAGS)


def _user_get(username: str | None) -> User | None:
    if username is None:
        return None
    user = User.objects.filter(username=username, is_active=True).first()
    if user is None:
        raise NotFound(f"No active user {username!r}; check --user.", field="user")
    return user


def _team_get(team_id: int | None, user: User | None) -> Team | None:
    if team_id is None:
        return None
    team = Team.objects.filter(pk=team_id).first()
    if team is None:
        raise NotFound(f"No team {team_id}; check --team.", field="team")
    if user is not None and not TeamMembership.objects.filter(team=team, user=user).exists():
        raise NotFound(
            f"{user.username} is not a member of team {team_id}; act as a member with --user.",
            field="user",
        )
    return team


def _input_read(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as error:
        raise UsageError(f"cannot read {name}: {error.strerror}") from None


def _archive_open(source: Path) -> BinaryIO:
    """The archive at `source` (`-`: stdin), as a file whose size is known: a pipe's
    (`/dev/stdin`, a FIFO) is 0 to fstat, so it is copied to a temporary file first, where an
    upload can declare its length. The copy stops at twice the import's bound (gzip adds a
    few bytes per 64 KiB to what it stores, so a larger archive inflates past the bound): a
    pipe that never ends does not fill the disk."""
    # `-` is stdin, opened anew so that closing the archive leaves sys.stdin open.
    if str(source) == "-":
        if sys.stdin.isatty():
            raise UsageError(
                "will not read an archive from a terminal: pipe one in or use --in FILE"
            )
        archive = open(sys.stdin.fileno(), "rb", closefd=False)  # noqa: SIM115 (as below)
    else:
        archive = source.open("rb")
    if stat.S_ISREG(os.fstat(archive.fileno()).st_mode):
        return archive
    limit = settings.MEMORY_IMPORT_MAX_BYTES
    copy = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    with archive:
        while chunk := archive.read(1024 * 1024):
            copy.write(chunk)
            if copy.tell() > 2 * limit:
                copy.close()
                raise ArchiveInvalid(reason="too_large", limitBytes=limit)
    copy.seek(0)
    return copy


@contextmanager
def _stdout_spool() -> Iterator[Any]:
    """A temporary file copied to stdout when the block ends, and dropped if it raises: a
    refused export writes nothing to stdout, as it leaves no file behind (`_replacing`)."""
    with tempfile.TemporaryFile() as spool:
        yield spool
        spool.seek(0)
        with _stdout_writes():
            shutil.copyfileobj(spool, sys.stdout.buffer)
            sys.stdout.buffer.flush()


@contextmanager
def _replacing(target: Path) -> Iterator[Any]:
    """A file beside `target` that replaces it when the block ends, and vanishes if the
    block raises: a refused export leaves no file, never a part of one. Only a file (or a
    name not yet taken) is replaced: the rename would put a file in place of a device
    (`/dev/stdout`, for root), a FIFO or a socket, and cannot replace a directory."""
    if target.exists() and not target.is_file():
        raise UsageError(f"cannot write {target}: not a regular file")
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as error:
        raise UsageError(f"cannot write {target}: {error.strerror}") from None
    try:
        with os.fdopen(handle, "w+b") as out:
            yield out
        try:
            os.replace(temporary, target)
        except OSError as error:  # a file that may not be replaced
            raise UsageError(f"cannot write {target}: {error.strerror}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _qualifiers(handle: SpaceHandle) -> str:
    axes = [(axis, getattr(handle, axis)) for axis in QUALIFIERS]
    axes.append(("user", "" if handle.user_id is None else handle.user_id))
    return " ".join(f"{axis}={value}" for axis, value in axes if value != "")


def _quota(quota: int) -> str:
    return str(quota) if quota else "no cap"


def _percent(used: int, quota: int) -> str:
    return f"{100 * used / quota:.1f}%" if quota else "-"


def _share(used: int, quota: int) -> str:
    return f"{used} of {_quota(quota)} bytes ({_percent(used, quota)})"
