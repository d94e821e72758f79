"""Property tests of the v-collectives: random counts (zeros included) and random, gapped,
non-overlapping displacements, through the validator and the reference executor vs numpy.

The algorithm axis is read from the registry, so a v-algorithm registered later is tested
without edits here. Every element of a RECV area is checked, gaps included: an algorithm
must leave the bytes between blocks untouched.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from collops import ops
from collops.algorithms import algorithms, make_spec
from collops.algorithms.spec import CallSpec, extent, prefix
from collops.schedule import run_reference, validate

VECTOR_COLLECTIVES = ("allgatherv", "alltoallv", "scatterv", "gatherv", "reduce_scatter")
REGISTERED = [a for c in VECTOR_COLLECTIVES for a in algorithms(c) if a.native is None]
MOVE_DTYPES = [np.float64, np.int32, np.uint8, np.complex64, np.int16]
MAX_SIZE = 9
FILL = 0  # data values are never 0, so an untouched gap still reads FILL
#: values drawn for the parameters these tests know; any other keeps its default
PARAM_VALUES = {
    "chunk": st.integers(1, 64),
    "seed": st.integers(0, 2**16),
    "throttle": st.integers(0, 4),
}


def test_the_vector_collectives_the_library_promises_have_algorithms():
    for collective in ("allgatherv", "alltoallv"):
        assert algorithms(collective), f"no algorithm registered for {collective}"


def data(rank: int, n: int, dtype: np.dtype) -> np.ndarray:
    """Distinctive nonzero values for ``rank``'s ``n`` elements."""
    return ((np.arange(n) * 7 + 13 * rank) % 250 + 1).astype(dtype)


@st.composite
def gapped_layout(draw: st.DrawFn, counts: list[int]) -> list[int]:
    """Displacements of blocks of ``counts`` in a random order with random gaps between."""
    p = len(counts)
    order = draw(st.permutations(range(p)))
    gaps = draw(st.lists(st.integers(0, 3), min_size=p, max_size=p))
    displs, at = [0] * p, 0
    for j, gap in zip(order, gaps, strict=True):
        at += gap
        displs[j] = at
        at += counts[j]
    return displs


@st.composite
def block_counts(draw: st.DrawFn, p: int, uniform: bool) -> list[int]:
    """``p`` counts in 0..6, or one common count when ``uniform``."""
    if uniform:
        return [draw(st.integers(0, 6))] * p
    return draw(st.lists(st.integers(0, 6), min_size=p, max_size=p))


def placed(length: int, blocks: list[tuple[int, np.ndarray]], dtype: np.dtype) -> np.ndarray:
    """A buffer of ``length`` FILL elements with each block written at its offset."""
    out = np.full(length, FILL, dtype)
    for offset, block in blocks:
        out[offset: offset + len(block)] = block
    return out


Call = tuple[list[CallSpec], list[np.ndarray | None], list[np.ndarray]]


def allgatherv_call(draw: st.DrawFn, p: int, uniform: bool, dtype: np.dtype) -> Call:
    counts = draw(block_counts(p, uniform))
    displs = draw(gapped_layout(counts))
    spec = make_spec("allgatherv", p, dtype, counts=counts, displs=displs)
    inputs = [data(r, counts[r], dtype) for r in range(p)]
    length = extent(tuple(displs), tuple(counts))
    whole = placed(length, list(zip(displs, inputs, strict=True)), dtype)
    return [spec] * p, list(inputs), [whole] * p


def rooted_layout(draw: st.DrawFn, collective: str, p: int, uniform: bool, dtype: np.dtype,
                  ) -> tuple[CallSpec, int, list[np.ndarray], np.ndarray]:
    """A gatherv's or scatterv's spec, root, blocks, and the root's area holding them."""
    counts = draw(block_counts(p, uniform))
    displs = draw(gapped_layout(counts))
    root = draw(st.integers(0, p - 1))
    spec = make_spec(collective, p, dtype, counts=counts, displs=displs, root=root)
    blocks = [data(r, counts[r], dtype) for r in range(p)]
    length = extent(tuple(displs), tuple(counts))
    return spec, root, blocks, placed(length, list(zip(displs, blocks, strict=True)), dtype)


def gatherv_call(draw: st.DrawFn, p: int, uniform: bool, dtype: np.dtype) -> Call:
    spec, root, inputs, whole = rooted_layout(draw, "gatherv", p, uniform, dtype)
    expected = [whole if r == root else np.empty(0, dtype) for r in range(p)]
    return [spec] * p, list(inputs), expected


