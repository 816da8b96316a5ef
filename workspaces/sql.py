"""What hand-written SQL needs from the ORM, so that it runs on both databases, and the
hand-written statements of the workspaces app's per-request lookups.

Every raw statement of the project builds its identifiers and adapts its values here, as
the ORM would (and loads rows back into model instances with the ORM's own converters);
the comment beside each statement says why the ORM could not write it, or not cheaply.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol, TypeVar

import psycopg
from django.contrib.sessions.models import Session
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.models import Q, QuerySet
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.functions import Substr
from django.db.models.lookups import Exact
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

from workspaces.models import (
    ApiToken,
    Bot,
    KeySession,
    KeySessionRevocation,
    Org,
    Team,
    TeamMembership,
    User,
    Workspace,
    WorkspaceMembership,
)

M = TypeVar("M", bound=models.Model)


def starts_with(field: str, prefix: str) -> Q:
    """`field` begins with `prefix`, exactly, on both databases. SQLite's LIKE, behind
    `startswith`, folds ASCII case, so there the equality of the leading characters decides;
    the LIKE stays for PostgreSQL's index."""
    return Q(**{f"{field}__startswith": prefix}) & Q(Exact(Substr(field, 1, len(prefix)), prefix))


@functools.cache
def table(model: type[models.Model]) -> str:
    """The model's table name, quoted for this database."""
    # Cached: a capture builds its statements with about thirty of these, and each lookup
    # of `connection` goes through its thread-local proxy. A process has one default
    # database, so the quoting never changes.
    return connection.ops.quote_name(model._meta.db_table)


def pk_param(model: type[models.Model], value: Any) -> Any:
    """A primary-key value as this database stores it (UUIDs are text on SQLite)."""
    if _native_uuid_pk(model):
        # What the field's `get_db_prep_value` answers there: the value as a UUID.
        return model._meta.pk.to_python(value)
    return model._meta.pk.get_db_prep_value(value, connection)


def datetime_param(value: datetime) -> Any:
    """An aware datetime as this database stores it: SQLite keeps datetimes as text, and a
    raw aware value would store a second format (with an offset) in the column."""
    if _native_datetimes():
        return value
    return connection.ops.adapt_datetimefield_value(value)


# These two are cached as `table` is, since a process has one default database: asking
# its connection goes through the per-thread proxy, which cost more than the conversion
# (about a microsecond each time, and a capture converts eleven values).


@functools.cache
def _native_uuid_pk(model: type[models.Model]) -> bool:
    """Whether `model`'s primary key is a UUID that the database stores as one."""
    return isinstance(model._meta.pk, models.UUIDField) and bool(
        connection.features.has_native_uuid_field
    )


@functools.cache
def _native_datetimes() -> bool:
    """Whether the database takes an aware datetime as the driver sends it (Django's
    PostgreSQL operations pass one through unchanged)."""
    return connection.vendor == "postgresql"


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


def any_of(expression: str, values: Collection[int]) -> tuple[str, list[Any]]:
    """`expression` is one of `values`, integers (not empty), as SQL and its parameters: on
    PostgreSQL one array parameter, so the statement is the same (parsed and prepared once)
    whatever the count; elsewhere one parameter per value."""
    if connection.vendor == "postgresql":
        # The array's text, cast: the driver adapts a list element by element in Python,
        # five times as long as this join (about 45 microseconds for 64 ids).
        return f"{expression} = ANY(%s::bigint[])", ["{" + ",".join(map(str, values)) + "}"]
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
def _loader(
    model: type[models.Model], deferred: frozenset[str]
) -> tuple[list[str], list[tuple[int, Any, list[Any]]]]:
    """The attribute names of the model's concrete fields but the `deferred` ones, and for
    each field whose raw value needs converting (SQLite returns datetimes as text and
    booleans as integers) its offset among them, its column expression and the functions
    that turn the raw value into the Python value the ORM would give. Cached as `table`
    is: a process has one default database."""
    names: list[str] = []
    converted: list[tuple[int, Any, list[Any]]] = []
    for field in model._meta.concrete_fields:
        if field.attname in deferred:
            continue
        column = field.get_col(model._meta.db_table)
        convert = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if convert:
            converted.append((len(names), column, convert))
        names.append(field.attname)
    return names, converted


