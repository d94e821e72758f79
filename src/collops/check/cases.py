"""Cases for every collective: inputs, call specs and numpy's expected results.

Expected results are computed here with plain numpy on the same inputs — independently of
any schedule — and are the yardstick for the reference executor, every real transport, the
test suite and `collops check`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce as fold
from typing import Any

import numpy as np

from .. import ops
from ..algorithms.spec import CallSpec, make_spec, prefix

SIZES = [1, 2, 3, 4, 5, 7, 8, 11, 16]


def _last_nonzero(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(b != 0, b, a)


#: associative, not commutative: the result depends on the rank order of the inputs
LAST_NONZERO = ops.Op(_last_nonzero, commutative=False, name="LAST_NONZERO", kinds=None)

#: (dtype, operator) pairs exercised by reduction collectives; each valid in MPI
REDUCTION_MATRIX = [
    (np.int32, ops.SUM), (np.float64, ops.SUM), (np.complex128, ops.PROD),
    (np.uint8, ops.MAX), (np.float32, ops.MIN), (np.int64, ops.BXOR), (np.uint16, ops.BOR),
    (np.int16, ops.BAND), (np.bool_, ops.LOR), (np.int32, ops.LAND), (np.uint32, ops.LXOR),
    (np.int64, LAST_NONZERO), ("pair", ops.MINLOC), ("pair", ops.MAXLOC),
]
MOVE_DTYPES = [np.float64, np.int32, np.uint8, np.complex64, np.bool_, np.int64]


@dataclass
class Case:
    """One collective call on every rank, with numpy's answer."""

    collective: str
    specs: list[CallSpec]
    inputs: list[Any]  # each rank's input array, or None where the rank has none
    expected: list[Any]  # each rank's expected output, or None where it is undefined
    dtype: np.dtype
    op: ops.Op | None = None

    @property
    def id(self) -> str:
        s = self.specs[0]
        opname = self.op.name if self.op else ""
        moved = "-displaced" if self.displaced else ""
        return (f"{self.collective}-p{s.size}-{self.dtype}-{opname}-c{s.count}{list(s.counts)}"
                f"{moved}")

    @property
    def displaced(self) -> bool:
        """Whether the blocks lie at displacements other than back to back."""
        return any(s.displs != prefix(s.counts) or s.sdispls != prefix(s.sendcounts)
                   or s.rdispls != prefix(s.recvcounts) for s in self.specs)


def random_data(
    rng: np.random.Generator, dtype: np.dtype, n: int, small: bool = False
) -> np.ndarray:
    """Random values of ``dtype`` (small integers for floats, so sums are exact)."""
    if dtype.names == ("value", "index"):
        out = np.empty(n, dtype)
        out["value"] = rng.integers(0, 4, n)
        out["index"] = rng.integers(0, 50, n)
        return out
    if dtype.kind == "b":
        return rng.random(n) < 0.5
    if dtype.kind == "c":
        return (rng.integers(-2, 3, n) + 1j * rng.integers(-2, 3, n)).astype(dtype)
    if dtype.kind == "f":
        return rng.integers(-3 if small else -50, 4 if small else 50, n).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi, n, endpoint=True).astype(dtype)


def resolve_dtype(dtype: object) -> np.dtype:
    """Test shorthand: ``"pair"`` means a float64 (value, index) pair."""
    if isinstance(dtype, str) and dtype == "pair":
        from ..datatypes import pair_dtype
        return pair_dtype(np.float64)
    return np.dtype(dtype)  # type: ignore[call-overload]


def _fold(op: ops.Op, arrays: list[np.ndarray]) -> np.ndarray:
    return fold(lambda a, b: op(a, b), arrays)


def _rooted_counts(rng: np.random.Generator, p: int, count: int, uneven: bool) -> list[int]:
    if not uneven:
        return [count] * p
    return [int(c) for c in rng.integers(0, count + 1, p)] if count else [0] * p


#: the collectives whose v-form takes displacements (rows apart from back to back)
DISPLACED = ("scatterv", "gatherv", "allgatherv", "alltoallv")


def receive_displs(rng: np.random.Generator, counts: list[int]) -> list[int]:
    """Displacements placing blocks of ``counts`` apart, in a random order, with gaps of 0 to
    2 elements between them (received blocks must not overlap)."""
    displs = [0] * len(counts)
    at = int(rng.integers(0, 3))
    for j in rng.permutation(len(counts)).tolist():
        displs[j] = at
        at += counts[j] + int(rng.integers(0, 3))
    return displs


def send_displs(rng: np.random.Generator, counts: list[int], length: int) -> list[int]:
    """Displacements of blocks of ``counts`` anywhere within ``length`` elements (they may
    overlap and leave gaps, as sent blocks may)."""
    return [int(rng.integers(0, length - c + 1)) for c in counts]


