"""The two things hand-written SQL here needs from the ORM, so it runs on both databases."""

from __future__ import annotations

from typing import Any

from django.db import connection, models


def table(model: type[models.Model]) -> str:
    """The model's table name, quoted for this database."""
    return connection.ops.quote_name(model._meta.db_table)


def pk_param(model: type[models.Model], value: Any) -> Any:
    """A primary-key value as this database stores it (UUIDs are text on SQLite)."""
    return model._meta.pk.get_db_prep_value(value, connection)
