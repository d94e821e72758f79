"""One settings object, read from the environment (each option is also a variable).

========================  ===================================  =============================
setting                   environment variable                 meaning
========================  ===================================  =============================
``transport``             ``COLLOPS_TRANSPORT``                ``auto``, ``inproc``, ``shm``,
                                                               ``mpi``
``timeout``               ``COLLOPS_TIMEOUT``                  seconds per collective (none)
``stall_report``          ``COLLOPS_STALL_REPORT``             seconds a rank waits in one
                                                               call before it prints once
                                                               what it waits for, 60; ``0``
                                                               or ``off``: never
``tuning_file``           ``COLLOPS_TUNING_FILE``              TOML algorithm choices (unset:
                                                               `user_tuning_file` if it
                                                               exists; empty: none)
``compiled``              ``COLLOPS_COMPILED``                 ``0`` keeps the compiled fast
                                                               path (``collops._direct``)
                                                               unused: pure Python
``shm_single_copy``       ``COLLOPS_SHM_SINGLE_COPY``          ``0``: no single copy (default:
                                                               the selection table's)
``shm_single_copy_min``   ``COLLOPS_SHM_SINGLE_COPY_MIN``      bytes from which large messages
                                                               go single-copy (default: the
                                                               selection table's)
``shm_p2p_cells``         ``COLLOPS_SHM_P2P_CELLS``            ``0``: point-to-point envelopes
                                                               through the transport's
                                                               messages, not the cell rings
                                                               (default: the selection table's)
``shm_per_rank``          ``COLLOPS_SHM_PER_RANK``             bytes of shared memory a job
                                                               takes per rank at most, besides
                                                               16 MiB (``64M``, ``8M``;
                                                               default 16M)
``spin_seconds``          ``COLLOPS_SPIN_SECONDS``             shared-memory waits poll this
                                                               long first (none when ranks
                                                               outnumber cores), 20e-6
``yield_seconds``         ``COLLOPS_YIELD_SECONDS``            then poll with sched_yield this
                                                               long, 1e-3
``sleep_slice``           ``COLLOPS_SLEEP_SLICE``              then sleep on a futex at most
                                                               this long between checks for
                                                               failures and timeouts, 0.05
``topology``              ``COLLOPS_TOPOLOGY``                 the network the job's ranks
                                                               run on (``torus:8x8x8``, a
                                                               JSON/TOML file): selection
                                                               then counts contention on it
                                                               (unset: not known)
``placement``             ``COLLOPS_PLACEMENT``                the world ranks' nodes on that
                                                               network: ``row-major``
                                                               (default), ``random``, or a
                                                               file of node ids
``call_cache``            ``COLLOPS_CALL_CACHE``               prepared calls a communicator
                                                               keeps (one per signature; the
                                                               oldest goes first), 4096
``ranks_per_node``        ``COLLOPS_RANKS_PER_NODE``           MPI: take ranks ``k*n`` to
                                                               ``k*n+n-1`` for one node (to
                                                               test node-aware algorithms on
                                                               one machine); default: MPI's
algorithm overrides       ``COLLOPS_<COLLECTIVE>_ALGORITHM``   e.g. ``ring`` for ALLREDUCE
========================  ===================================  =============================

`settings` is loaded at import; `reload_settings()` reads the environment again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .algorithms.spec import COLLECTIVES
from .errors import SettingError

#: seconds a rank waits in one call before it reports the stall (`collops.transport.stall`)
DEFAULT_STALL_REPORT = 60.0
#: prepared calls a communicator keeps unless ``COLLOPS_CALL_CACHE`` says otherwise
DEFAULT_CALL_CACHE = 4096


def user_tuning_file(env: dict[str, str] | None = None) -> str:
    """Where `collops tune` writes by default and collops looks when ``COLLOPS_TUNING_FILE`` is
    unset: ``$XDG_CONFIG_HOME/collops/tuning.toml`` (``~/.config/collops/tuning.toml``)."""
    env = dict(os.environ if env is None else env)
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "collops", "tuning.toml")


def _tuning_file(env: dict[str, str]) -> str | None:
    """``COLLOPS_TUNING_FILE`` (empty: none), else the user's file if it exists."""
    if "COLLOPS_TUNING_FILE" in env:
        return env["COLLOPS_TUNING_FILE"] or None
    default = user_tuning_file(env)
    return default if os.path.isfile(default) else None


