"""Reading what a job's ranks printed."""

from __future__ import annotations

import json
from typing import Any


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in ``text`` (the ranks share one stdout, so lines may run together)."""
    decoder, found, i = json.JSONDecoder(), [], text.find("{")
    while i >= 0:
        obj, end = decoder.raw_decode(text, i)
        found.append(obj)
        i = text.find("{", end)
    return found
