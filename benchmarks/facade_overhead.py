"""The per-call cost of ``collops.MPI`` over collops' own API, both measured in the same run.

Usage: .venv/bin/python benchmarks/facade_overhead.py [--nprocs 2] [--rounds 15]
           [--iterations 2000] [--bytes 8] [--json docs/bench/facade_overhead.json]

Runs a shared-memory job (`collops.spawn`, ``transport="shm"``). Each round times
``--iterations`` calls of each pair — ``comm.Allreduce(x, r, op=MPI.SUM)`` (numpy arrays),
``comm.Allreduce([x, MPI.DOUBLE], [r, MPI.DOUBLE], MPI.SUM)`` and ``comm.Bcast(x)`` through the
facade, against ``c.allreduce(x, out=r)`` and ``c.bcast(x, out=x)`` — alternating which side
goes first, so a burst of load on the machine lands on both. It prints the medians over rounds
of the per-call time (rank 0) and of the per-round difference facade − own API, and the
minima over rounds (on a loaded machine many short rounds, ``--rounds 300 --iterations 100``,
give minima that filter out the time a rank was not running).

On a loaded machine those medians swing by far more than the facade costs, so it also measures
the facade's own dispatch alone (``--dispatch``): the same calls in one process on a
communicator stand-in whose methods return at once, against calling the stand-in directly;
the minimum over ``--rounds`` repeats of ``--iterations`` calls each (the minimum filters out
the time the process was not running). The difference is what the facade adds to every call.

The dispatch also times ``Send``/``Recv`` with an ndarray and with ``[buf, MPI.DOUBLE]``
against the stand-in's ``send``/``recv``.

``--every`` times every regular collective — ``Barrier``, ``Bcast``, ``Allreduce``,
``Reduce``, ``Scan``, ``Exscan``, ``Reduce_scatter_block``, ``Reduce_scatter`` (counts given),
``Allgather``, ``Gather``,
``Scatter``, ``Alltoall`` — and its ``I…`` form (waited for) through the facade against
collops' own calls, in the same 2-rank job; two ping-pong round trips, ``Isend``/``Irecv``
each waited for and an object's ``send``/``recv`` (each rank makes two calls a round trip), a
``Sendrecv`` exchange, and a persistent ``Allreduce_init``'s ``Start`` + ``Wait``.

``--vector`` times the v-collectives with displaced (gapped) blocks instead —
``Allgatherv``, ``Gatherv``, ``Scatterv``, ``Alltoallv`` and their ``I…`` forms (waited for)
through the facade against collops' own calls with ``displs=``/``rdispls=``. ``--before
DIR`` adds to any of these, interleaved in the same rounds, the facade package found in
``DIR`` (an older ``src/collops/facade``, e.g. from ``git archive``), loaded as
``collops.facade_before``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np


def _time(call: Any, iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    return (time.perf_counter() - start) / iterations


def _load_facade(directory: str | None) -> Any:
    """The facade's ``api`` module: collops' own, or the package in ``directory`` loaded as
    ``collops.facade_before`` (its relative imports of collops then resolve to this one)."""
    import importlib
    import importlib.util
    import sys
    from pathlib import Path

    if directory is None:
        return importlib.import_module("collops.facade.api")
    name = "collops.facade_before"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(directory) / "__init__.py", submodule_search_locations=[directory])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return importlib.import_module(name + ".api")


def _vector_calls(comm: Any, mpi: Any, nbytes: int) -> dict[str, Any]:
    """The v-collectives through facade module ``mpi``, blocks of ``nbytes`` with a gap of
    one element before each: name -> call."""
    facade = mpi.wrap(comm)
    p, n = comm.size, max(1, nbytes // 8)
    counts, displs = [n] * p, [(n + 1) * j + 1 for j in range(p)]
    x, whole = np.ones(n), np.zeros(displs[-1] + n + 1)
    spec = [whole, (counts, displs), mpi.DOUBLE]
    received = [whole.copy(), (counts, displs), mpi.DOUBLE]
    return {
        "Allgatherv": lambda: facade.Allgatherv(x, spec),
        "Gatherv": lambda: facade.Gatherv(x, spec, 0),
        "Scatterv": lambda: facade.Scatterv(spec, x, 0),
        "Alltoallv": lambda: facade.Alltoallv(spec, received),
        "Iallgatherv": lambda: facade.Iallgatherv(x, spec).Wait(),
        "Igatherv": lambda: facade.Igatherv(x, spec, 0).Wait(),
        "Iscatterv": lambda: facade.Iscatterv(spec, x, 0).Wait(),
        "Ialltoallv": lambda: facade.Ialltoallv(spec, received).Wait(),
    }


def _vector_own(comm: Any, nbytes: int) -> dict[str, Any]:
    """The same calls on collops' own API with ``displs=``/``rdispls=``."""
    p, n = comm.size, max(1, nbytes // 8)
    counts, displs = [n] * p, [(n + 1) * j + 1 for j in range(p)]
    x, whole = np.ones(n), np.zeros(displs[-1] + n + 1)
    # each receive goes into the blocks' span of a buffer one element longer, as the facade's
    # buffers are (collops' own calls take an ``out`` of exactly the span: a view)
    out, received = whole[:displs[-1] + n], np.zeros(displs[-1] + n + 1)[:displs[-1] + n]
    root = comm.rank == 0
    return {
        "Allgatherv": lambda: comm.allgatherv(x, counts, displs=displs, out=out),
        "Gatherv": lambda: comm.gatherv(x, 0, counts if root else None,
                                        displs=displs if root else None,
                                        out=out if root else None),
        "Scatterv": lambda: comm.scatterv(whole, counts, 0, displs=displs, out=x),
        "Alltoallv": lambda: comm.alltoallv(whole, counts, displs, counts, rdispls=displs,
                                            out=received),
        "Iallgatherv": lambda: comm.iallgatherv(x, counts, displs=displs, out=out).wait(),
        "Igatherv": lambda: comm.igatherv(x, 0, counts if root else None,
                                          displs=displs if root else None,
                                          out=out if root else None).wait(),
        "Iscatterv": lambda: comm.iscatterv(whole, counts, 0, displs=displs, out=x).wait(),
        "Ialltoallv": lambda: comm.ialltoallv(whole, counts, displs, counts, rdispls=displs,
                                              out=received).wait(),
    }


def _sides(comm: Any, nbytes: int, before: str | None, own: str) -> dict[str, Any]:
    """The calls of each side timed: this facade, collops' own API (named ``own``) and, if
    ``before`` names one, an older facade."""
    sides = {"facade": _vector_calls(comm, _load_facade(None), nbytes),
             own: _vector_own(comm, nbytes)}
    if before is not None:
        sides["facade_before"] = _vector_calls(comm, _load_facade(before), nbytes)
    return sides


class _VectorStandIn:
    """A communicator whose v-collectives return at once (for ``--vector --dispatch``)."""

    rank, size = 0, 2

    def allgatherv(self, x: Any, counts: Any = None, *, displs: Any = None,
                   out: Any = None) -> Any:
        return out

    def gatherv(self, x: Any, root: int = 0, counts: Any = None, *, displs: Any = None,
                out: Any = None) -> Any:
        return out

    def scatterv(self, x: Any, counts: Any = None, root: int = 0, *, displs: Any = None,
                 out: Any = None) -> Any:
        return out

    def alltoallv(self, x: Any, sendcounts: Any, sdispls: Any = None, recvcounts: Any = None,
                  *, rdispls: Any = None, out: Any = None) -> Any:
        return out

    def _started(self, *args: Any, **kwargs: Any) -> Any:
        return _DoneRequest()

    iallgatherv = igatherv = iscatterv = ialltoallv = _started


class _DoneRequest:
    """A collops request already complete (the stand-in's non-blocking calls)."""

    def wait(self) -> None:
        return None

    def test(self) -> bool:
        return True


def vector_dispatch(rounds: int, iterations: int, nbytes: int, before: str | None
                    ) -> dict[str, Any]:
    """What each facade does per v-call around collops' own call (packing, unpacking,
    planning), on `_VectorStandIn`: the minimum over ``rounds`` repeats, sides interleaved."""
    import timeit

    sides = _sides(_VectorStandIn(), nbytes, before, "direct")
    out: dict[str, Any] = {}
    for name in sides["direct"]:
        best = {side: float("inf") for side in sides}
        for _ in range(rounds):
            for side, calls in sides.items():
                best[side] = min(best[side], timeit.timeit(calls[name], number=iterations))
        row = {f"{side}_us": t / iterations * 1e6 for side, t in best.items()}
        for side in sides:
            if side != "direct":
                row[f"{side}_added_us"] = row[f"{side}_us"] - row["direct_us"]
        out[name] = row
    return out


def _vector_rank(comm: Any, rounds: int, iterations: int, nbytes: int,
                 before: str | None) -> dict[str, Any]:
    """Per v-collective the median per-call time of each side, in interleaved rounds."""
    return _interleaved(comm, _sides(comm, nbytes, before, "own_api"), rounds, iterations)


def _every_calls(comm: Any, mpi: Any, nbytes: int) -> dict[str, Any]:
    """Every regular collective and its ``I…`` form (waited for) through facade module
    ``mpi``, blocks of ``nbytes``: name -> call."""
    facade, p, n = mpi.wrap(comm), comm.size, max(1, nbytes // 8)
    x, r, whole, back = np.ones(n), np.empty(n), np.ones(p * n), np.empty(p * n)
    counts = [n] * p
    persistent = facade.Allreduce_init(x, r, mpi.SUM)
    return {
        "Barrier": facade.Barrier, "Ibarrier": lambda: facade.Ibarrier().Wait(),
        "Bcast": lambda: facade.Bcast(x, 0), "Ibcast": lambda: facade.Ibcast(x, 0).Wait(),
        "Allreduce": lambda: facade.Allreduce(x, r, mpi.SUM),
        "Iallreduce": lambda: facade.Iallreduce(x, r, mpi.SUM).Wait(),
        "Reduce": lambda: facade.Reduce(x, r, mpi.SUM, 0),
        "Ireduce": lambda: facade.Ireduce(x, r, mpi.SUM, 0).Wait(),
        "Scan": lambda: facade.Scan(x, r, mpi.SUM),
        "Iscan": lambda: facade.Iscan(x, r, mpi.SUM).Wait(),
        "Exscan": lambda: facade.Exscan(x, r, mpi.SUM),
        "Iexscan": lambda: facade.Iexscan(x, r, mpi.SUM).Wait(),
        "Reduce_scatter_block": lambda: facade.Reduce_scatter_block(whole, r, mpi.SUM),
        "Ireduce_scatter_block": lambda: facade.Ireduce_scatter_block(whole, r,
                                                                      mpi.SUM).Wait(),
        "Reduce_scatter": lambda: facade.Reduce_scatter(whole, r, counts, mpi.SUM),
        "Ireduce_scatter": lambda: facade.Ireduce_scatter(whole, r, counts, mpi.SUM).Wait(),
        "Allgather": lambda: facade.Allgather(x, back),
        "Iallgather": lambda: facade.Iallgather(x, back).Wait(),
        "Gather": lambda: facade.Gather(x, back, 0),
        "Igather": lambda: facade.Igather(x, back, 0).Wait(),
        "Scatter": lambda: facade.Scatter(whole, r, 0),
        "Iscatter": lambda: facade.Iscatter(whole, r, 0).Wait(),
        "Alltoall": lambda: facade.Alltoall(whole, back),
        "Ialltoall": lambda: facade.Ialltoall(whole, back).Wait(),
        **_round_trips(comm, lambda o, d: facade.Isend(o, d, 3).Wait(),
                       lambda o, s: facade.Irecv(o, s, 3).Wait(),
                       lambda o, d: facade.send(o, d, 4), lambda s: facade.recv(source=s, tag=4),
                       lambda o, p_, i: facade.Sendrecv(o, p_, 5, i, p_, 5), x, r),
        "Allreduce_init Start+Wait": lambda: (persistent.Start(), persistent.Wait()),
    }


def _round_trips(comm: Any, isend: Any, irecv: Any, send: Any, recv: Any, sendrecv: Any,
                 x: np.ndarray, r: np.ndarray) -> dict[str, Any]:
    """Ping-pong round trips between ranks 0 and 1 (2-rank jobs only): ``Isend``/``Irecv`` of
    ``x`` each waited for, and an object's ``send``/``recv``; and a ``Sendrecv`` exchange."""
    if comm.size != 2:
        return {}
    peer = 1 - comm.rank
    first = comm.rank == 0

    def nonblocking() -> None:
        if first:
            isend(x, peer)
            irecv(r, peer)
        else:
            irecv(r, peer)
            isend(x, peer)

    def objects() -> None:
        if first:
            send(7, peer)
            recv(peer)
        else:
            recv(peer)
            send(7, peer)
    return {"Isend/Irecv round trip": nonblocking, "send/recv object round trip": objects,
            "Sendrecv exchange": lambda: sendrecv(x, peer, r)}


def _every_own(comm: Any, nbytes: int) -> dict[str, Any]:
    """The same calls on collops' own API."""
    p, n, root = comm.size, max(1, nbytes // 8), comm.rank == 0
    x, r, whole, back = np.ones(n), np.empty(n), np.ones(p * n), np.empty(p * n)
    counts = [n] * p
    persistent = comm.allreduce_init(x, "sum", out=r)
    return {
        "Barrier": comm.barrier, "Ibarrier": lambda: comm.ibarrier().wait(),
        "Bcast": lambda: comm.bcast(x, 0, out=x), "Ibcast": lambda: comm.ibcast(x, 0, out=x).wait(),
        "Allreduce": lambda: comm.allreduce(x, "sum", out=r),
        "Iallreduce": lambda: comm.iallreduce(x, "sum", out=r).wait(),
        "Reduce": lambda: comm.reduce(x, "sum", 0, out=r if root else None),
        "Ireduce": lambda: comm.ireduce(x, "sum", 0, out=r if root else None).wait(),
        "Scan": lambda: comm.scan(x, "sum", out=r),
        "Iscan": lambda: comm.iscan(x, "sum", out=r).wait(),
        "Exscan": lambda: comm.exscan(x, "sum", out=r),
        "Iexscan": lambda: comm.iexscan(x, "sum", out=r).wait(),
        "Reduce_scatter_block": lambda: comm.reduce_scatter_block(whole, "sum", out=r),
        "Ireduce_scatter_block": lambda: comm.ireduce_scatter_block(whole, "sum", out=r).wait(),
        "Reduce_scatter": lambda: comm.reduce_scatter(whole, "sum", counts, out=r),
        "Ireduce_scatter": lambda: comm.ireduce_scatter(whole, "sum", counts, out=r).wait(),
        "Allgather": lambda: comm.allgather(x, out=back),
        "Iallgather": lambda: comm.iallgather(x, out=back).wait(),
        "Gather": lambda: comm.gather(x, 0, out=back if root else None),
        "Igather": lambda: comm.igather(x, 0, out=back if root else None).wait(),
        "Scatter": lambda: comm.scatter(whole if root else None, 0, out=r),
        "Iscatter": lambda: comm.iscatter(whole if root else None, 0, out=r).wait(),
        "Alltoall": lambda: comm.alltoall(whole, out=back),
        "Ialltoall": lambda: comm.ialltoall(whole, out=back).wait(),
        **_round_trips(comm, lambda o, d: comm.isend(o, d, 3).wait(),
                       lambda o, s: comm.irecv(o, s, 3).wait(),
                       lambda o, d: comm.send_object(o, d, 4),
                       lambda s: comm.recv_object(s, 4),
                       lambda o, p_, i: comm.sendrecv(o, p_, 5, i, p_, 5), x, r),
        "Allreduce_init Start+Wait": lambda: (persistent.start(), persistent.wait()),
    }


def _every_rank(comm: Any, rounds: int, iterations: int, nbytes: int,
                before: str | None) -> dict[str, Any]:
    """Per regular collective and ``I…`` form the median per-call time of each side."""
    sides = {"facade": _every_calls(comm, _load_facade(None), nbytes),
             "own_api": _every_own(comm, nbytes)}
    if before is not None:
        sides["facade_before"] = _every_calls(comm, _load_facade(before), nbytes)
    return _interleaved(comm, sides, rounds, iterations)


def _interleaved(comm: Any, sides: dict[str, dict[str, Any]], rounds: int,
                 iterations: int) -> dict[str, Any]:
    """Per call the median and minimum per-call time of each side (``own_api`` among them),
    the sides interleaved round by round, the order turning (after 200 calls of each to warm
    up: prepared calls, compiled runners bound); the medians of the per-round differences
    from ``own_api`` and the differences of the minima. The minimum filters out the time a
    rank was not running: on a loaded machine many short rounds give it."""
    out: dict[str, Any] = {}
    for name in sides["own_api"]:
        calls = [(side, calls[name]) for side, calls in sides.items()]
        for _ in range(200):
            for _, call in calls:
                call()
        times: dict[str, list[float]] = {side: [] for side in sides}
        for k in range(rounds):
            comm.barrier()
            for side, call in calls[k % len(calls):] + calls[:k % len(calls)]:
                times[side].append(_time(call, iterations))
        out[name] = {f"{side}_us": statistics.median(t) * 1e6 for side, t in times.items()}
        out[name].update({f"{side}_min_us": min(t) * 1e6 for side, t in times.items()})
        for side in sides:
            if side != "own_api":
                out[name][f"{side}_overhead_us"] = statistics.median(
                    f - o for f, o in zip(times[side], times["own_api"], strict=True)) * 1e6
                out[name][f"{side}_min_overhead_us"] = (
                    out[name][f"{side}_min_us"] - out[name]["own_api_min_us"])
    return out


def _job_calls(comm: Any, mpi: Any, x: np.ndarray, r: np.ndarray) -> dict[str, Any]:
    """The facade calls the 2-rank job times, through facade module ``mpi``."""
    facade = mpi.wrap(comm)
    return {
        "Allreduce(ndarray)": lambda: facade.Allreduce(x, r, op=mpi.SUM),
        "Allreduce([buf, DOUBLE])": lambda: facade.Allreduce(
            [x, mpi.DOUBLE], [r, mpi.DOUBLE], mpi.SUM),
        "Bcast(ndarray)": lambda: facade.Bcast(x, 0),
    }


def _rank(comm: Any, rounds: int, iterations: int, nbytes: int, before: str | None = None
          ) -> dict[str, Any]:
    """Per call, each side's median and minimum over ``rounds`` rounds (the sides
    interleaved, their order turning each round), and the medians of the per-round
    differences from the own API. The minimum filters out the time a rank was not running:
    on a loaded machine many short rounds (``--rounds 300 --iterations 100``) give it."""
    x = np.ones(max(1, nbytes // 8))
    r = np.empty_like(x)
    sides = {"facade": _job_calls(comm, _load_facade(None), x, r)}
    if before is not None:
        sides["facade_before"] = _job_calls(comm, _load_facade(before), x, r)
    sides["own_api"] = {"Allreduce(ndarray)": lambda: comm.allreduce(x, out=r),
                        "Allreduce([buf, DOUBLE])": lambda: comm.allreduce(x, out=r),
                        "Bcast(ndarray)": lambda: comm.bcast(x, 0, out=x)}
    return _interleaved(comm, sides, rounds, iterations)


class _StandIn:
    """A communicator whose collectives return at once (what is left is the caller's cost)."""

    rank, size = 0, 2

    def allreduce(self, x: Any, op: Any = None, *, out: Any = None) -> Any:
        return out

    def bcast(self, x: Any, root: int = 0, *, out: Any = None) -> Any:
        return out

    def send(self, x: Any, dest: int, tag: int = 0) -> None:
        return None

    def recv(self, out: Any = None, source: int = -2, tag: int = -1) -> Any:
        return out, None


def _dispatch_calls(comm: Any, mpi: Any, x: np.ndarray, r: np.ndarray) -> dict[str, Any]:
    """The facade calls timed by `dispatch`, through facade module ``mpi``: name -> call."""
    facade = mpi.wrap(comm)
    sx, sr = [x, mpi.DOUBLE], [r, mpi.DOUBLE]  # the specs, made once as a program may
    return {
        "Allreduce(ndarray)": lambda: facade.Allreduce(x, r, op=mpi.SUM),
        "Allreduce([buf, DOUBLE])": lambda: facade.Allreduce(sx, sr, mpi.SUM),
        "Allreduce([buf, DOUBLE]) inline": lambda: facade.Allreduce(
            [x, mpi.DOUBLE], [r, mpi.DOUBLE], mpi.SUM),
        "Bcast(ndarray)": lambda: facade.Bcast(x, 0),
        "Send(ndarray)": lambda: facade.Send(x, 1, 0),
        "Send([buf, DOUBLE])": lambda: facade.Send(sx, 1, 0),
        "Recv(ndarray)": lambda: facade.Recv(r, 1, 0),
        "Recv([buf, DOUBLE])": lambda: facade.Recv(sr, 1, 0),
    }


def dispatch(rounds: int, iterations: int, nbytes: int, before: str | None = None
             ) -> dict[str, Any]:
    """The facade's dispatch cost per call, from the minimum over rounds (see the docstring);
    with ``before``, that older facade's too, interleaved in the same rounds."""
    import timeit

    from collops import MPI

    comm = _StandIn()
    x = np.ones(max(1, nbytes // 8))
    r = np.empty_like(x)
    op = MPI.SUM.op
    sides = {"facade": _dispatch_calls(comm, _load_facade(None), x, r)}
    if before is not None:
        sides["facade_before"] = _dispatch_calls(comm, _load_facade(before), x, r)
    sides["direct"] = {
        "Allreduce(ndarray)": lambda: comm.allreduce(x, op, out=r),
        "Bcast(ndarray)": lambda: comm.bcast(x, 0, out=x),
        "Send(ndarray)": lambda: comm.send(x, 1, 0),
        "Recv(ndarray)": lambda: comm.recv(r, 1, 0),
    }
    out = {}
    for name in sides["facade"]:
        direct = sides["direct"][name.split("(")[0] + "(ndarray)"]
        calls = [(side, calls[name]) for side, calls in sides.items() if side != "direct"]
        calls.append(("direct", direct))
        best = {side: float("inf") for side, _ in calls}
        for _ in range(rounds):
            for side, call in calls:
                best[side] = min(best[side], timeit.timeit(call, number=iterations))
        row = {f"{side}_us": t / iterations * 1e6 for side, t in best.items()}
        row["added_us"] = row["facade_us"] - row["direct_us"]
        if before is not None:
            row["before_added_us"] = row["facade_before_us"] - row["direct_us"]
        out[name] = row
    return out


def main() -> None:
    """Print the medians, and write them as JSON if asked."""
    import collops

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=8)
    parser.add_argument("--json", default=None)
    parser.add_argument("--dispatch", action="store_true",
                        help="measure only the facade's dispatch, in this process")
    parser.add_argument("--vector", action="store_true",
                        help="time the v-collectives with displaced blocks instead")
    parser.add_argument("--every", action="store_true",
                        help="time every regular collective and its I-form instead")
    parser.add_argument("--before", default=None,
                        help="an older facade package (a src/collops/facade directory) to "
                        "time alongside")
    args = parser.parse_args()
    if args.vector and args.dispatch:
        added = vector_dispatch(max(args.rounds, 5) * 20, args.iterations, args.bytes,
                                args.before)
        for name, row in added.items():
            print(f"{name:12s} " + "   ".join(f"{k} {v:7.3f}" for k, v in row.items()))
        if args.json:
            _write(args, {"bytes": args.bytes, "dispatch": added})
        return
    if args.vector or args.every:
        rank0 = collops.spawn(_every_rank if args.every else _vector_rank, args.nprocs,
                              args.rounds, args.iterations, args.bytes, args.before,
                              transport="shm", timeout=900)[0]
        for name, row in rank0.items():
            print(f"{name:22s} " + "   ".join(f"{k} {v:7.3f}" for k, v in row.items()))
        if args.json:
            _write(args, {"nprocs": args.nprocs, "bytes": args.bytes, "rounds": args.rounds,
                          "iterations": args.iterations, "rank0": rank0})
        return
    added = dispatch(max(args.rounds, 5) * 20, args.iterations, args.bytes, args.before)
    for name, row in added.items():
        print(f"{name:32s} dispatch: facade {row['facade_us']:6.3f} us, direct "
              f"{row['direct_us']:6.3f} us, added {row['added_us']:+6.3f} us" + (
                  "" if args.before is None else
                  f" (before: {row['facade_before_us']:6.3f} us, added "
                  f"{row['before_added_us']:+6.3f} us)"))
    if args.dispatch:
        if args.json:
            _write(args, {"bytes": args.bytes, "dispatch": added})
        return
    results = collops.spawn(_rank, args.nprocs, args.rounds, args.iterations, args.bytes,
                            args.before, transport="shm", timeout=900)
    rank0 = results[0]
    for name, row in rank0.items():
        print(f"{name:26s} " + "  ".join(f"{k} {v:7.3f}" for k, v in row.items()))
    if args.json:
        _write(args, {"nprocs": args.nprocs, "bytes": args.bytes, "rounds": args.rounds,
                      "iterations": args.iterations, "rank0": rank0, "dispatch": added})


def _write(args: argparse.Namespace, record: dict[str, Any]) -> None:
    """Write ``record`` with the command that made it to ``args.json``."""
    command = "benchmarks/facade_overhead.py " + " ".join(
        f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
        for k, v in vars(args).items() if k != "json" and v not in (None, False))
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    with open(args.json, "w") as f:
        json.dump({"command": command, "loadavg_at_end": load, **record}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
