"""`driver_cursor`: hand-written statements on the driver's cursor while nothing observes
Django's cursor layer, through Django's cursor when something does, the same either way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from django.db import (
    DatabaseError,
    IntegrityError,
    OperationalError,
    connection,
    transaction,
)
from django.db.backends.utils import CursorWrapper
from django.db.models.signals import post_init
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from conftest import backend_terminate, postgres_only
from memory.selectors import memory_current_get
from memory.services import memory_save
from workspaces.models import ApiToken, File, Org, Team, User
from workspaces.selectors import workspace_data_key
from workspaces.services import api_token_create, key_session_open
from workspaces.sql import (
    _API_TOKEN_DEFERRED,
    CALLER_DEFERRED,
    api_token_by_digest,
    driver_cursor,
    key_session_revoked,
    table,
    workspace_membership_of,
)
from workspaces.tokens import bearer_secret_digest
from workspaces.violations import violation_code

Statements = list[tuple[str, Any]]


@pytest.fixture
def sent(monkeypatch) -> Statements:
    """Every statement the driver's cursors execute, whichever path reached them."""
    connection.ensure_connection()
    driver = type(connection.create_cursor())
    statements: Statements = []
    execute = driver.execute

    def recorded(self: Any, sql: str, params: Any = None, *args: Any, **kwargs: Any) -> Any:
        statements.append((sql, params))
        return execute(self, sql, params, *args, **kwargs)

    monkeypatch.setattr(driver, "execute", recorded)
    return statements


