"""The contract every registered algorithm keeps on every transport that can run it.

`run_contract` runs on each rank of one job (threads, shared-memory processes or an MPI job).
For every algorithm of the registry the communicator's transport offers — schedules and the
transport's native collectives alike — and for automatic selection, it makes every call of
`contract_cases`: blocking three times (the first call takes the general path, the later ones
the prepared and bound one), in place where the collective has an in-place form, then
non-blocking with all of the algorithm's calls in flight twice over, waited for last first.
Each rank checks its own results against numpy and returns a JSON-ready report;
`check_reports` asserts on the reports of all ranks.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

import collops
from collops.algorithms import Algorithm, all_algorithms
from collops.check.cases import Case, assert_rank_matches, cases_for, make_case
from tests.support.harness import as_result, call_collective, start_collective

#: the name under which automatic selection is reported
AUTO = "auto"
#: elements (at most, per rank) of one more case per collective: beyond a direct slot, the
#: transports' eager and pipelined messages, and a stream chunk
LARGE_COUNT = 40_000
#: collectives whose rank may pass ``out=x`` (MPI_IN_PLACE)
IN_PLACE = ("allreduce", "reduce")
#: resources a transport must offer a world communicator, so its natives cannot go untested
REQUIRED = {"inproc": frozenset(), "shm": frozenset({"shm_direct", "shm_stream"}),
            "mpi": frozenset({"mpi"})}
#: blocking calls per case: the general path first, then the prepared one, then the bound one
REPEATS = 3

Report = dict[str, Any]


def contract_cases(collective: str, p: int, seed: int) -> list[Case]:
    """The usual cases of ``collective`` (zero and uneven counts, dtypes, operators, roots)
    plus one large uneven case."""
    cases = cases_for(collective, p, seed=seed)
    if collective != "barrier":
        cases.append(make_case(collective, p, LARGE_COUNT, uneven=True, seed=seed + 99))
    return cases


def runs_on(algorithm: Algorithm, transport: str, resources: frozenset[str]) -> bool:
    """Whether ``transport``, offering ``resources``, can run ``algorithm``."""
    return ((not algorithm.transports or transport in algorithm.transports)
            and algorithm.needs <= resources)


def expected_keys(transport: str, p: int, seed: int, resources: frozenset[str],
                  keep: Callable[[str, str], bool]) -> set[str]:
    """``collective.algorithm`` of every algorithm that must run: offered by the transport
    and eligible for at least one case."""
    return {f"{a.collective}.{a.name}" for a in all_algorithms()
            if keep(a.collective, a.name) and runs_on(a, transport, resources)
            and any(a.eligible(c.specs[0]) for c in contract_cases(a.collective, p, seed))}


def _entries(transport: str, resources: frozenset[str], keep: Callable[[str, str], bool],
             ) -> list[tuple[str, Algorithm | None]]:
    """(collective, algorithm) to run: every offered algorithm, then automatic selection."""
    chosen: list[tuple[str, Algorithm | None]] = [
        (a.collective, a) for a in all_algorithms()
        if keep(a.collective, a.name) and runs_on(a, transport, resources)]
    collectives = dict.fromkeys(c for c, _ in chosen)
    return chosen + [(c, None) for c in collectives if keep(c, AUTO)]


def _in_place(comm: collops.Comm, case: Case, algorithm: str | None) -> Any:
    """``case``'s reduction with a copy of ``x`` as ``out`` where the rank gets a result;
    the result must be that very array."""
    r = comm.rank
    spec, x = case.specs[r], np.array(case.inputs[r], copy=True)
    kw = {"algorithm": algorithm} if algorithm else {}
    if case.collective == "allreduce":
        got = comm.allreduce(x, case.op, out=x, **kw)
    else:
        gets = r == spec.root
        got = comm.reduce(x, case.op, spec.root, out=x if gets else None, **kw)
        if not gets:
            return as_result(case, got)
    assert got is not None and got.ctypes.data == x.ctypes.data, "the result is not in x"
    return got


class _Checker:
    """Makes calls on one rank, checks each result against numpy and keeps the failures."""

    def __init__(self, comm: collops.Comm, key: str) -> None:
        self.comm, self.key = comm, key
        self.failures: list[str] = []
        self.calls = 0

    def check(self, how: str, case: Case, call: Callable[[], Any],
              algorithm: str | None = None) -> None:
        """Run ``call`` and compare its result with ``case``'s answer for this rank."""
        self.calls += 1
        try:
            got = call()
            if algorithm is not None and how.startswith("blocking"):
                last = self.comm.last_algorithm
                assert last == algorithm, f"ran {last}, not {algorithm}"
            assert_rank_matches(case, self.comm.rank, got)
        except Exception as exc:  # reported with the call that failed
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.failures.append(f"{self.key} {how} {case.id} on rank {self.comm.rank}: "
                                 f"{text}"[:1500])


