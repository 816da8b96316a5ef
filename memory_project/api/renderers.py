"""The JSON renderer of every /api/ answer: DRF's, its bytes written by orjson.

DRF's renderer encodes with the json module: a recall's 8 KiB of memory text took about 7% of
the recall's instructions in its string escaping alone, which orjson does several times
faster. The answer's bytes stay DRF's, byte for byte, for what the API answers (objects,
arrays, strings, integers, booleans, null, and what DRF's encoder converts): the same compact
separators, UTF-8 rather than escapes, U+2028 and U+2029 escaped, datetimes, dates, times,
decimals and the rest converted by DRF's own encoder. Where the two libraries differ, DRF's
renderer writes the answer (or refuses it) as before:

- a float that is not finite: orjson writes null, DRF refuses it (its STRICT_JSON);
- an integer beyond 64 bits, a string holding a lone surrogate, an object's name that is not
  a string, nesting orjson will not go to: orjson refuses, and DRF renders or refuses it as it
  always did;
- a float orjson writes with another exponent form (1e16 where Python writes 1e+16): the same
  number, but not the same bytes; no answer of this API carries a float;
- an indented answer (`Accept: application/json; indent=4`), or DRF's JSON settings changed
  from what this renderer writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer as DRFJSONRenderer
from rest_framework.utils.encoders import JSONEncoder

_OPTIONS = (
    # DRF's encoder converts these, not orjson's own: a datetime's UTC as Z, for one.
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)
_ENCODER = JSONEncoder()
# JavaScript's line and paragraph separators, which DRF escapes (JSON does not require it).
_SEPARATORS = ((b"\xe2\x80\xa8", b"\\u2028"), (b"\xe2\x80\xa9", b"\\u2029"))
# The values orjson writes itself; a float among them may be one it wrote as null.
_PLAIN = (str, int, bool, type(None))


class JSONRenderer(DRFJSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if (
            data is None
            or self.ensure_ascii
            or not self.compact
            or not self.strict
            or self.get_indent(accepted_media_type or "", renderer_context or {}) is not None
        ):
            return super().render(data, accepted_media_type, renderer_context)
        try:
            rendered = orjson.dumps(data, default=_converted, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        if b"null" in rendered and not _finite_throughout(data):
            return super().render(data, accepted_media_type, renderer_context)
        for raw, escaped in _SEPARATORS:
            if raw in rendered:
                rendered = rendered.replace(raw, escaped)
        return rendered


def _converted(value: Any) -> Any:
    """What DRF's encoder makes of a value JSON has no type for; a decimal that converts to a
    float that is not finite is refused (orjson would write it as null), and DRF's renderer
    then refuses it in its own words."""
    converted = _ENCODER.default(value)
    if isinstance(converted, float) and not math.isfinite(converted):
        raise ValueError("Out of range float values are not JSON compliant")
    return converted


def _finite_throughout(data: Any) -> bool:
    """True if `data` holds no float that is not finite, and nothing that DRF's encoder
    converts (which may hold one): orjson writes such a float as null. Walked without
    recursion, as the parser's depth bound is."""
    pending = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, _PLAIN):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list | tuple):
            pending.extend(value)
        else:
            return False
    return True
