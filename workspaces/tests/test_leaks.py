"""The leak scan itself: it finds the text in every encoding a column or payload could use."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from workspaces.tests.leaks import holds

TEXT = "ZEBRA-7f3a-ü-marker"

ENCODERS = {
    "utf-8": lambda s: s.encode(),
    "utf-16": lambda s: s.encode("utf-16-le"),
    "json-ascii": lambda s: json.dumps({"content": s}).encode(),
    "json-of-json": lambda s: json.dumps(json.dumps({"content": s})).encode(),
    "percent": lambda s: quote(s).encode(),
    "hex": lambda s: s.encode().hex().encode(),
    "HEX": lambda s: s.encode().hex().upper().encode(),
    "base64": lambda s: base64.b64encode(s.encode()),
    "base64url": lambda s: base64.urlsafe_b64encode(s.encode()),
}


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
@pytest.mark.parametrize("offset", [0, 1, 2, 3, 4])
def test_the_scan_finds_the_text_inside_a_longer_encoded_value(encoding, offset):
    surrounding = "p" * offset + f"the note says {TEXT} and more" + "s" * offset

    encoded = ENCODERS[encoding](surrounding)

    assert holds(encoded, TEXT)
    assert not holds(encoded, TEXT.replace("7f3a", "7f3b"))