def instance(
    model: type[M], row: Sequence[Any], start: int, *, deferred: Collection[str] = ()
) -> M:
    """The `model` instance whose columns (as `columns` lists them, with the same
    `deferred`) begin at `row[start]`, as the ORM would load it (deferred fields load on
    access, as after `QuerySet.defer`)."""
    names, converted = _loader(model, frozenset(deferred))
    values = list(row[start : start + len(names)])
    for offset, column, convert in converted:
        values[offset] = _field_convert(values[offset], column, convert)
    if not _set_plainly(model) or pre_init.receivers or post_init.receivers:
        # The alias of `connection`, named rather than read through its per-thread proxy.
        return model.from_db(DEFAULT_DB_ALIAS, names, values)
    # What `from_db` gives, without `Model.__init__`'s walk over every field (the deferred
    # ones marked first, then a setattr per field): with no signal receiver to call and
    # every field set plainly, that walk ends with these values in the instance's __dict__
    # and a state saying where it was loaded from. The walk was half the Python of a
    # delivery credential's lookup and a third of a token's (bench/README.md).
    loaded = model.__new__(model)
    loaded._state = ModelState()
    loaded._state.adding = False
    loaded._state.db = DEFAULT_DB_ALIAS
    loaded.__dict__.update(zip(names, values, strict=True))
    return loaded


@functools.cache
def _set_plainly(model: type[models.Model]) -> bool:
    """Whether `Model.__init__` sets each concrete field of `model` by storing it in the
    instance's __dict__: a field read through Django's `DeferredAttribute` (a non-data
    descriptor), or a foreign key's id through `ForeignKeyDeferredAttribute`, whose set
    only forgets a cached related object, which a new instance does not have. A field with
    a descriptor of its own (a file, say) is set through it: such a model is loaded by
    `from_db`."""
    return all(
        type(inspect.getattr_static(model, field.attname)) in _PLAIN_DESCRIPTORS
        for field in model._meta.concrete_fields
    )


_PLAIN_DESCRIPTORS = (DeferredAttribute, ForeignKeyDeferredAttribute)


def field_value(model: type[models.Model], name: str, value: Any) -> Any:
    """A raw value of `model`'s field `name` (or of an aggregate that keeps its type, as
    MAX does) as the ORM would load it."""
    return field_loader(model, name)(value)


def field_loader(model: type[models.Model], name: str) -> Callable[[Any], Any]:
    """What `field_value` does for `model`'s field `name`, as one function: for the many
    rows of one statement, each loaded without looking the field up again."""
    names, converted = _loader(model, frozenset())
    offset = names.index(name)  # ValueError for a field the model does not have
    for converted_offset, column, convert in converted:
        if converted_offset == offset:
            return functools.partial(_field_convert, column=column, convert=convert)
    return _unconverted


def _unconverted(value: Any) -> Any:
    return value


def _field_convert(value: Any, column: Any, convert: list[Any]) -> Any:
    for converter in convert:
        value = converter(value, column, connection)
    return value


def loaded(model: type[M], values: dict[str, Any]) -> M:
    """The `model` instance holding `values` (by attribute name, one for every concrete
    field), as the ORM would load its row: for a row this process has just written."""
    fields = model._meta.concrete_fields
    return model.from_db(
        connection.alias,
        [field.attname for field in fields],
        [values[field.attname] for field in fields],
    )


class Cursor(Protocol):
    """What a hand-written statement uses of the cursor `driver_cursor` gives."""

    rowcount: int

    def execute(self, sql: str, params: Any) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Any: ...


