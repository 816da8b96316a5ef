"""The values hand-written SQL sends are those the ORM would send, on PostgreSQL and on SQLite
alike: `pk_param` and `datetime_param` answer them without asking the connection each time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from automation.models import Admission
from workspaces.models import KeySession, Workspace
from workspaces.sql import datetime_param, pk_param

KEY = uuid.UUID("0b6a7c1e-2f4d-4e8a-9c3b-5d6e7f8091a2")


@pytest.mark.parametrize("value", [KEY, str(KEY), KEY.hex, KEY.int, None])
@pytest.mark.parametrize("model", [KeySession, Admission])
def test_a_uuid_key_is_sent_as_its_field_prepares_it(model, value):
    assert pk_param(model, value) == model._meta.pk.get_db_prep_value(value, connection)


@pytest.mark.parametrize("value", [7, "7", None])
def test_an_integer_key_is_sent_as_its_field_prepares_it(value):
    assert pk_param(Workspace, value) == Workspace._meta.pk.get_db_prep_value(value, connection)


def test_a_uuid_that_is_not_one_is_refused_as_by_its_field():
    with pytest.raises(ValidationError):
        KeySession._meta.pk.get_db_prep_value("not a uuid", connection)
    with pytest.raises(ValidationError):
        pk_param(KeySession, "not a uuid")


def test_an_aware_datetime_is_sent_as_the_database_adapts_it():
    moment = datetime(2026, 12, 1, 17, 30, 5, 123456, tzinfo=UTC)

    assert datetime_param(moment) == connection.ops.adapt_datetimefield_value(moment)
