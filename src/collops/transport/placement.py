"""Which CPUs the ranks of a shared-memory job run on: ``mpiexec``'s ``-bind-to``, for collops.

A rank that waits for a peer spins briefly, then yields its core (see `shm_direct`). When
ranks outnumber cores that is what lets the awaited peer run — but only if the peer is
queued on the same core, or on another core that has a turn free. Linux's load balancer
places the ranks at start-up and, for ranks that are always runnable (spinning or yielding,
never sleeping), rarely moves them after: a 4-rank job on 2 cores may start 3 + 1 and stay
so, every collective then waiting for three ranks to take turns on one core
(docs/performance.md, "Pinning and same-core waits"). So, as Hydra's ``-bind-to core`` and
Open MPI's ``--bind-to core`` do, the launcher can pin rank ``r`` to the ``r mod k``-th of
the ``k`` CPUs it may use itself:

* ``core``: always;
* ``auto`` (the default): only when the ranks outnumber those CPUs. With a core for every
  rank the kernel places them well, and pinning would only keep them from moving away from
  other work on the machine;
* ``none``: never.

A pinned rank sees one CPU in its own affinity mask, so whether the job is oversubscribed is
decided from the CPUs the launcher had, passed to the ranks as ``COLLOPS_JOB_CPUS``
(`job_cpu_count`). The whole plan goes along too (``COLLOPS_BINDING``, `binding_of_job`):
a rank waiting for a peer pinned to its own core yields at once instead of spinning first,
since that peer can run only when it does.
"""

from __future__ import annotations

import os

from ..errors import ArgumentError

#: the binding policies, as ``collops run --bind-to`` spells them
BIND_POLICIES = ("auto", "core", "none")
#: environment variable carrying the number of CPUs the launcher could use
JOB_CPUS_ENV = "COLLOPS_JOB_CPUS"
#: environment variable carrying the CPU of every rank (``-`` for one left to the kernel)
BINDING_ENV = "COLLOPS_BINDING"


def usable_cpus() -> list[int]:
    """The CPUs this process may run on, in increasing order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return list(range(os.cpu_count() or 1))


def check_policy(policy: str, call: str) -> str:
    """``policy`` if it is one of `BIND_POLICIES`, else an ArgumentError naming ``call``."""
    if policy not in BIND_POLICIES:
        raise ArgumentError(call, "bind_to", policy, f"must be one of {', '.join(BIND_POLICIES)}")
    return policy


def plan_binding(nprocs: int, policy: str, cpus: list[int],
                 call: str = "run") -> list[int | None]:
    """The CPU each rank is pinned to (None: left to the kernel) under ``policy``."""
    check_policy(policy, call)
    pin = policy == "core" or (policy == "auto" and nprocs > len(cpus))
    if not pin or not cpus:
        return [None] * nprocs
    return [cpus[rank % len(cpus)] for rank in range(nprocs)]


def rank_environment(binding: list[int | None], job_cpus: int) -> dict[str, str]:
    """The variables that tell a rank about the job's CPUs and its plan."""
    plan = ",".join("-" if cpu is None else str(cpu) for cpu in binding)
    return {JOB_CPUS_ENV: str(job_cpus), BINDING_ENV: plan}


def enter_rank(rank: int, binding: list[int | None], job_cpus: int) -> None:
    """In a rank's process: record the job's CPUs and plan, and pin to the rank's CPU."""
    os.environ.update(rank_environment(binding, job_cpus))
    pin(binding[rank])


def pin(cpu: int | None) -> None:
    """Pin this process to ``cpu`` (None: stay); a CPU taken away meanwhile leaves it be."""
    if cpu is None:
        return
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:  # a cpuset changed under the job: run where the kernel says
        pass


def binding_of_job(size: int) -> list[int | None]:
    """Every rank's CPU as the launcher pinned them (None: not pinned, or not known)."""
    fields = os.environ.get(BINDING_ENV, "").split(",")
    if len(fields) != size or not all(f == "-" or f.isdigit() for f in fields):
        return [None] * size
    return [None if f == "-" else int(f) for f in fields]


def job_cpu_count() -> int:
    """How many CPUs this job's ranks share: the launcher's, else this process's own."""
    text = os.environ.get(JOB_CPUS_ENV, "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    return len(usable_cpus())