@dataclass(frozen=True)
class Settings:
    """collops' process-wide options."""

    transport: str = "auto"
    timeout: float | None = None
    #: seconds a rank waits in one call before it prints a stall report (None: never)
    stall_report: float | None = DEFAULT_STALL_REPORT
    tuning_file: str | None = None
    algorithms: dict[str, str] = field(default_factory=dict)
    compiled: bool = True
    shm_single_copy: bool | None = None
    shm_single_copy_min: int | None = None
    shm_p2p_cells: bool | None = None
    #: bytes of shared memory per rank (`collops.shm.segment.Layout.for_ranks`; None: 16 MiB)
    shm_per_rank: int | None = None
    #: the shared-memory wait (`collops.shm.waiting`): seconds of polling, of polling with
    #: sched_yield, and the longest single sleep
    spin_seconds: float = 20e-6
    yield_seconds: float = 1e-3
    sleep_slice: float = 0.05
    #: the declared network and the ranks' placement on it (`collops.runtime.network`)
    topology: str | None = None
    placement: str = "row-major"
    #: MPI: ranks per "node" in place of MPI's shared-memory split (None: MPI's)
    ranks_per_node: int | None = None
    #: prepared calls (one per call signature) a communicator keeps (`runtime.cache`)
    call_cache: int = DEFAULT_CALL_CACHE

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """Read the settings from ``env`` (default: the process environment)."""
        env = dict(os.environ if env is None else env)
        single_copy = env.get("COLLOPS_SHM_SINGLE_COPY")
        p2p_cells = env.get("COLLOPS_SHM_P2P_CELLS")
        overrides = {}
        for c in COLLECTIVES:
            name = env.get(f"COLLOPS_{c.upper()}_ALGORITHM")
            if name:
                overrides[c] = name
        return cls(
            transport=env.get("COLLOPS_TRANSPORT", "auto") or "auto",
            timeout=_positive(env, "COLLOPS_TIMEOUT", None, "a timeout"),
            stall_report=_positive(env, "COLLOPS_STALL_REPORT", DEFAULT_STALL_REPORT,
                                   "a stall report threshold", off=True),
            tuning_file=_tuning_file(env),
            algorithms=overrides,
            compiled=_flag(env.get("COLLOPS_COMPILED", "1")),
            shm_single_copy=_flag(single_copy) if single_copy else None,
            shm_single_copy_min=_count(env, "COLLOPS_SHM_SINGLE_COPY_MIN", zero=True),
            shm_p2p_cells=_flag(p2p_cells) if p2p_cells else None,
            shm_per_rank=_bytes(env, "COLLOPS_SHM_PER_RANK"),
            spin_seconds=_seconds(env, "COLLOPS_SPIN_SECONDS", cls.spin_seconds),
            yield_seconds=_seconds(env, "COLLOPS_YIELD_SECONDS", cls.yield_seconds),
            sleep_slice=_seconds(env, "COLLOPS_SLEEP_SLICE", cls.sleep_slice),
            topology=env.get("COLLOPS_TOPOLOGY", "").strip() or None,
            placement=env.get("COLLOPS_PLACEMENT", "").strip() or "row-major",
            ranks_per_node=_count(env, "COLLOPS_RANKS_PER_NODE"),
            call_cache=_count(env, "COLLOPS_CALL_CACHE") or DEFAULT_CALL_CACHE,
        )


def _flag(value: str) -> bool:
    """An on/off variable's value: off for 0, no, false, off."""
    return value.strip().lower() not in ("0", "no", "false", "off")


def _count(env: dict[str, str], name: str, zero: bool = False) -> int | None:
    """A positive (with ``zero``: or zero) whole number from ``env[name]`` (None when unset
    or empty)."""
    text = env.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit() or (int(text) == 0 and not zero):
        kind = "whole number ≥ 0" if zero else "positive whole number"
        raise SettingError(f"{name} must be a {kind}, not {text!r}")
    return int(text)


def _bytes(env: dict[str, str], name: str) -> int | None:
    """A positive byte count from ``env[name]`` such as ``4096``, ``64K`` or ``16M`` (None
    when unset or empty)."""
    text = env.get(name, "").strip()
    if not text:
        return None
    from .sim.api import parse_size  # the one parser of sizes with units
    try:
        value = parse_size(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise SettingError(f"{name} must be a positive byte count such as 16M, not {text!r}")
    return value


def _seconds(env: dict[str, str], name: str, default: float) -> float:
    """A duration from ``env[name]`` (``default`` when unset or empty)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    value = _number(name, text, "a duration in seconds")
    if value < 0:
        raise SettingError(f"{name} must be a duration in seconds, not {text!r}")
    return value


def _positive(env: dict[str, str], name: str, default: float | None, what: str,
              off: bool = False) -> float | None:
    """A positive number of seconds from ``env[name]`` (``default`` when unset or empty;
    with ``off``, None for ``0``, ``off``, ``no``, ``false``)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    if off and text.lower() in ("off", "no", "false"):
        return None
    value = _number(name, text, f"{what} in seconds")
    if off and value == 0:
        return None
    if not value > 0 or value == float("inf"):
        raise SettingError(f"{name}={text!r}: {what} must be a positive number of seconds"
                           + (" (0 or off: never)" if off else ""))
    return value


def _number(name: str, text: str, what: str) -> float:
    """``text`` as a float, or a `SettingError` naming the variable ``name``."""
    try:
        value = float(text)
    except ValueError:
        raise SettingError(f"{name}={text!r} is not {what}") from None
    if value != value:
        raise SettingError(f"{name}={text!r} is not {what}")
    return value


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