def _placed(dtype: np.dtype, displs: list[int], blocks: list[np.ndarray]) -> np.ndarray:
    """Zeros with each of ``blocks`` at its displacement: a received result with gaps."""
    out = np.zeros(max((d + len(b) for d, b in zip(displs, blocks, strict=True) if len(b)),
                       default=0), dtype)
    for d, b in zip(displs, blocks, strict=True):
        out[d: d + len(b)] = b
    return out


def _blocks(rng: np.random.Generator, collective: str, p: int, dtype: np.dtype, count: int,
            vector: bool, uneven: bool, **kwargs: Any) -> tuple[list[int], CallSpec]:
    """Every rank's block count and the spec of a collective of blocks: given as ``counts``
    (random when ``uneven``) for its v-form, as ``count`` otherwise."""
    counts = _rooted_counts(rng, p, count, vector and uneven)
    if vector:
        return counts, make_spec(collective, p, dtype, counts=counts, **kwargs)
    return counts, make_spec(collective, p, dtype, count=count, **kwargs)


def make_case(
    collective: str,
    p: int,
    count: int,
    *,
    dtype: object = np.float64,
    op: ops.Op | None = None,
    root: int = 0,
    uneven: bool = False,
    seed: int = 0,
    displaced: bool = False,
) -> Case:
    """Inputs, specs and expected outputs for one call of ``collective`` on ``p`` ranks;
    ``displaced``: a v-form's blocks at displacements (`DISPLACED`) with gaps, and sent
    blocks that overlap."""
    if displaced:
        return _displaced_case(collective, p, count, resolve_dtype(dtype), root % p, seed)
    rng = np.random.default_rng(seed)
    dt = resolve_dtype(dtype)
    inputs: list[Any]
    expected: list[Any]
    root = root % p
    c = collective
    small = op is ops.PROD
    if c == "barrier":
        spec = make_spec(c, p, dt)
        return Case(c, [spec] * p, [None] * p, [np.empty(0, dt)] * p, dt)
    if c == "bcast":
        spec = make_spec(c, p, dt, count=count, root=root)
        data = random_data(rng, dt, count)
        inputs = [data if r == root else None for r in range(p)]
        return Case(c, [spec] * p, inputs, [data] * p, dt)
    if c in ("scatter", "scatterv"):
        counts, spec = _blocks(rng, c, p, dt, count, c == "scatterv", uneven, root=root)
        data = random_data(rng, dt, sum(counts))
        offs = prefix(tuple(counts))
        expected = [data[offs[r]: offs[r] + counts[r]] for r in range(p)]
        inputs = [data if r == root else None for r in range(p)]
        return Case(c, [spec] * p, inputs, expected, dt)
    if c in ("gather", "gatherv", "allgather", "allgatherv"):
        counts, spec = _blocks(rng, c, p, dt, count, c.endswith("v"), uneven, root=root)
        inputs = [random_data(rng, dt, counts[r]) for r in range(p)]
        whole = np.concatenate(inputs) if inputs else np.empty(0, dt)
        if c.startswith("all"):
            expected = [whole] * p
        else:
            expected = [whole if r == root else np.empty(0, dt) for r in range(p)]
        return Case(c, [spec] * p, inputs, expected, dt)
    if c in ("alltoall", "alltoallv"):
        if c == "alltoall":
            matrix = np.full((p, p), count, dtype=np.int64)
            specs = [make_spec(c, p, dt, count=count)] * p
        else:
            matrix = rng.integers(0, count + 1, (p, p)) if (uneven and count) else np.full(
                (p, p), count, dtype=np.int64)
            specs = [make_spec(c, p, dt, sendcounts=matrix[r].tolist(),
                               recvcounts=matrix[:, r].tolist()) for r in range(p)]
        inputs = [random_data(rng, dt, int(matrix[r].sum())) for r in range(p)]
        expected = []
        for r in range(p):
            parts = []
            for j in range(p):
                off = int(matrix[j, :r].sum())
                parts.append(inputs[j][off: off + int(matrix[j, r])])
            expected.append(np.concatenate(parts))
        return Case(c, specs, inputs, expected, dt)
    # reductions
    op = op or ops.SUM
    if c in ("reduce_scatter", "reduce_scatter_block"):
        counts, spec = _blocks(rng, c, p, dt, count, c == "reduce_scatter", uneven, op=op)
        inputs = [random_data(rng, dt, sum(counts), small) for _ in range(p)]
        total = _fold(op, inputs)
        offs = prefix(tuple(counts))
        expected = [total[offs[r]: offs[r] + counts[r]] for r in range(p)]
        return Case(c, [spec] * p, inputs, expected, dt, op)
    spec = make_spec(c, p, dt, count=count, root=root, op=op)
    inputs = [random_data(rng, dt, count, small) for _ in range(p)]
    if c == "reduce":
        total = _fold(op, inputs)
        expected = [total if r == root else np.empty(0, dt) for r in range(p)]
    elif c == "allreduce":
        expected = [_fold(op, inputs)] * p
    elif c == "scan":
        expected = [_fold(op, inputs[: r + 1]) for r in range(p)]
    elif c == "exscan":
        expected = [None] + [_fold(op, inputs[:r]) for r in range(1, p)]
    else:
        raise ValueError(c)
    return Case(c, [spec] * p, inputs, expected, dt, op)