def _run_entry(comm: collops.Comm, collective: str, algorithm: Algorithm | None,
               seed: int) -> tuple[list[str], _Checker]:
    """Every call of one algorithm's contract on this rank; the keys of what ran (none when
    no case is eligible; for automatic selection, one per algorithm it chose)."""
    name = algorithm.name if algorithm else None
    cases = [c for c in contract_cases(collective, comm.size, seed)
             if algorithm is None or algorithm.eligible(c.specs[0])]
    checker = _Checker(comm, f"{collective}[{name or AUTO}]")
    keys = dict.fromkeys([f"{collective}.{name}"] if name and cases else [])
    for case in cases:
        for k in range(REPEATS):
            checker.check(f"blocking#{k + 1}", case,
                          lambda case=case: call_collective(comm, case, name), name)
        if name is None:
            keys[f"{collective}.{AUTO}:{comm.last_algorithm}"] = None
        if collective in IN_PLACE:
            checker.check("in place", case, lambda case=case: _in_place(comm, case, name))
    requests = [(case, start_collective(comm, case, name)) for _ in range(2) for case in cases]
    for case, request in reversed(requests):
        checker.check("in flight", case, lambda c=case, q=request: as_result(c, q.wait()))
    return list(keys), checker


def run_contract(comm: collops.Comm, seed: int,
                 keep: Callable[[str, str], bool] = lambda collective, name: True) -> Report:
    """This rank's part of the contract: every offered algorithm that ``keep(collective,
    name)`` accepts (``name`` "auto" for automatic selection); a JSON-ready report."""
    transport = comm.transport_name
    resources = comm.transport.comm_resources(comm.context, tuple(range(comm.size)))
    ran, failures, calls = [], [], 0
    for collective, algorithm in _entries(transport, resources, keep):
        keys, checker = _run_entry(comm, collective, algorithm, seed)
        ran += keys
        failures += checker.failures
        calls += checker.calls
    return {"rank": comm.rank, "transport": transport, "resources": sorted(resources),
            "ran": ran, "failures": failures, "calls": calls}


def check_reports(reports: Iterable[Report], transport: str, p: int, seed: int,
                  keep: Callable[[str, str], bool] = lambda collective, name: True) -> set[str]:
    """Assert that every rank ran every algorithm it had to and all its results matched
    numpy; return the ``collective.auto:algorithm`` choices of automatic selection."""
    reports = sorted(reports, key=lambda report: report["rank"])
    assert [report["rank"] for report in reports] == list(range(p))
    failures = [f for report in reports for f in report["failures"]]
    assert not failures, f"{len(failures)} failed calls:\n" + "\n".join(failures[:40])
    first = reports[0]
    assert all(report["ran"] == first["ran"] for report in reports), "ranks ran different calls"
    resources = frozenset(first["resources"])
    assert first["transport"] == transport
    assert REQUIRED[transport] <= resources, f"{transport} lacks {REQUIRED[transport]}"
    ran = set(first["ran"])
    named = {key for key in ran if f".{AUTO}:" not in key}
    assert named == expected_keys(transport, p, seed, resources, keep)
    automatic = ran - named
    collectives = {key.split(".")[0] for key in named}
    assert {key.split(".")[0] for key in automatic} == {c for c in collectives
                                                        if keep(c, AUTO)}
    return {key.split(":")[1] for key in automatic}
