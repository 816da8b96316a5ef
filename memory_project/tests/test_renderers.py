"""The /api/ renderer writes with orjson the bytes DRF's renderer writes, and refuses what it
refuses."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer as DRFJSONRenderer

from memory_project.api.renderers import JSONRenderer

UTC = datetime.UTC
PLUS_TWO = datetime.timezone(datetime.timedelta(hours=2))
SAME = [
    {"ok": True, "teamId": 1},
    {"text": "- é, 中文, emoji 🙂, quote \" backslash \\ tab \t newline \n nul \x00 <>&'"},
    {"separators": "line\u2028paragraph\u2029end"},
    [None, 0, -1, 2**63 - 1, -(2**63), 2**64 - 1, False, "", [], {}],
    {"big": 2**64, "bigger": -(2**70)},
    {"at": datetime.datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)},
    {"at": datetime.datetime(2026, 5, 1, 12, 30, 15, tzinfo=PLUS_TWO)},
    {"naive": datetime.datetime(2026, 5, 1, 12, 30), "day": datetime.date(2026, 5, 1)},  # noqa: DTZ001
    {"time": datetime.time(12, 30, 1, 5), "span": datetime.timedelta(seconds=90)},
    {"amount": decimal.Decimal("12.50"), "id": uuid.UUID("12345678-1234-5678-1234-567812345678")},
    {"lazy": gettext_lazy("Not found."), "tuple": (1, "two")},
    {1: "an integer name", None: "none", False: "bool"},
    {"finite": 1.5, "null": None},
]


@pytest.mark.parametrize("data", SAME)
def test_the_bytes_are_drfs(data: Any) -> None:
    assert JSONRenderer().render(data) == DRFJSONRenderer().render(data)


def test_an_indented_answer_is_drfs() -> None:
    data = {"a": [1, {"b": "c"}]}
    media_type = "application/json; indent=2"
    assert JSONRenderer().render(data, media_type) == DRFJSONRenderer().render(data, media_type)
    assert b"\n" in JSONRenderer().render(data, media_type)


def test_nothing_renders_as_nothing() -> None:
    assert JSONRenderer().render(None) == b""


@pytest.mark.parametrize(
    "data",
    [
        {"x": float("nan")},
        {"x": [None, float("inf")]},
        {"x": (None, -float("inf"))},
        {"x": None, "amount": decimal.Decimal("NaN")},
        {"x": decimal.Decimal("Infinity")},
    ],
)
def test_a_float_that_is_not_finite_is_refused_as_drf_refuses_it(data: Any) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        DRFJSONRenderer().render(data)
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        JSONRenderer().render(data)


def test_a_lone_surrogate_is_refused_as_drf_refuses_it() -> None:
    with pytest.raises(UnicodeEncodeError):
        DRFJSONRenderer().render({"text": "a\ud800b"})
    with pytest.raises(UnicodeEncodeError):
        JSONRenderer().render({"text": "a\ud800b"})


def test_an_object_drf_cannot_encode_is_refused_as_drf_refuses_it() -> None:
    with pytest.raises(TypeError):
        DRFJSONRenderer().render({"x": object()})
    with pytest.raises(TypeError):
        JSONRenderer().render({"x": object()})