def _displaced_case(c: str, p: int, count: int, dt: np.dtype, root: int, seed: int) -> Case:
    """`make_case` of a v-form whose blocks lie at displacements."""
    rng = np.random.default_rng(seed)
    if c not in DISPLACED:
        raise ValueError(f"{c} takes no displacements")
    if c == "alltoallv":
        matrix = rng.integers(0, count + 1, (p, p)) if count else np.zeros((p, p), np.int64)
        lengths = [int(matrix[r].sum()) + int(rng.integers(0, 3)) for r in range(p)]
        sdispls = [send_displs(rng, matrix[r].tolist(), lengths[r]) for r in range(p)]
        rdispls = [receive_displs(rng, matrix[:, r].tolist()) for r in range(p)]
        inputs = [random_data(rng, dt, lengths[r]) for r in range(p)]
        specs = [make_spec(c, p, dt, sendcounts=matrix[r].tolist(), sdispls=sdispls[r],
                           recvcounts=matrix[:, r].tolist(), rdispls=rdispls[r])
                 for r in range(p)]
        expected = [_placed(dt, rdispls[r], [
            inputs[j][sdispls[j][r]: sdispls[j][r] + int(matrix[j, r])] for j in range(p)])
            for r in range(p)]
        return Case(c, specs, inputs, expected, dt)
    counts = _rooted_counts(rng, p, count, True)
    if c == "scatterv":
        length = sum(counts) + int(rng.integers(0, 3))
        displs = send_displs(rng, counts, length)
        data = random_data(rng, dt, length)
        spec = make_spec(c, p, dt, counts=counts, displs=displs, root=root)
        sent: list[Any] = [data if r == root else None for r in range(p)]
        return Case(c, [spec] * p, sent,
                    [data[displs[r]: displs[r] + counts[r]] for r in range(p)], dt)
    displs = receive_displs(rng, counts)
    spec = make_spec(c, p, dt, counts=counts, displs=displs, root=root)
    inputs = [random_data(rng, dt, counts[r]) for r in range(p)]
    whole = _placed(dt, displs, inputs)
    expected = [whole if c == "allgatherv" or r == root else np.empty(0, dt) for r in range(p)]
    return Case(c, [spec] * p, inputs, expected, dt)


def cases_for(collective: str, p: int, seed: int = 0) -> list[Case]:
    """A handful of varied calls of ``collective`` at ``p`` ranks (zero counts included)."""
    out: list[Case] = []
    if collective == "barrier":
        return [make_case("barrier", p, 0)]
    if collective in ("reduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "scan",
                      "exscan"):
        picks = REDUCTION_MATRIX[(p * 3 + seed) % len(REDUCTION_MATRIX):] + REDUCTION_MATRIX
        for i, (dt, op) in enumerate(picks[:4]):
            count = [0, 1, 7, 23][i]
            out.append(make_case(collective, p, count, dtype=dt, op=op, root=i + seed,
                                 uneven=True, seed=seed * 31 + i))
        return out
    for i, count in enumerate([0, 1, 5, 33]):
        dt = MOVE_DTYPES[(i + p + seed) % len(MOVE_DTYPES)]
        out.append(make_case(collective, p, count, dtype=dt, root=i * 3 + seed, uneven=i >= 2,
                             seed=seed * 31 + i))
    if collective in DISPLACED:
        out += [make_case(collective, p, count, dtype=MOVE_DTYPES[(p + seed + k) % 6],
                          root=seed + k, displaced=True, seed=seed * 31 + 7 + k)
                for k, count in enumerate([0, 6])]
    return out


def assert_rank_matches(case: Case, rank: int, got: Any) -> None:
    """Compare rank ``rank``'s result with numpy's (exactly, or closely for floats)."""
    want = case.expected[rank]
    if want is None:
        return
    assert got is not None, f"rank {rank}: no result"
    got = np.asarray(got).reshape(-1)
    assert got.shape == want.shape, f"rank {rank}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"rank {rank}")
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"rank {rank}")


def assert_matches(case: Case, results: list[np.ndarray | None]) -> None:
    """Compare each rank's result with numpy's (exactly, or closely for floats)."""
    assert len(results) == len(case.expected), f"{len(results)} results for {case.id}"
    for r, got in enumerate(results):
        assert_rank_matches(case, r, got)

