"""One settings object, read from the environment (each option is also a variable).

========================  ===================================  =============================
setting                   environment variable                 meaning
========================  ===================================  =============================
``transport``             ``COLLOPS_TRANSPORT``                ``auto``, ``inproc``, ``shm``,
                                                               ``mpi``
``timeout``               ``COLLOPS_TIMEOUT``                  seconds per collective (none)
``tuning_file``           ``COLLOPS_TUNING_FILE``              TOML algorithm choices
``compiled``              ``COLLOPS_COMPILED``                 ``0`` keeps the compiled fast
                                                               path (``collops._direct``)
                                                               unused: pure Python
algorithm overrides       ``COLLOPS_<COLLECTIVE>_ALGORITHM``   e.g. ``ring`` for ALLREDUCE
========================  ===================================  =============================

`settings` is loaded at import; `reload_settings()` reads the environment again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .algorithms.spec import COLLECTIVES


@dataclass(frozen=True)
class Settings:
    """collops' process-wide options."""

    transport: str = "auto"
    timeout: float | None = None
    tuning_file: str | None = None
    algorithms: dict[str, str] = field(default_factory=dict)
    compiled: bool = True

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """Read the settings from ``env`` (default: the process environment)."""
        env = dict(os.environ if env is None else env)
        timeout = env.get("COLLOPS_TIMEOUT")
        overrides = {}
        for c in COLLECTIVES:
            name = env.get(f"COLLOPS_{c.upper()}_ALGORITHM")
            if name:
                overrides[c] = name
        return cls(
            transport=env.get("COLLOPS_TRANSPORT", "auto") or "auto",
            timeout=float(timeout) if timeout else None,
            tuning_file=env.get("COLLOPS_TUNING_FILE") or None,
            algorithms=overrides,
            compiled=env.get("COLLOPS_COMPILED", "1").strip().lower() not in ("0", "no", "false",
                                                                            "off"),
        )


settings = Settings.from_env()
#: bumped whenever the settings change, so cached choices are made again
generation = 0


def reload_settings() -> Settings:
    """Read the environment again and return the new settings."""
    global settings, generation
    settings = Settings.from_env()
    generation += 1
    from .algorithms import selection

    selection.clear_cache()
    return settings
