"""What hand-written SQL needs from the ORM, so that it runs on both databases.

Every raw statement of the project builds its identifiers and adapts its values here, as
the ORM would; the comment beside each statement says why the ORM could not write it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, models


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