@contextmanager
def driver_cursor(*, binary: bool = False) -> Iterator[Cursor]:
    """A cursor for hand-written statements: the driver's own while nothing observes
    Django's cursor layer, else Django's cursor, exactly as `connection.cursor()` gives it.
    With `binary`, its results come in PostgreSQL's binary format where the driver's cursor
    can take it (`results_binary`), either way.

    Django's layer (its cursor wrapper, each execute's chain of wrappers and checks) is
    Python the hot statements of a Save, a capture and a recall do not need: warm, about
    2.5 us of a statement's 20, and several times that in the service's loop, where it
    runs cold after each round trip (bench/README.md). What observes that layer is an
    execute wrapper (the fault tests' hooks, the benchmarks' statement capture) or query
    logging (DEBUG, `CaptureQueriesContext`), checked as the block opens. The connection
    is opened and health-checked as Django's `cursor()` does, and the block's database
    errors become Django's as they leave it: catch them outside the block, not around a
    statement inside it.
    """
    db = connections[DEFAULT_DB_ALIAS]
    if db.execute_wrappers or db.queries_logged:
        with db.cursor() as observed:
            if binary:
                results_binary(observed.cursor)
            yield observed
        return
    # Django's `cursor()` up to its wrapping of the driver's cursor, and the check each of
    # its executes makes, once for the block.
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        db.validate_thread_sharing()
        cursor = db.create_cursor()
        if binary:
            results_binary(cursor)
        try:
            yield cursor
        finally:
            cursor.close()


def results_binary(cursor: Any) -> None:
    """Have the driver's `cursor` return rows in PostgreSQL's binary format, for a statement
    whose every column is of a type the ORM loads as the driver returns it in either format
    (as `rows_binary` reads; not JSON, which the binary format hands over parsed): a bytea
    value then travels as it is instead of as hex, which the server spells out and libpq
    decodes byte by byte, and a datetime is read by the driver's C loader instead of parsed
    from its text in Python (Django's loader for the text format). Not on SQLite, nor on a
    client-binding cursor (without DATABASE_PREPARED_STATEMENTS), which reads text only."""
    if isinstance(cursor, psycopg.Cursor) and not isinstance(cursor, psycopg.ClientCursor):
        cursor.format = psycopg.pq.Format.BINARY


def fetch_one(sql: str, params: Sequence[Any], *, binary: bool = False) -> tuple[Any, ...] | None:
    """The first row `sql` answers, or None; with `binary`, read as `results_binary` says."""
    with driver_cursor(binary=binary) as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else tuple(row)