def scatterv_call(draw: st.DrawFn, p: int, uniform: bool, dtype: np.dtype) -> Call:
    spec, root, blocks, source = rooted_layout(draw, "scatterv", p, uniform, dtype)
    inputs: list[np.ndarray | None] = [source if r == root else None for r in range(p)]
    return [spec] * p, inputs, blocks


def reduce_scatter_call(draw: st.DrawFn, p: int, uniform: bool, dtype: np.dtype) -> Call:
    counts = draw(block_counts(p, uniform))
    dtype = np.dtype(np.int64)  # exact sums whatever the order of reduction
    spec = make_spec("reduce_scatter", p, dtype, counts=counts, op=ops.SUM)
    inputs = [data(r, sum(counts), dtype) * (r + 1) for r in range(p)]
    total = np.sum(inputs, axis=0, dtype=dtype)
    offs = prefix(tuple(counts))
    return [spec] * p, list(inputs), [total[offs[r]: offs[r] + counts[r]] for r in range(p)]


def alltoallv_call(draw: st.DrawFn, p: int, uniform: bool, dtype: np.dtype) -> Call:
    if uniform:
        matrix = np.full((p, p), draw(st.integers(0, 6)), dtype=np.int64)
    else:
        flat = draw(st.lists(st.integers(0, 6), min_size=p * p, max_size=p * p))
        matrix = np.array(flat, dtype=np.int64).reshape(p, p)
    sdispls = [draw(gapped_layout(matrix[r].tolist())) for r in range(p)]
    rdispls = [draw(gapped_layout(matrix[:, r].tolist())) for r in range(p)]
    specs = [make_spec("alltoallv", p, dtype, sendcounts=matrix[r].tolist(), sdispls=sdispls[r],
                       recvcounts=matrix[:, r].tolist(), rdispls=rdispls[r]) for r in range(p)]
    outgoing = [[data(r * p + j, int(matrix[r, j]), dtype) for j in range(p)] for r in range(p)]
    inputs: list[np.ndarray | None] = [
        placed(specs[r].buffer_counts(r)[0], list(zip(sdispls[r], outgoing[r], strict=True)),
               dtype)
        for r in range(p)]
    expected = [
        placed(specs[r].buffer_counts(r)[1],
               [(rdispls[r][j], outgoing[j][r]) for j in range(p)], dtype)
        for r in range(p)]
    return specs, inputs, expected


CALLS = {
    "allgatherv": allgatherv_call, "gatherv": gatherv_call, "scatterv": scatterv_call,
    "reduce_scatter": reduce_scatter_call, "alltoallv": alltoallv_call,
}


def eligible_sizes(algorithm) -> list[int]:
    """Sizes up to MAX_SIZE at which the algorithm takes a call of one-element blocks."""
    out = []
    for p in range(1, MAX_SIZE + 1):
        c = algorithm.collective
        if c == "alltoallv":
            spec = make_spec(c, p, np.float64, sendcounts=[1] * p, recvcounts=[1] * p)
        else:
            spec = make_spec(c, p, np.float64, counts=[1] * p)
        if algorithm.eligible(spec):
            out.append(p)
    return out


@pytest.mark.parametrize("algorithm", REGISTERED, ids=lambda a: f"{a.collective}.{a.name}")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_vector_collective_matches_numpy(algorithm, data_strategy):
    sizes = eligible_sizes(algorithm)
    assert sizes, f"{algorithm.collective}.{algorithm.name} takes no size up to {MAX_SIZE}"
    p = data_strategy.draw(st.sampled_from(sizes), label="p")
    uniform = data_strategy.draw(st.booleans(), label="uniform counts")
    dtype = np.dtype(data_strategy.draw(st.sampled_from(MOVE_DTYPES), label="dtype"))
    specs, inputs, expected = CALLS[algorithm.collective](data_strategy.draw, p, uniform, dtype)
    assume(all(algorithm.eligible(s) for s in specs))
    params = {prm.name: data_strategy.draw(PARAM_VALUES[prm.name], label=prm.name)
              for prm in algorithm.params if prm.name in PARAM_VALUES}

    schedules = [algorithm.build(r, specs[r], params) for r in range(p)]
    validate(schedules)
    results = run_reference(schedules, inputs, specs[0].dtype, specs[0].op, fill=FILL)
    for r in range(p):
        got, want = results[r], expected[r]
        assert got.shape == want.shape, f"rank {r}: {got.shape} != {want.shape}"
        np.testing.assert_array_equal(got, want, err_msg=f"rank {r}")
