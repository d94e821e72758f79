"""The transport components' own algorithms: in the registry from import on, behind one
interface, offered only where their transport's resources are."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

import collops
from collops.algorithms import get_algorithm, make_spec, selection
from collops.algorithms.native import NativeAlgorithm, NativeCall
from collops.cli import algorithms_table
from collops.errors import ScheduleError

#: each component algorithm and the transports that run it
NATIVE = {"mpi_native": ("mpi",), "shm_direct": ("shm",), "shm_cma": ("shm",),
          "shm_stream": ("shm",)}

_FRESH = """
import json, sys
import collops
records = collops.algorithms("allreduce")
print(json.dumps({
    "transports": {a.name: list(a.transports) for a in records},
    "mpi4py": "mpi4py" in sys.modules,
    "shared_memory": [line for line in open("/proc/self/maps") if "/dev/shm" in line],
}))
"""


def test_a_fresh_interpreter_lists_them_without_mpi4py_or_shared_memory():
    out = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                         timeout=60, check=True)
    got = json.loads(out.stdout)
    transports = got["transports"]
    assert {"shm_direct", "shm_stream", "shm_cma", "mpi_native"} <= set(transports)
    assert transports["shm_direct"] == transports["shm_stream"] == ["shm"]
    assert transports["mpi_native"] == ["mpi"]
    assert transports["ring"] == []  # a schedule runs on any transport
    assert got["mpi4py"] is False
    assert got["shared_memory"] == []


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_every_record_implements_the_native_interface(name):
    records = [a for c in collops.COLLECTIVES for a in collops.algorithms(c) if a.name == name]
    assert records, name
    for a in records:
        assert isinstance(a.native, NativeAlgorithm) and callable(a.native.start)
        assert a.transports == NATIVE[name]
        assert a.needs, "a native algorithm needs its transport's resources"
        spec = make_spec(a.collective, 2, np.float64, count=4, counts=(4, 4),
                         sendcounts=(4, 4), recvcounts=(4, 4),
                         op=collops.SUM if a.collective in _REDUCING else None)
        with pytest.raises(ScheduleError):
            a.build(0, spec)


_REDUCING = {"reduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "scan", "exscan"}


def test_selection_offers_a_native_algorithm_only_with_its_resources():
    def natives(resources: set[str]) -> set[str]:
        return {a.name for a in selection.offered("allreduce", frozenset(resources))
                } & set(NATIVE)
    assert natives(set()) == set()
    assert natives({"shm_direct"}) == {"shm_direct"}
    assert natives({"shm_direct", "shm_stream"}) == {"shm_direct", "shm_stream"}
    assert natives({"shm_direct", "shm_stream", "shm_cma"}) == {"shm_direct", "shm_stream",
                                                                "shm_cma"}
    assert natives({"mpi"}) == {"mpi_native"}


def test_the_cli_table_names_the_transport_each_needs():
    rows = {line.split()[1]: line.split()[2] for line in
            algorithms_table("allreduce").splitlines()[2:]}
    assert {name: rows[name] for name in NATIVE} == {n: t[0] for n, t in NATIVE.items()}
    assert rows["ring"] == "any"


def _what_the_native_gets(comm):
    """The arguments ``shm_direct``'s start and bind receive for a blocking allreduce."""
    record = get_algorithm("allreduce", "shm_direct")
    native = record.native
    seen = []

    def start(call, *args):
        seen.append(("start", call))
        return native.start(call, *args)

    def bind(call, **options):
        seen.append(("bind", call))
        return native.bind(call, **options)

    object.__setattr__(record, "native", dataclasses.replace(native, start=start, bind=bind))
    x = np.arange(4.0) + comm.rank
    results = [comm.allreduce(x, algorithm="shm_direct") for _ in range(3)]
    assert all(np.array_equal(r, 2 * np.arange(4.0) + 1) for r in results)
    return [(kind, type(call).__name__, call.rank == comm.rank, call.group,
             call.context == comm.context, call.spec.collective) for kind, call in seen]


@pytest.mark.timeout(60)
def test_the_runtime_hands_a_native_call_not_the_communicator():
    per_rank = collops.spawn(_what_the_native_gets, 2, transport="shm", timeout=50)
    for rank, seen in enumerate(per_rank):
        kinds = [s[0] for s in seen]
        assert kinds[0] == "start" and "bind" in kinds, (rank, seen)
        for _, type_name, same_rank, group, same_context, collective in seen:
            assert type_name == NativeCall.__name__
            assert same_rank and same_context and collective == "allreduce"
            assert tuple(group) == (0, 1)
