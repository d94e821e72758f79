"""bcast, scatter(v), gather(v) and barrier beyond the registry matrix.

The matrix in test_every_algorithm uses rank-order displacements; here blocks lie out of order
and with gaps (so the binomial root must pack and unpack), pipeline chunk sizes vary, no step
may read scratch it never wrote, and a barrier must order every entry before every exit.
"""

from __future__ import annotations

import numpy as np
import pytest

from collops.algorithms import algorithms, get_algorithm, make_spec
from collops.errors import ArgumentError
from collops.schedule import run_reference, validate
from collops.schedule.table import StepKind
from tests.support.definedness import undefined_reads

SIZES = [1, 2, 3, 5, 6, 8, 11]


def scrambled_layout(p: int, seed: int) -> tuple[list[int], list[int]]:
    """Counts (some zero) and displacements in a random rank order with gaps between blocks."""
    rng = np.random.default_rng(seed)
    counts = [int(c) for c in rng.integers(0, 4, p)]
    displs, position = [0] * p, 0
    for r in rng.permutation(p).tolist():
        position += int(rng.integers(0, 3))
        displs[r] = position
        position += counts[r]
    return counts, displs


@pytest.mark.parametrize("name", ["linear", "binomial"])
@pytest.mark.parametrize("p", SIZES)
def test_scatterv_with_scrambled_displacements(name, p):
    counts, displs = scrambled_layout(p, seed=p)
    for root in range(p):
        spec = make_spec("scatterv", p, np.int32, counts=counts, displs=displs, root=root)
        data = np.arange(spec.buffer_counts(root)[0], dtype=np.int32) * 3 + 1
        schedules = get_algorithm("scatterv", name).build_all(spec)
        validate(schedules)
        assert undefined_reads(schedules)[0] == []
        inputs = [data if r == root else None for r in range(p)]
        results = run_reference(schedules, inputs, np.int32)
        for r in range(p):
            np.testing.assert_array_equal(results[r], data[displs[r]: displs[r] + counts[r]])


@pytest.mark.parametrize("name", ["linear", "binomial", "or_combine"])
@pytest.mark.parametrize("p", SIZES)
def test_gatherv_with_scrambled_displacements(name, p):
    counts, displs = scrambled_layout(p, seed=100 + p)
    fill = -9
    for root in range(p):
        spec = make_spec("gatherv", p, np.int32, counts=counts, displs=displs, root=root)
        inputs = [np.arange(c, dtype=np.int32) + 10 * r for r, c in enumerate(counts)]
        schedules = get_algorithm("gatherv", name).build_all(spec)
        validate(schedules)
        assert undefined_reads(schedules)[0] == []
        results = run_reference(schedules, inputs, np.int32, fill=fill)
        want = np.full(spec.buffer_counts(root)[1], fill, np.int32)
        for r in range(p):
            want[displs[r]: displs[r] + counts[r]] = inputs[r]
        np.testing.assert_array_equal(results[root], want)


