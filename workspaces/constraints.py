"""The constraints every app's models declare alike, built one way.

Each builder takes the field, what it checks against, the constraint's name
(`<app>_<model>_<rule>`) and the code its violation means (its `violation_error_code`, read
by `workspaces.violations`). A rule of its own shape stays a `CheckConstraint` written out
where its model declares it.
"""

from __future__ import annotations

import operator
from functools import reduce

from django.db import models
from django.db.models import Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact


def choices_check(
    field: str, choices: type[models.Choices], name: str, code: str
) -> models.CheckConstraint:
    """`field` holds one of `choices`' values: the CHECK every choices field gets."""
    return models.CheckConstraint(
        condition=Q(**{f"{field}__in": choices.values}), name=name, violation_error_code=code
    )


def minimum_check(
    fields: str | tuple[str, ...], minimum: int, name: str, code: str
) -> models.CheckConstraint:
    """Each of `fields` is at least `minimum` (0 for a counter or a revision, 1 for a
    version)."""
    each = (fields,) if isinstance(fields, str) else fields
    condition = reduce(operator.and_, (Q(**{f"{field}__gte": minimum}) for field in each))
    return models.CheckConstraint(condition=condition, name=name, violation_error_code=code)


def set_iff_check(
    field: str, lookup: str, value: object, name: str, code: str, *, is_set: bool = True
) -> models.CheckConstraint:
    """`field` is set (not null) exactly when `lookup` matches `value`; with `is_set=False`,
    null exactly then."""
    when = {lookup: value}
    condition = Q(**when, **{f"{field}__isnull": not is_set}) | (
        ~Q(**when) & Q(**{f"{field}__isnull": is_set})
    )
    return models.CheckConstraint(condition=condition, name=name, violation_error_code=code)


def after_check(
    later: str, earlier: str, name: str, code: str, *, strictly: bool = True
) -> models.CheckConstraint:
    """The moment in `later` comes after the one in `earlier` (with `strictly=False`, or at
    it): an expiry after its creation, a finish after its start."""
    lookup = "gt" if strictly else "gte"
    return models.CheckConstraint(
        condition=Q(**{f"{later}__{lookup}": models.F(earlier)}),
        name=name,
        violation_error_code=code,
    )


def unique(fields: list[str], name: str, code: str) -> models.UniqueConstraint:
    """No two rows share `fields`."""
    return models.UniqueConstraint(fields=fields, name=name, violation_error_code=code)


def length_check(field: str, length: int, name: str, code: str) -> models.CheckConstraint:
    """`field` is exactly `length` characters (64 for a hex SHA-256)."""
    return models.CheckConstraint(
        condition=Exact(Length(field), length), name=name, violation_error_code=code
    )
