"""Bots' memory specs: the diagnostics a spec gets, the space it resolves to, and the one
service that saves a bot (a spec with an error diagnostic is never saved).

A spec is the `memory:` block of a bot: a JSON object with the fields of `SPEC_FIELDS`.
`memory_spec_diagnostics` is pure (no database), so the validate route, the service and
the admin form all judge a spec alike. The codes (docs/bots.md):

- C047 warning: a memory spec on a runtime that cannot call the memory tools (every runtime
  but `claw` and `mcp`).
- C048 error: the spec is enabled but names no complete space (no `visibility` and no
  legacy `scope`, or a qualifier the visibility needs is missing).
- C049 error: a field this spec does not have (ours; the seed has no code for it).
- C050 error: a field of the wrong type, or a value that cannot be a space's name,
  qualifier or autoload glob (ours).
- C051 error: a `user` other than the person saving the spec (ours; judged once the spec has
  no other error, as saving judges it: the validate route names the person asking).
- C131 error: an auto-memory value other than on/off/true/false/1/0/blank.
- C132 warning: auto-memory on for a runtime that ignores it (`kimi`, `grok`, `codex`).
- C170 error: an unknown `visibility`.
- C171 error: `visibility` together with the legacy `project_root`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.db.models import QuerySet

from memory.errors import AutoloadPatternInvalid, BotSlugTaken, BotSpecInvalid, SpaceInvalid
from memory.spaces.handle import USER_BOUND, SpaceHandle, Visibility, space_handle_parse
from memory.spaces.index import autoload_select
from workspaces.errors import NotFound
from workspaces.models import AuditAction, AutoMemorySetting, Bot, BotRuntime, Team, User
from workspaces.services import audit_record, team_owner_require
from workspaces.violations import violation_raises


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: Severity
    field: str  # a spec field, or `memory` / `auto_memory` for the whole setting
    message: str

    def as_json(self) -> dict[str, str]:
        return {key: str(value) for key, value in asdict(self).items()}


# Each field of a spec and the JSON type it holds (bool is not an int here).
SPEC_FIELDS: dict[str, type] = {
    "enabled": bool,
    "visibility": str,
    "name": str,
    "project": str,
    "user": int,  # the user whose `user` space the bot uses
    "autoload": list,
    "read": bool,
    "write": bool,
    "pre_compact_inject": bool,
    "scope": str,  # legacy: the name of a `project` space
    "project_root": str,  # legacy: its last segment keys the project
}
DEFAULT_SPACE_NAME = "default"
# Runtimes that can call the memory tools; a spec on any other only warns (C047).
MEMORY_TOOL_RUNTIMES = frozenset({BotRuntime.CLAW, BotRuntime.MCP})
# Runtimes that ignore auto-memory; turning it on for one only warns (C132).
AUTO_MEMORY_IGNORED_BY = frozenset({BotRuntime.KIMI, BotRuntime.GROK, BotRuntime.CODEX})
_AUTO_MEMORY_WORDS = {
    "on": AutoMemorySetting.ON,
    "true": AutoMemorySetting.ON,
    "1": AutoMemorySetting.ON,
    "off": AutoMemorySetting.OFF,
    "false": AutoMemorySetting.OFF,
    "0": AutoMemorySetting.OFF,
    "": AutoMemorySetting.UNSET,
}
# A spec names its bot only implicitly (the bot it belongs to) and a `private` space's run
# only at run time; judging a spec without them, any valid segment stands in.
_STAND_IN = "x"


def auto_memory_parse(value: object) -> AutoMemorySetting:
    """on/true/1 (or JSON true and 1) is on, off/false/0 off, blank or null unset, any case
    and surrounding blanks; ValueError for anything else (C131)."""
    if value is None:
        return AutoMemorySetting.UNSET
    if isinstance(value, bool):
        value = str(value).lower()
    elif isinstance(value, int):
        value = str(value)
    word = value.strip().lower() if isinstance(value, str) else None
    if word in _AUTO_MEMORY_WORDS:
        return _AUTO_MEMORY_WORDS[word]
    raise ValueError(f"not an auto-memory value: {value!r}")


def memory_spec_diagnostics(
    *,
    runtime: str,
    memory: Mapping[str, Any] | None,
    auto_memory: object,
    person: User | None = None,
    before: Mapping[str, Any] | None = None,
) -> list[Diagnostic]:
    """Every diagnostic of a bot's spec, errors and warnings alike: the runtime's first,
    then the fields' in `SPEC_FIELDS` order, then auto-memory's. No spec (None) has none.

    With `person`, the one who would save it in place of the stored spec `before` (None for
    a new bot), also C051 when it names another person's space and has no other error: the
    refusal saving it would meet, which is judged only once the rest of the spec is valid."""
    found: list[Diagnostic] = []
    if memory is not None:
        if runtime not in MEMORY_TOOL_RUNTIMES:
            found.append(
                _warning(
                    "C047",
                    "memory",
                    f"The {runtime} runtime cannot call the memory tools; "
                    "this memory spec does nothing there.",
                )
            )
        found += _spec_diagnostics(memory)
    found += _auto_memory_diagnostics(runtime=runtime, value=auto_memory)
    if not any(each.severity is Severity.ERROR for each in found):
        foreign = _spec_user_foreign(memory, before=before, person=person)
        found += [] if foreign is None else [foreign]
    return found


def memory_spec_space(
    memory: Mapping[str, Any], *, team_id: int, bot_slug: str, run: str = ""
) -> SpaceHandle | None:
    """The space a spec without error diagnostics names for the bot `bot_slug` of team
    `team_id`; None when the spec is disabled. A `bot` space is the bot's own; a legacy
    `scope` is the `project` space of that name keyed on the project (`project`, else the
    last segment of `project_root`); a `user` or `private` space is the spec's `user`'s.
    SpaceInvalid for a spec that names no valid space."""
    if not memory.get("enabled", True):
        return None
    query = {"name": memory.get("name", DEFAULT_SPACE_NAME)}
    if "visibility" in memory:
        query["visibility"] = memory["visibility"]
    elif "scope" in memory:
        query.update(visibility=Visibility.PROJECT, name=memory["scope"])
    visibility = query.get("visibility")
    if "project" in memory:
        query["project"] = memory["project"]
    elif "scope" in memory and memory.get("project_root"):
        query["project"] = _last_segment(memory["project_root"])
    if visibility == Visibility.BOT:
        query["bot"] = bot_slug
    if visibility == Visibility.PRIVATE and run:
        query["run"] = run
    # A bot is nobody's caller: the `user` and `private` spaces it uses are the spec's user's.
    user_id = memory.get("user")
    if visibility in USER_BOUND and user_id is None:
        raise SpaceInvalid(reason="missing_qualifier", field="user")
    # As a `project` on an `org` space: a `user` that names nobody's space would be ignored,
    # and the bot would write where its owner did not mean it to.
    if visibility not in USER_BOUND and user_id is not None:
        raise SpaceInvalid(reason="unexpected_qualifier", field="user")
    return space_handle_parse(query, tenant_id=team_id, user_id=user_id or 0)


def _spec_diagnostics(memory: Mapping[str, Any]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for field in memory:
        if field not in SPEC_FIELDS:
            found.append(_error("C049", str(field), f"A memory spec has no field `{field}`."))
    typed: dict[str, Any] = {}
    for field, kind in SPEC_FIELDS.items():
        if field not in memory:
            continue
        value = memory[field]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            found.append(_error("C050", field, f"`{field}` must be {_TYPE_NAMES[kind]}."))
        elif field == "user" and not 1 <= memory["user"] <= _USER_ID_MAX:
            found.append(_error("C050", field, "`user` must be a person's id (from 1)."))
        else:
            typed[field] = value
    if "visibility" in typed and typed["visibility"] not in _VISIBILITIES:
        known = ", ".join(Visibility)
        found.append(
            _error("C170", "visibility", f"Unknown visibility `{typed['visibility']}` ({known}).")
        )
    if "visibility" in memory and "project_root" in memory:
        found.append(
            _error(
                "C171",
                "project_root",
                "`visibility` and the legacy `project_root` cannot be used together; "
                "name the project with `project`.",
            )
        )
    if "autoload" in typed:
        try:
            autoload_select([], typed["autoload"])
        except AutoloadPatternInvalid as invalid:
            found.append(_error("C050", "autoload", f"Autoload pattern invalid: {invalid.detail}."))
    if found or not typed.get("enabled", True):
        return found
    if "visibility" not in typed and "scope" not in typed:
        return [_error("C048", "visibility", "Memory is enabled but the spec names no space.")]
    try:
        memory_spec_space(typed, team_id=0, bot_slug=_STAND_IN, run=_STAND_IN)
    except SpaceInvalid as invalid:
        field = str(invalid.detail.get("field", "memory"))
        if invalid.detail.get("reason") == "missing_qualifier":
            return [_error("C048", field, f"Memory is enabled but the space needs `{field}`.")]
        return [_error("C050", field, f"`{field}` cannot name a space ({invalid.detail}).")]
    return []


def _auto_memory_diagnostics(*, runtime: str, value: object) -> list[Diagnostic]:
    try:
        setting = auto_memory_parse(value)
    except ValueError:
        return [
            _error(
                "C131",
                "auto_memory",
                f"Auto-memory is on, off, true, false, 1, 0 or blank, not {value!r}.",
            )
        ]
    if setting == AutoMemorySetting.ON and runtime in AUTO_MEMORY_IGNORED_BY:
        return [
            _warning(
                "C132", "auto_memory", f"The {runtime} runtime ignores auto-memory; it stays off."
            )
        ]
    return []


_VISIBILITIES = frozenset(each.value for each in Visibility)
# The largest id a person can have (a BigAutoField): a spec's `user` past it was saved, and
# then every tool call of the bot failed looking that person up.
_USER_ID_MAX = 2**63 - 1
_TYPE_NAMES = {bool: "true or false", str: "text", int: "an integer", list: "a list of globs"}


def _error(code: str, field: str, message: str) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, field, message)


def _warning(code: str, field: str, message: str) -> Diagnostic:
    return Diagnostic(code, Severity.WARNING, field, message)


def _last_segment(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def bot_spec_require_valid(
    *, runtime: str, memory: Mapping[str, Any] | None, auto_memory: object
) -> AutoMemorySetting:
    """The parsed auto-memory setting of a spec with no error diagnostic; `BotSpecInvalid`
    with every diagnostic otherwise. What saving a spec, anywhere, is judged by."""
    diagnostics = memory_spec_diagnostics(runtime=runtime, memory=memory, auto_memory=auto_memory)
    if any(each.severity is Severity.ERROR for each in diagnostics):
        raise BotSpecInvalid(diagnostics=[each.as_json() for each in diagnostics])
    return auto_memory_parse(auto_memory)


# Words the bot routes use where a bot id would stand (`bots/validate`, `bots/me/...`): a
# bot of that id could never be reached.
ROUTE_WORDS = frozenset({"validate", "me"})


def bot_list(*, team: Team) -> QuerySet[Bot]:
    return Bot.objects.filter(team=team).order_by("slug")


def bot_get(*, team: Team, slug: str) -> Bot:
    """The team's bot `slug`; `NotFound` for another team's, as for one that does not exist."""
    bot = Bot.objects.select_related("team").filter(team=team, slug=slug).first()
    if bot is None:
        raise NotFound("No such bot.")
    return bot


class _Keep(enum.Enum):
    """What `bot_update` is given for a field it leaves as it is."""

    KEEP = enum.auto()


KEEP = _Keep.KEEP
# What `bot_update` changes: a bot's team, id and creation time are fixed.
_EDITABLE = ("name", "runtime", "memory_spec", "auto_memory")


def bot_create(
    *,
    team: Team,
    actor: User | None,
    slug: str,
    name: str,
    runtime: str,
    memory: Mapping[str, Any] | None = None,
    auto_memory: object = None,
    staff: User | None = None,
) -> Bot:
    """Create a bot of `team`. Only a team owner may (`TeamOwnerRequired`; `actor` None is
    staff in the admin, who manage every bot: `staff` is that person, for the audit). A
    spec with an error diagnostic is refused (`BotSpecInvalid`, its diagnostics in
    `detail`); the slug is unique in the team (`BotSlugTaken`). Nothing is written on a
    refusal; a creation is audited (`bot_created`) with it."""
    if actor is not None:
        team_owner_require(team=team, user=actor)
    try:
        validate_slug(slug)
    except ValidationError:
        raise BotSpecInvalid(
            "A bot id is a slug: letters, digits, `_` and `-`.",
            diagnostics=[],
            field="slug",
        ) from None
    if slug in ROUTE_WORDS:
        raise BotSpecInvalid(
            f"`{slug}` names a route under /api/v1/bots/, not a bot; choose another id.",
            diagnostics=[],
            field="slug",
        )
    setting = bot_spec_require_valid(runtime=runtime, memory=memory, auto_memory=auto_memory)
    _spec_user_require_own(memory, before=None, person=actor or staff)
    with violation_raises(BotSlugTaken, slug=slug):
        bot = Bot.objects.create(
            team=team,
            slug=slug,
            name=name,
            runtime=runtime,
            memory_spec=None if memory is None else dict(memory),
            auto_memory=setting,
        )
        _bot_audit(bot, actor=actor or staff, action=AuditAction.BOT_CREATED)
    return bot


def bot_spec_set(
    *,
    bot: Bot,
    actor: User | None,
    memory: Mapping[str, Any] | None,
    auto_memory: object,
    staff: User | None = None,
) -> Bot:
    """Replace a bot's memory spec and auto-memory setting, judged against its runtime
    (`bot_update` with those two fields)."""
    return bot_update(bot=bot, actor=actor, staff=staff, memory=memory, auto_memory=auto_memory)


def bot_update(
    *,
    bot: Bot,
    actor: User | None,
    staff: User | None = None,
    name: str | _Keep = KEEP,
    runtime: str | _Keep = KEEP,
    memory: Mapping[str, Any] | _Keep | None = KEEP,
    auto_memory: object = KEEP,
) -> Bot:
    """Change the given fields of a bot (`KEEP`: leave it). The spec that results, changed
    or not, is judged against the runtime that results, so a new runtime cannot slip past
    a spec it makes invalid (`BotSpecInvalid`, nothing saved). `actor` None is staff in the
    admin (`staff` that person, for the audit); a person must own the bot's team
    (`TeamOwnerRequired`). A change is audited (`bot_spec_changed`, naming the fields that
    changed); one that changes nothing records nothing."""
    if actor is not None:
        team_owner_require(team=bot.team, user=actor)
    with transaction.atomic():
        # The row as stored, locked: `bot` may carry unsaved values (the admin's form sets
        # them), and two edits of one bot must each judge the spec the other left.
        current = Bot.objects.select_related("team").select_for_update(of=("self",)).get(pk=bot.pk)
        before = {field: getattr(current, field) for field in _EDITABLE}
        if not isinstance(name, _Keep):
            current.name = name
        if not isinstance(runtime, _Keep):
            current.runtime = runtime
        if not isinstance(memory, _Keep):
            current.memory_spec = None if memory is None else dict(memory)
        current.auto_memory = bot_spec_require_valid(
            runtime=current.runtime,
            memory=current.memory_spec,
            auto_memory=current.auto_memory if auto_memory is KEEP else auto_memory,
        )
        _spec_user_require_own(
            current.memory_spec, before=before["memory_spec"], person=actor or staff
        )
        changed = [field for field in _EDITABLE if getattr(current, field) != before[field]]
        if changed:
            current.save(update_fields=changed)
            _bot_audit(
                current, actor=actor or staff, action=AuditAction.BOT_SPEC_CHANGED, fields=changed
            )
    bot.refresh_from_db()
    return bot


def _spec_user_require_own(
    memory: Mapping[str, Any] | None, *, before: Mapping[str, Any] | None, person: User | None
) -> None:
    """A `user` or `private` space is one person's own notes, so a spec may name only the
    space of the person saving it (`BotSpecInvalid`, `detail.field` `user`, otherwise): a team
    owner could otherwise read any member's notes through a bot. A `user` the stored spec
    already names may stay (renaming a bot is not giving it a space); the system itself
    (`person` None: a command, a migration) is not judged."""
    diagnostic = _spec_user_foreign(memory, before=before, person=person)
    if diagnostic is None:
        return
    raise BotSpecInvalid(
        "A bot may be given only your own user or private space; nothing was saved.",
        diagnostics=[diagnostic.as_json()],
        field="user",
    )


def _spec_user_foreign(
    memory: Mapping[str, Any] | None, *, before: Mapping[str, Any] | None, person: User | None
) -> Diagnostic | None:
    """C051 when `person` may not save `memory` for its `user` (`_spec_user_require_own`)."""
    user_id = None if memory is None else memory.get("user")
    if person is None or user_id is None or user_id == person.pk:
        return None
    if before is not None and before.get("user") == user_id:
        return None
    return _error(
        "C051",
        "user",
        "`user` must be your own id: a bot may be given only the `user` or `private` space "
        "of the person who configures it.",
    )


def _bot_audit(bot: Bot, *, actor: User | None, action: str, **detail: object) -> None:
    """Audit a change of `bot` by `actor`: ids and field names, never the spec's values."""
    audit_record(
        actor=actor,
        action=action,
        org_id=bot.team.org_id,
        target_type="bot",
        target_id=bot.pk,
        detail={"botId": bot.slug, "teamId": bot.team_id, "runtime": bot.runtime, **detail},
    )
