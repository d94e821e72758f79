"""A user's selection table for a test (``COLLOPS_TUNING_FILE``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collops import config


@contextmanager
def user_table(path: Path, rules: str | None) -> Iterator[None]:
    """``rules`` (TOML) written to ``path`` and named by ``COLLOPS_TUNING_FILE`` for the block,
    the settings reloaded (ranks spawned in it inherit the table); None: the built-in table
    alone. Both as they were afterwards."""
    before = os.environ.get("COLLOPS_TUNING_FILE")
    if rules is not None:
        path.write_text(rules)
        os.environ["COLLOPS_TUNING_FILE"] = str(path)
    config.reload_settings()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLLOPS_TUNING_FILE", None)
        else:
            os.environ["COLLOPS_TUNING_FILE"] = before
        config.reload_settings()
