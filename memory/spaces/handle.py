"""The space handle: which space a request means, and its deterministic id.

A space is named by a visibility, a name, and the qualifiers that visibility takes. The
tenant (the credential's active team) and the user (the credential's user) complete it;
they never come from the query. A qualifier a visibility does not take is refused rather
than ignored, so one request can never mean two spaces.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from memory.errors import SpaceInvalid
from workspaces.lookalikes import first_invisible

MAX_SEGMENT_BYTES = 128


class Visibility(enum.StrEnum):
    PRIVATE = "private"  # one run of one person
    BOT = "bot"  # one bot of one project
    PROJECT = "project"
    CROSS_PROJECT = "cross_project"
    USER = "user"  # always the caller's own
    ORG = "org"  # the whole tenant
    GLOBAL = "global"  # the whole deployment: no tenant


# The query qualifiers each visibility requires; every other one is refused. The user of a
# `user` or `private` space is the caller, never a qualifier.
QUALIFIERS = ("project", "bot", "run")
REQUIRED_QUALIFIERS: dict[Visibility, frozenset[str]] = {
    Visibility.PRIVATE: frozenset({"run"}),
    Visibility.BOT: frozenset({"project", "bot"}),
    Visibility.PROJECT: frozenset({"project"}),
    Visibility.CROSS_PROJECT: frozenset(),
    Visibility.USER: frozenset(),
    Visibility.ORG: frozenset(),
    Visibility.GLOBAL: frozenset(),
}
# Whose space it is beyond the tenant: these visibilities belong to the calling user.
USER_BOUND = frozenset({Visibility.PRIVATE, Visibility.USER})


@dataclass(frozen=True)
class SpaceHandle:
    visibility: Visibility
    name: str
    tenant_id: int | None  # the team; None only for `global`
    project: str = ""
    bot: str = ""
    user_id: int | None = None  # the caller, for `private` and `user`
    run: str = ""

    @property
    def id(self) -> str:
        """Equal handles give equal ids; changing any axis changes the id. Each axis has a
        fixed position and a `:` inside one is escaped, so no two handles share an id."""
        axes = (
            self.visibility.value,
            "" if self.tenant_id is None else str(self.tenant_id),
            self.project,
            self.bot,
            "" if self.user_id is None else str(self.user_id),
            self.run,
            self.name,
        )
        return "v1:" + ":".join(_escape(axis) for axis in axes)

    @property
    def is_global(self) -> bool:
        return self.visibility is Visibility.GLOBAL


def _escape(axis: str) -> str:
    return axis.replace("%", "%25").replace(":", "%3A")


def segment_problem(value: str) -> str | None:
    """Why `value` is not one path segment, or None: not empty, no `/` or `\\`, not `.` or
    `..`, no control or other invisible character, no whitespace at either end, at most 128
    UTF-8 bytes."""
    if value == "":
        return "empty"
    if "/" in value or "\\" in value:
        return "separator"
    if value in {".", ".."}:
        return "dot_segment"
    try:
        encoded = value.encode()
    except UnicodeEncodeError:
        return "invalid_text"
    # Not only the C0 controls: `notes` and `no\u200btes` (or a right-to-left override)
    # would be two spaces that read alike, as two document paths would.
    if first_invisible(value) is not None:
        return "control_character"
    # `n` and `n ` (or ` ` beside nothing) would be two spaces that `du` shows alike.
    if value != value.strip():
        return "surrounding_whitespace"
    if len(encoded) > MAX_SEGMENT_BYTES:
        return "too_long"
    return None


def space_handle_parse(
    query: dict[str, str], *, tenant_id: int | None, user_id: int
) -> SpaceHandle:
    """The handle a request's query names, for the caller; SpaceInvalid otherwise.

    `detail.reason` is one of unknown_visibility, missing_name, bad_name,
    missing_qualifier, bad_qualifier, unexpected_qualifier; `detail.field` names the field.
    """
    raw_visibility = query.get("visibility", "")
    try:
        visibility = Visibility(raw_visibility)
    except ValueError:
        raise SpaceInvalid(reason="unknown_visibility", field="visibility") from None
    name = query.get("name")
    if name is None or name == "":
        raise SpaceInvalid(reason="missing_name", field="name")
    if problem := segment_problem(name):
        raise SpaceInvalid(reason="bad_name", field="name", problem=problem)
    required = REQUIRED_QUALIFIERS[visibility]
    qualifiers: dict[str, str] = {}
    for field in QUALIFIERS:
        value = query.get(field)
        if value is None:
            if field in required:
                raise SpaceInvalid(reason="missing_qualifier", field=field)
            continue
        if field not in required:
            raise SpaceInvalid(reason="unexpected_qualifier", field=field)
        if problem := segment_problem(value):
            raise SpaceInvalid(reason="bad_qualifier", field=field, problem=problem)
        qualifiers[field] = value
    return SpaceHandle(
        visibility=visibility,
        name=name,
        tenant_id=None if visibility is Visibility.GLOBAL else tenant_id,
        user_id=user_id if visibility in USER_BOUND else None,
        **qualifiers,
    )
