"""An IntegrityError read by the name of the constraint it broke, never by a second query.

Every named constraint carries, as its `violation_error_code`, the code of the domain error
its violation means (docs/errors.md). A service catches IntegrityError inside a savepoint,
asks `violation_code` which code the violation carries, raises that domain error with the
detail it knows, and re-raises anything else; `violation_raises` does that for a block
whose one expected violation is a domain error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from django.apps import apps
from django.db import IntegrityError, transaction
from django.db.models import BaseConstraint, UniqueConstraint

from workspaces.errors import DomainError

# SQLite names a CHECK constraint in its message, but a UNIQUE one only by its columns.
_SQLITE_CHECK = re.compile(r"CHECK constraint failed: (\w+)")
_SQLITE_UNIQUE = re.compile(r"UNIQUE constraint failed: (.+)")


def violation_code(error: IntegrityError) -> str | None:
    """The code of the domain error `error` means: its constraint's `violation_error_code`.

    None for a violation of no named constraint (a NOT NULL, a foreign key, a primary key).
    """
    name = violated_constraint(error)
    return None if name is None else _constraints_by_name()[name].violation_error_code


@contextmanager
def violation_raises(error: type[DomainError], **detail: Any) -> Iterator[None]:
    """Run the block in a savepoint; a violation of a constraint whose code is `error`'s
    becomes `error` with `detail`, and any other IntegrityError propagates."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as violation:
        if violation_code(violation) != error.code:
            raise
        raise error(**detail) from None


def violated_constraint(error: IntegrityError) -> str | None:
    """The name of the constraint (of an installed model's Meta) that `error` reports, if any."""
    # PostgreSQL reports the constraint's name as a field of the error.
    diagnostics = getattr(error.__cause__, "diag", None)
    if diagnostics is not None:
        name = diagnostics.constraint_name
        return name if name in _constraints_by_name() else None
    # SQLite reports only a message, which is all there is to read.
    message = str(error)
    if match := _SQLITE_CHECK.fullmatch(message):
        return match[1] if match[1] in _constraints_by_name() else None
    if match := _SQLITE_UNIQUE.fullmatch(message):
        table_columns = [column.strip().split(".", 1) for column in match[1].split(",")]
        tables = {table for table, _ in table_columns}
        columns = frozenset(column for _, column in table_columns)
        if len(tables) == 1:
            return _uniques_by_columns().get((tables.pop(), columns))
    return None


@cache
def _constraints_by_name() -> dict[str, BaseConstraint]:
    return {
        constraint.name: constraint
        for model in apps.get_models()
        for constraint in model._meta.constraints
    }


@cache
def _uniques_by_columns() -> dict[tuple[str, frozenset[str]], str]:
    """The name of each UniqueConstraint over fields, by its table and columns: how SQLite
    names it."""
    uniques: dict[tuple[str, frozenset[str]], str] = {}
    for model in apps.get_models():
        for constraint in model._meta.constraints:
            if isinstance(constraint, UniqueConstraint) and constraint.fields:
                columns = frozenset(
                    str(field.column)
                    for field in model._meta.concrete_fields
                    if field.name in constraint.fields
                )
                uniques[(model._meta.db_table, columns)] = constraint.name
    return uniques
