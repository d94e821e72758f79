"""The bounded cache of what the call path works out once per signature.

A communicator keeps one (`CommBase._cache`), mapping its call signatures to their
`PreparedCall`s. What depends on no communicator — envelope headers and specs, dtype tokens,
schedules' plans — is kept in `SHARED`.
"""

from __future__ import annotations

from typing import Any

#: entries one cache keeps; a new entry beyond it drops the oldest
CACHE_LIMIT = 4096


class BoundedCache(dict[Any, Any]):
    """A dict of at most ``limit`` entries: `put` drops the oldest to make room."""

    __slots__ = ("limit",)

    def __init__(self, limit: int = CACHE_LIMIT) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Any, value: Any) -> Any:
        """Keep ``value`` under ``key`` (dropping the oldest entry when full); ``value``."""
        if len(self) >= self.limit and key not in self:
            del self[next(iter(self))]
        self[key] = value
        return value


#: the entries that depend on no communicator, keyed by kind, then signature
SHARED = BoundedCache()