def values_binary(queryset: QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """The rows of `queryset`, a `values_list` of fields the ORM loads as the driver returns
    them, fetched as `rows_binary` fetches: the ORM's own statement, sent raw only for that.
    Elsewhere the queryset's rows, as the ORM fetches them."""
    if connection.vendor != "postgresql":
        return list(queryset)
    return rows_binary(*queryset.query.sql_with_params())


def rows_binary(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The rows `sql` answers, every column of a type the ORM loads as the driver returns it
    (text, numbers, bytes, aware datetimes; not JSON), fetched on PostgreSQL in its binary
    format. In the text format every bytea value travels as hex, twice its size, which the
    server spells out and the client decodes (reading a space's 8 MiB of sealed bodies, 24
    ms of the client's CPU against 6 in binary), and every datetime is parsed from its text
    in Python (64 rows of a blame's origin revisions: 290 microseconds against 115)."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    # Errors of the driver's cursor become Django's, as for any statement.
    with connection.wrap_database_errors, connection.cursor() as cursor:
        driver = cursor.cursor
        if isinstance(driver, psycopg.ClientCursor):
            # Without DATABASE_PREPARED_STATEMENTS (behind a pooler) Django's cursor binds
            # on the client, which cannot take binary results: a server-binding one instead,
            # its statement never prepared (which such a pooler would not carry).
            with psycopg.Cursor(driver.connection) as server_binding:
                server_binding.execute(sql, params, binary=True, prepare=False)
                return list(server_binding.fetchall())
        driver.execute(sql, params, binary=True)
        return list(driver.fetchall())


def width(model: type[models.Model], *, deferred: Collection[str] = ()) -> int:
    """How many values `columns(model, ...)` selects, with the same `deferred`."""
    return len(_loader(model, frozenset(deferred))[0])


def key_session_unrevoked(key_session_id: str) -> str:
    """An SQL condition true while the key session `key_session_id` (a column or a `%s`)
    names has no revocation row: the durable mark that every use of a key session checks,
    and that outlives both the session's own row and a key left in the cache."""
    return (
        f"NOT EXISTS (SELECT 1 FROM {table(KeySessionRevocation)} r "
        f"WHERE r.key_session_id = {key_session_id})"
    )


# What no authenticated request reads of its caller, the caller's team and its org, which
# the lookups of a personal access token and of a delivery credential load with the
# credential: left in the database (loaded on access, as after `QuerySet.defer`), since
# loading a row's columns (above all its timestamps, which Django's loader parses in
# Python) is most of what such a statement costs this process.
CALLER_DEFERRED = {
    User: frozenset({"password", "last_login", "first_name", "last_name", "email", "date_joined"}),
    Team: frozenset({"created_at"}),
    Org: frozenset({"created_at", "purge_claimed_at"}),
}

# What no token-authenticated request reads of the token, its owner, team and org.
_API_TOKEN_DEFERRED = {
    ApiToken: frozenset({"name", "token_hash", "created_at"}),
    **CALLER_DEFERRED,
    Bot: frozenset(),
}


def api_token_by_digest(digest: str) -> tuple[ApiToken, bool] | None:
    """The token whose SHA-256 is `digest` (with its owner, team and org, and bot), and
    whether its owner still holds what minting it took: membership of its team, and for a
    bot's token, ownership of it (only an owner issues one); whatever its state: the caller
    judges revocation and expiry, read afresh on every request."""
    row = fetch_one(_api_token_sql(connection.vendor), [TeamMembership.Role.OWNER.value, digest])
    if row is None:
        return None
    starts, end = _api_token_offsets()

    def load(model: type[M]) -> M:
        return instance(model, row, starts[model], deferred=_API_TOKEN_DEFERRED[model])

    token, team = load(ApiToken), load(Team)
    # As the ORM's select_related fills them: straight into each relation's cache.
    ApiToken.user.field.set_cached_value(token, load(User))
    ApiToken.team.field.set_cached_value(token, team)
    Team.org.field.set_cached_value(team, load(Org))
    ApiToken.bot.field.set_cached_value(token, load(Bot) if token.bot_id is not None else None)
    return token, bool(row[end])


@functools.cache
def _api_token_offsets() -> tuple[dict[type[models.Model], int], int]:
    """Where each of `_API_TOKEN_DEFERRED`'s models begins in a token's row, and where the
    membership's EXISTS is: the model metadata never changes in a process."""
    starts = {}
    start = 0
    for model, deferred in _API_TOKEN_DEFERRED.items():
        starts[model] = start
        start += width(model, deferred=deferred)
    return starts, start


@functools.cache
def _api_token_sql(vendor: str) -> str:
    # Raw: it runs on every token-authenticated request, and the ORM spent longer compiling
    # this query (four joins and an EXISTS) than PostgreSQL spent answering it. Built once
    # per process: the identifiers come from model metadata; the values are parameters.
    token, user, team, org, bot = (
        columns(model, alias, deferred=deferred)
        for (model, deferred), alias in zip(_API_TOKEN_DEFERRED.items(), "kutob", strict=True)
    )
    return f"""
        SELECT {token}, {user}, {team}, {org}, {bot},
            EXISTS (
                SELECT 1 FROM {table(TeamMembership)} m
                WHERE m.team_id = k.team_id AND m.user_id = k.user_id
                    AND (k.bot_id IS NULL OR m.role = %s)
            )
        FROM {table(ApiToken)} k
        JOIN {table(User)} u ON u.id = k.user_id
        JOIN {table(Team)} t ON t.id = k.team_id
        JOIN {table(Org)} o ON o.id = t.org_id
        LEFT JOIN {table(Bot)} b ON b.id = k.bot_id
        WHERE k.token_hash = %s
    """


@functools.cache
def _workspace_membership_sql(vendor: str) -> str:
    # Raw: it runs on every workspace route, and compiling the ORM's join cost more than
    # running it. Built once per process: the identifiers come from model metadata; every
    # value is a parameter.
    return f"""
        SELECT {columns(WorkspaceMembership, "m")}, {columns(Workspace, "w")}
        FROM {table(WorkspaceMembership)} m
        JOIN {table(Workspace)} w ON w.id = m.workspace_id
        WHERE m.user_id = %s AND m.workspace_id = %s AND w.team_id = %s
    """


def workspace_membership_of(
    *, user: User, team: Team, workspace_id: int
) -> WorkspaceMembership | None:
    """`user`'s membership of workspace `workspace_id` of `team`, with its workspace; both
    are given the `user` and `team` instances passed (the caller's credential's)."""
    # The id comes from a URL or a body. Past the id column's range it names no row, and
    # SQLite refuses to bind it at all (OverflowError), which the ORM's lookups guard
    # against but this raw query must do itself.
    low, high = connection.ops.integer_field_range(Workspace._meta.pk.get_internal_type())
    if not low <= workspace_id <= high:
        return None
    row = fetch_one(_workspace_membership_sql(connection.vendor), [user.pk, workspace_id, team.pk])
    if row is None:
        return None
    membership = instance(WorkspaceMembership, row, 0)
    membership.workspace = instance(Workspace, row, width(WorkspaceMembership))
    membership.workspace.team = team
    membership.user = user
    return membership


def key_session_revoked(*, session_id: Any, workspace_id: int, user_id: int) -> bool | None:
    """Whether `user_id`'s key session `session_id` on workspace `workspace_id` is revoked
    (stamped, or with a durable revocation row); None if there is no such session."""
    row = fetch_one(
        _key_session_revoked_sql(connection.vendor),
        [pk_param(KeySession, session_id), workspace_id, user_id],
    )
    return None if row is None else bool(row[0])


@functools.cache
def _key_session_revoked_sql(vendor: str) -> str:
    # Raw: every automatic read and write checks its key session first, and the ORM spent
    # longer building this query (with its revocation join) than PostgreSQL spent answering.
    # Built once per process: the identifiers come from model metadata; every value is a
    # parameter.
    return f"""
        SELECT s.revoked_at IS NOT NULL OR NOT {key_session_unrevoked("s.id")}
        FROM {table(KeySession)} s
        WHERE s.id = %s AND s.workspace_id = %s AND s.user_id = %s
    """


def user_with_browser_session(
    *, user_id: int, session_key: str, now: datetime
) -> tuple[User, str | None] | None:
    """Person `user_id` as stored now, and the stored data of browser session `session_key`
    if it is unexpired at `now` (None once signed out or expired, as Django's database
    session store reads it); None if there is no such person."""
    row = fetch_one(
        _user_with_browser_session_sql(connection.vendor),
        [session_key, datetime_param(now), user_id],
    )
    if row is None:
        return None
    return instance(User, row, 0), row[width(User)]


@functools.cache
def _user_with_browser_session_sql(vendor: str) -> str:
    # Raw: every use of a key session a browser session opened (each recall of the frame's
    # assistant) checks that session against the person's password hash, and reading the
    # two rows apart cost a second round trip. Built once per process: the identifiers come
    # from model metadata; every value is a parameter.
    return f"""
        SELECT {columns(User, "u")}, s.session_data
        FROM {table(User)} u
        LEFT JOIN {table(Session)} s ON s.session_key = %s AND s.expire_date > %s
        WHERE u.id = %s
    """
