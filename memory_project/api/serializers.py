"""The bases every route's input shapes build on: a request body is read strictly, and a
query string as text.

DRF converts what it can (`5` becomes `"5"` for a text field, `"true"` a boolean) and drops
fields it does not know. A client that sends the wrong type or misspells a field would then
have something other than what it meant stored, or silently nothing; so a body is refused
instead, naming each field (VALIDATION_FAILED). The query string is text by nature, so query
values are converted as usual (a whole number from its digits only), and what cannot be is the
same VALIDATION_FAILED, naming each parameter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from workspaces.errors import ValidationFailed
from workspaces.lookalikes import display_name_validator

# The JSON types each kind of field takes, by the field's class (the first match wins):
# bool is an int in Python, so it is named apart and refused where a number is meant.
JSON_TYPES: list[tuple[type[serializers.Field], tuple[type, ...], str]] = [
    (serializers.BooleanField, (bool,), "a boolean"),
    (serializers.IntegerField, (int,), "a whole number"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.DecimalField, (int, float), "a number"),
    (serializers.CharField, (str,), "a string"),
    (serializers.ChoiceField, (str,), "a string"),
    (serializers.UUIDField, (str,), "a string"),
    (serializers.DateTimeField, (str,), "a string"),
]


def json_type_problem(field: serializers.Field, value: Any) -> str | None:
    """Why `value` is not of the JSON type `field` takes, or None if it is."""
    if value is None:
        return None  # the field's own allow_null decides
    for kind, accepted, name in JSON_TYPES:
        if isinstance(field, kind):
            is_bool = isinstance(value, bool)
            if isinstance(value, accepted) and (bool in accepted or not is_bool):
                return None
            return f"Must be {name}, not {_json_type_name(value)}."
    return None


def _json_type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return "another type"


_SURROGATE = re.compile("[\ud800-\udfff]")


class ProhibitSurrogateCharacters(ProhibitSurrogateCharactersValidator):
    """DRF's refusal of a lone surrogate (which JSON can carry), with its message and code.
    DRF's own loops over every character in Python, which took a third of the CPU of a 4 KiB
    Save; here UTF-8 encoding (in C) finds that there is none, and only a text that holds
    one is searched for it, to name it."""

    def __call__(self, value: Any) -> None:
        text = str(value)
        try:
            text.encode()
            return
        except UnicodeEncodeError:
            found = _SURROGATE.search(text)
        if found is not None:
            message = self.message.format(code_point=ord(found.group()))
            raise serializers.ValidationError(message, code=self.code)


class DisplayNameField(serializers.CharField):
    """A name a person types (a workspace's, bot's, token's): refused, naming the field, if it
    holds a character that displays as nothing (`display_name_validator`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(display_name_validator)


class StrictSerializer(serializers.Serializer):
    """A JSON request body: only the fields it declares, each of its own JSON type."""

    # What the unknown field was sent in, as its refusal names it.
    sent_in = "body"

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for field in fields.values():
            if isinstance(field, serializers.CharField):
                field.validators = [
                    ProhibitSurrogateCharacters()
                    if type(validator) is ProhibitSurrogateCharactersValidator
                    else validator
                    for validator in field.validators
                ]
        return fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            problems: dict[str, list[str]] = {
                name: [f"Unknown field; this {self.sent_in} takes {_listed(writable)}."]
                for name in sorted(set(data) - writable, key=str)
            }
            for name in writable & set(data):
                problem = json_type_problem(self.fields[name], data[name])
                if problem:
                    problems[name] = [problem]
            if problems:
                raise serializers.ValidationError(problems)
        return super().to_internal_value(data)


def _listed(names: set[str]) -> str:
    return ", ".join(f"`{name}`" for name in sorted(names)) or "no fields"


def is_whole_number(raw: str) -> bool:
    """A whole number in its one spelling, in a query or a header: ASCII digits, without a
    leading zero (`0` aside). `int()` would also take a sign, spaces, `_`, leading zeros and
    other scripts' digits, and DRF a trailing `.0`: spellings of the same number that another
    reader of the request (a proxy, a cache keyed on it, a log) may not take as that number."""
    return raw.isascii() and raw.isdigit() and (raw == "0" or not raw.startswith("0"))


class QuerySerializer(serializers.Serializer):
    """A route's query parameters; what does not parse is VALIDATION_FAILED, as for a body,
    with a message that puts the fault in the query, not the body."""

    def to_internal_value(self, data: Any) -> Any:
        # DRF reads a blank value of an optional field as absent, and " 5", "5.0" or "+5"
        # as 5. A number is read as the page size is (memory_project.api.pagination), and a
        # blank is refused where the field takes none (the schema's minLength 1).
        problems = {}
        for name, field in self.fields.items():
            if name not in data:
                continue
            if isinstance(field, serializers.IntegerField) and not is_whole_number(data[name]):
                problems[name] = ["Must be a whole number, in the digits 0 to 9."]
            elif data[name] == "" and not getattr(field, "allow_blank", False):
                problems[name] = ["May not be blank; leave the parameter out instead."]
        if problems:
            raise serializers.ValidationError(problems)
        return super().to_internal_value(data)

    def is_valid(self, *, raise_exception: bool = False) -> bool:
        is_valid = super().is_valid(raise_exception=False)
        if not is_valid and raise_exception:
            raise ValidationFailed(fields=self.errors)
        return is_valid