@pytest.mark.parametrize("collective", ["bcast", "scatter", "gather"])
@pytest.mark.parametrize("p", [1, 4, 7])
def test_no_algorithm_reads_unwritten_memory(collective, p):
    for algorithm in (a for a in algorithms(collective) if not a.needs):
        for count in (0, 1, 5, 13):
            spec = make_spec(collective, p, np.float64, count=count, root=p // 2)
            problems, _ = undefined_reads(algorithm.build_all(spec))
            assert problems == [], algorithm.name


@pytest.mark.parametrize("count", [0, 1, 2, 4, 6, 7, 19])
@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_scatter_allgather_with_fewer_elements_than_ranks(count, p):
    spec = make_spec("bcast", p, np.int64, count=count, root=1)
    data = np.arange(count, dtype=np.int64) - 3
    schedules = get_algorithm("bcast", "scatter_allgather").build_all(spec)
    validate(schedules)
    results = run_reference(schedules, [data if r == 1 else None for r in range(p)], np.int64)
    for r in range(p):
        np.testing.assert_array_equal(results[r], data)
    assert all(c > 0 for s in schedules for c in s.count[s.kind == StepKind.SEND])
    if count == 0:
        assert sum(len(s) for s in schedules) == 0


@pytest.mark.parametrize("chunk_bytes", [1, 5, 8, 24, 1000])
@pytest.mark.parametrize("p", [1, 2, 3, 6])
def test_pipeline_streams_chunks_down_the_chain(chunk_bytes, p):
    count, root = 10, p - 1
    spec = make_spec("bcast", p, np.float64, count=count, root=root)
    algorithm = get_algorithm("bcast", "pipeline")
    schedules = algorithm.build_all(spec, {"chunk": chunk_bytes})
    validate(schedules)
    data = np.linspace(-1, 1, count)
    results = run_reference(schedules, [data if r == root else None for r in range(p)],
                            np.float64)
    for r in range(p):
        np.testing.assert_array_equal(results[r], data)
    chunk = max(1, chunk_bytes // 8)
    chunks = -(-count // chunk)
    for r, s in enumerate(schedules):
        sends, recvs = s.messages()
        nxt = (r + 1) % p
        assert len(sends) == (chunks if nxt != root else 0)
        assert len(recvs) == (chunks if r != root else 0)
        assert set(s.peer[sends].tolist()) <= {nxt}
        preds = s.predecessors()
        for k, step in enumerate(sends):  # chunk k leaves as soon as chunk k has arrived
            assert preds[step] == ([int(recvs[k])] if r != root else [])


def test_pipeline_rejects_a_chunk_below_one_byte():
    algorithm = get_algorithm("bcast", "pipeline")
    with pytest.raises(ArgumentError):
        algorithm.resolve({"chunk": 0})
    assert algorithm.resolve({})["chunk"] == 64 * 1024


def happens_before(schedules) -> dict[tuple[int, int], set[int]]:
    """For every step, the ranks some of whose steps must have run before it (itself included)."""
    order: dict[tuple[int, int], set[tuple[int, int]]] = {}
    preds: dict[tuple[int, int], list[tuple[int, int]]] = {}
    sends = {}
    for s in schedules:
        for i in np.nonzero(s.kind == StepKind.SEND)[0].tolist():
            sends[(s.rank, int(s.peer[i]), int(s.seq[i]))] = (s.rank, i)
    for s in schedules:
        local = s.predecessors()
        for i in range(len(s)):
            preds[(s.rank, i)] = [(s.rank, j) for j in local[i]]
            if s.kind[i] == StepKind.RECV:
                preds[(s.rank, i)].append(sends[(int(s.peer[i]), s.rank, int(s.seq[i]))])

    def ranks_before(node: tuple[int, int]) -> set[tuple[int, int]]:
        if node not in order:
            seen = {node}
            for q in preds[node]:
                seen |= ranks_before(q)
            order[node] = seen
        return order[node]

    return {node: {r for r, _ in ranks_before(node)} for node in preds}


@pytest.mark.parametrize("name", ["dissemination", "tree"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 7, 8, 12, 16])
def test_barrier_orders_every_entry_before_every_exit(name, p):
    schedules = get_algorithm("barrier", name).build_all(make_spec("barrier", p))
    validate(schedules)
    run_reference(schedules, [None] * p, np.uint8)
    assert all((s.count == 0).all() for s in schedules)
    reach = happens_before(schedules)
    for s in schedules:
        last = set(range(len(s))) - set(s.dep_from.tolist())
        waited = set().union(*(reach[(s.rank, i)] for i in last)) if last else {s.rank}
        assert waited == set(range(p)), f"rank {s.rank} may leave before {set(range(p)) - waited}"


@pytest.mark.parametrize("collective", ["bcast", "scatter", "scatterv", "gather", "gatherv",
                                        "barrier"])
def test_every_algorithm_has_description_and_cost(collective):
    for algorithm in (a for a in algorithms(collective) if not a.needs):
        assert algorithm.description and "\n" not in algorithm.description
        spec = make_spec(collective, 6, count=4, counts=[4] * 6)
        cost = algorithm.estimate(spec)
        assert 0 < cost < float("inf"), algorithm.name
        assert algorithm.estimate(make_spec(collective, 1, count=4, counts=[4])) >= 0