@pytest.fixture
def through_django(monkeypatch) -> Statements:
    """Every statement sent through Django's cursor wrapper (the test clears it before what
    it checks)."""
    statements: Statements = []
    execute = CursorWrapper.execute

    def counted(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        statements.append((sql, params))
        return execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", counted)
    return statements


def passthrough(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any):
    return execute(sql, params, many, context)


def fields(instance: Any) -> dict[str, Any]:
    return {name: value for name, value in vars(instance).items() if name != "_state"}


def lookups(tenant, *, raw_token: str, session_id: Any) -> list[Any]:
    """The per-request lookups' answers, every loaded field of every instance."""
    found = api_token_by_digest(bearer_secret_digest(raw_token))
    assert found is not None
    token, in_team = found
    membership = workspace_membership_of(
        user=tenant.member, team=tenant.team, workspace_id=tenant.workspace.pk
    )
    assert membership is not None
    revoked = key_session_revoked(
        session_id=session_id, workspace_id=tenant.workspace.pk, user_id=tenant.member.pk
    )
    loaded = [token, token.user, token.team, token.team.org, membership, membership.workspace]
    return [*map(fields, loaded), in_team, revoked]


def test_the_lookups_send_the_same_statements_and_read_the_same_rows_by_either_path(
    tenant, sent, through_django
):
    _, raw_token = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    session = key_session_open(workspace=tenant.workspace, user=tenant.member)

    def read() -> tuple[list[Any], Statements, int]:
        sent.clear()
        through_django.clear()
        answers = lookups(tenant, raw_token=raw_token, session_id=session.pk)
        return answers, list(sent), len(through_django)

    direct = read()
    with connection.execute_wrapper(passthrough):
        wrapped = read()
    with CaptureQueriesContext(connection) as logged:
        counted = read()

    assert len(direct[1]) == 3
    assert direct[2] == 0
    assert wrapped == counted == (*direct[:2], 3)
    assert len(logged.captured_queries) == 3


def test_a_save_sends_the_same_statements_by_either_path(memory_revision, sent, through_django):
    workspace, author = memory_revision.file.workspace, memory_revision.author

    def save(base: int) -> tuple[Statements, int]:
        sent.clear()
        through_django.clear()
        # Each Save changes the size, so each reads the org's quota too.
        content = f"- note {base}\n" * base
        memory_save(workspace=workspace, author=author, base_version=base, content=content)
        # The SQL text and each parameter's type: the values (the time, the sealed text)
        # differ from one Save to the next, and Django names each savepoint anew.
        statements = [
            (sql, [type(value) for value in params])
            for sql, params in sent
            if "SAVEPOINT" not in sql
        ]
        return statements, len(through_django)

    direct, direct_through_django = save(1)
    with connection.execute_wrapper(passthrough):
        wrapped, wrapped_through_django = save(2)

    assert wrapped == direct
    assert direct_through_django == len(sent) - len(direct)  # the savepoints only
    assert wrapped_through_django == len(sent)


def version_invalid(file: File) -> tuple[str, list[Any]]:
    """A statement the file's CHECK constraint refuses."""
    return f"UPDATE {table(File)} SET current_version = 0 WHERE id = %s", [file.pk]


def test_a_database_error_on_the_driver_cursor_is_djangos(memory_revision, through_django):
    file = memory_revision.file
    through_django.clear()
    with (
        pytest.raises(IntegrityError) as refused,
        transaction.atomic(),
        driver_cursor() as cursor,
    ):
        cursor.execute(*version_invalid(file))
    with (
        pytest.raises(DatabaseError) as failed,
        transaction.atomic(),
        driver_cursor() as cursor,
    ):
        cursor.execute(f"SELECT no_such_column FROM {table(File)}", [])

    driver = cast(Any, connection).Database  # psycopg or sqlite3
    assert isinstance(refused.value.__cause__, driver.IntegrityError)
    assert violation_code(refused.value) == "VERSION_INVALID"
    assert isinstance(failed.value.__cause__, driver.Error)
    assert type(failed.value).__module__ == "django.db.utils"
    # As after a failed statement through Django's cursor: the connection is checked as
    # the request ends.
    assert connection.errors_occurred
    assert [sql for sql, _ in through_django if "SAVEPOINT" not in sql] == []


def test_driver_statements_belong_to_the_enclosing_transaction(memory_revision):
    file = memory_revision.file
    bump = f"UPDATE {table(File)} SET current_version = current_version + 1 WHERE id = %s"
    with transaction.atomic(), driver_cursor() as cursor:
        cursor.execute(bump, [file.pk])
        transaction.set_rollback(True)
    file.refresh_from_db()
    assert file.current_version == 1

    with transaction.atomic():
        with (
            pytest.raises(IntegrityError),
            transaction.atomic(savepoint=False),
            driver_cursor() as cursor,
        ):
            cursor.execute(*version_invalid(file))
        # As Django's cursor refuses a statement once the transaction is broken.
        with pytest.raises(TransactionManagementError), driver_cursor() as cursor:
            cursor.execute(bump, [file.pk])


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_statement_on_a_killed_connection_fails_as_djangos_and_the_next_reconnects(
    memory_revision, through_django
):
    workspace = memory_revision.file.workspace
    data_key = workspace_data_key(workspace=workspace)
    backend_terminate(connection.connection.info.backend_pid)
    through_django.clear()

    with pytest.raises(OperationalError):
        memory_current_get(workspace=workspace, data_key=data_key)
    assert connection.errors_occurred
    # What Django does as each request ends: the broken connection is closed.
    connection.close_if_unusable_or_obsolete()

    assert memory_current_get(workspace=workspace, data_key=data_key).content == "- likes tea\n"
    assert through_django == []


def orm_loaded(model: Any, pk: Any, deferred: frozenset[str]) -> Any:
    return model.objects.defer(*deferred).get(pk=pk)


def test_an_instance_is_what_the_orm_loads_from_the_same_row(tenant):
    """`sql.instance` builds the per-request lookups' instances without `Model.__init__`'s
    walk: each is what the ORM loads, field for field, deferred for deferred."""
    _, raw_token = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    found = api_token_by_digest(bearer_secret_digest(raw_token))
    assert found is not None
    token = found[0]
    for built, deferred in (
        (token, _API_TOKEN_DEFERRED[ApiToken]),
        (token.user, CALLER_DEFERRED[User]),
        (token.team, CALLER_DEFERRED[Team]),
        (token.team.org, CALLER_DEFERRED[Org]),
    ):
        loaded = orm_loaded(type(built), built.pk, deferred)
        # A relation the lookup filled is in the cache of fields, not among the values.
        assert fields(built) == fields(loaded)
        assert built.get_deferred_fields() == loaded.get_deferred_fields() == deferred
        assert (built._state.adding, built._state.db) == (False, loaded._state.db)


def test_an_instance_built_while_a_receiver_listens_calls_it_as_the_orm_does(tenant):
    _, raw_token = api_token_create(user=tenant.member, team=tenant.team, name="cli")
    heard: list[Any] = []

    def receiver(sender: Any, instance: Any, **kwargs: Any) -> None:
        heard.append(instance)

    post_init.connect(receiver, sender=ApiToken)
    try:
        found = api_token_by_digest(bearer_secret_digest(raw_token))
    finally:
        post_init.disconnect(receiver, sender=ApiToken)
    assert found is not None
    assert heard == [found[0]]
    assert heard[0] is found[0]
