"""What hand-written SQL needs from the ORM, so that it runs on both databases, and the
hand-written statements of the workspaces app's per-request lookups.

Every raw statement of the project builds its identifiers and adapts its values here, as
the ORM would (and loads rows back into model instances with the ORM's own converters);
the comment beside each statement says why the ORM could not write it, or not cheaply.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db import connection, models

from workspaces.models import (
    ApiToken,
    Bot,
    Org,
    Team,
    TeamMembership,
    User,
    Workspace,
    WorkspaceMembership,
)

M = TypeVar("M", bound=models.Model)


def table(model: type[models.Model]) -> str:
    """The model's table name, quoted for this database."""
    return connection.ops.quote_name(model._meta.db_table)


def pk_param(model: type[models.Model], value: Any) -> Any:
    """A primary-key value as this database stores it (UUIDs are text on SQLite)."""
    return model._meta.pk.get_db_prep_value(value, connection)


def datetime_param(value: datetime) -> Any:
    """An aware datetime as this database stores it: SQLite keeps datetimes as text, and a
    raw aware value would store a second format (with an offset) in the column."""
    return connection.ops.adapt_datetimefield_value(value)


def unsynchronized() -> tuple[str, str]:
    """For a single-statement write that may be lost to a server crash (a diagnostic record,
    a derived cache): a WITH clause, and the FROM item the statement must join so that it
    runs, that make the statement's own transaction commit without waiting for the WAL
    flush on PostgreSQL (set_config(..., true) lasts until that commit; in an enclosing
    transaction, until its commit, as SET LOCAL would). Both empty on SQLite."""
    if connection.vendor != "postgresql":
        return "", ""
    return (
        "WITH unsynchronized AS (SELECT set_config('synchronous_commit', 'off', true))",
        "unsynchronized",
    )


def any_of(expression: str, values: Collection[Any]) -> tuple[str, list[Any]]:
    """`expression` is one of `values` (not empty), as SQL and its parameters: on PostgreSQL
    one array parameter, so the statement is the same (parsed and prepared once) whatever
    the count; elsewhere one parameter per value."""
    if connection.vendor == "postgresql":
        return f"{expression} = ANY(%s)", [list(values)]
    return f"{expression} IN ({', '.join(['%s'] * len(values))})", list(values)


def columns(model: type[models.Model], alias: str, *, deferred: Collection[str] = ()) -> str:
    """Every concrete column of `model` but the `deferred` fields, qualified by `alias`, in
    field order: what `instance` reads back."""
    quote = connection.ops.quote_name
    return ", ".join(
        f"{alias}.{quote(str(field.column))}"
        for field in model._meta.concrete_fields
        if field.attname not in deferred
    )


@functools.cache
def _converters(model: type[models.Model], vendor: str) -> list[tuple[str, Any, list[Any]]]:
    """Per concrete field: its attribute name, its column expression, and the functions
    that turn a raw value into the Python value the ORM would give (SQLite returns
    datetimes as text and booleans as integers)."""
    found = []
    for field in model._meta.concrete_fields:
        column = field.get_col(model._meta.db_table)
        convert = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        found.append((field.attname, column, convert))
    return found


def instance(
    model: type[M], row: Sequence[Any], start: int, *, deferred: Collection[str] = ()
) -> M:
    """The `model` instance whose columns (as `columns` lists them, with the same
    `deferred`) begin at `row[start]`, as the ORM would load it (deferred fields load on
    access, as after `QuerySet.defer`)."""
    names: list[str] = []
    values: list[Any] = []
    fields = _converters(model, connection.vendor)
    for value, (name, column, convert) in zip(
        row[start:], [field for field in fields if field[0] not in deferred], strict=False
    ):
        names.append(name)
        values.append(_field_convert(value, column, convert))
    return model.from_db(connection.alias, names, values)


def field_value(model: type[models.Model], name: str, value: Any) -> Any:
    """A raw value of `model`'s field `name` (or of an aggregate that keeps its type, as
    MAX does) as the ORM would load it."""
    for attname, column, convert in _converters(model, connection.vendor):
        if attname == name:
            return _field_convert(value, column, convert)
    raise LookupError(f"{model.__name__} has no field {name}")


def _field_convert(value: Any, column: Any, convert: list[Any]) -> Any:
    for converter in convert:
        value = converter(value, column, connection)
    return value


def fetch_one(sql: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    """The first row `sql` answers, or None."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)


def width(model: type[models.Model], *, deferred: Collection[str] = ()) -> int:
    """How many values `columns(model, ...)` selects, with the same `deferred`."""
    return sum(field.attname not in deferred for field in model._meta.concrete_fields)


def api_token_by_digest(digest: str) -> tuple[ApiToken, bool] | None:
    """The token whose SHA-256 is `digest` (with its owner, team and org, and bot), and
    whether its owner is still in its team; whatever its state: the caller judges
    revocation and expiry, read afresh on every request."""
    # Raw: it runs on every token-authenticated request, and the ORM spent longer compiling
    # this query (four joins and an EXISTS) than PostgreSQL spent answering it.
    sql = f"""
        SELECT {columns(ApiToken, "k")}, {columns(User, "u")}, {columns(Team, "t")},
            {columns(Org, "o")}, {columns(Bot, "b")},
            EXISTS (
                SELECT 1 FROM {table(TeamMembership)} m
                WHERE m.team_id = k.team_id AND m.user_id = k.user_id
            )
        FROM {table(ApiToken)} k
        JOIN {table(User)} u ON u.id = k.user_id
        JOIN {table(Team)} t ON t.id = k.team_id
        JOIN {table(Org)} o ON o.id = t.org_id
        LEFT JOIN {table(Bot)} b ON b.id = k.bot_id
        WHERE k.token_hash = %s
    """  # identifiers come from model metadata; the digest is a parameter
    row = fetch_one(sql, [digest])
    if row is None:
        return None
    start = 0
    token = instance(ApiToken, row, start)
    start += width(ApiToken)
    token.user = instance(User, row, start)
    start += width(User)
    token.team = instance(Team, row, start)
    start += width(Team)
    token.team.org = instance(Org, row, start)
    start += width(Org)
    token.bot = instance(Bot, row, start) if token.bot_id is not None else None
    start += width(Bot)
    return token, bool(row[start])


def workspace_membership_of(
    *, user: User, team: Team, workspace_id: int
) -> WorkspaceMembership | None:
    """`user`'s membership of workspace `workspace_id` of `team`, with its workspace; both
    are given the `user` and `team` instances passed (the caller's credential's)."""
    # Raw: it runs on every workspace route, and compiling the ORM's join cost more than
    # running it.
    sql = f"""
        SELECT {columns(WorkspaceMembership, "m")}, {columns(Workspace, "w")}
        FROM {table(WorkspaceMembership)} m
        JOIN {table(Workspace)} w ON w.id = m.workspace_id
        WHERE m.user_id = %s AND m.workspace_id = %s AND w.team_id = %s
    """  # identifiers come from model metadata; every value is a parameter
    row = fetch_one(sql, [user.pk, workspace_id, team.pk])
    if row is None:
        return None
    membership = instance(WorkspaceMembership, row, 0)
    membership.workspace = instance(Workspace, row, width(WorkspaceMembership))
    membership.workspace.team = team
    membership.user = user
    return membership
