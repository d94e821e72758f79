"""A template table that counts its lookups: the bound calls of `Comm` make none, so a test
can tell which path a call took."""

from __future__ import annotations

from typing import Any


class CountingDict(dict):  # type: ignore[type-arg]
    """A dict whose ``get`` calls are counted in ``lookups``."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lookups = 0

    def get(self, *args: Any) -> Any:
        """``dict.get``, counted."""
        self.lookups += 1
        return super().get(*args)
