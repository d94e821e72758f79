"""A repeated scatterv is bound to the compiled runner of its envelope, as scatter is: the
root writes every rank's header and rows straight from its ``x`` at their displacements, a
non-root copies its block straight into its result. Checked against numpy on every route
(compiled and ``COLLOPS_COMPILED=0``), with counts at the root only, gaps and overlaps
between the root's blocks, zero counts, rows of several elements, a caller's ``out``, and
signatures that change between bound calls."""

from __future__ import annotations

import numpy as np
import pytest

import collops

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("compiled_on")]

REPEATS = 4  # the first call prepares, the second binds, the rest run bound


def _source(p: int, rows: int, dtype: str = "float64", width: int = 3) -> np.ndarray:
    return (np.arange(rows * width, dtype=dtype) * 7 + p).reshape(rows, width)


def _signatures(p: int) -> list[tuple[str, list[int], list[int] | None, int, str]]:
    """(name, counts, displs, root, dtype) of several scatterv signatures on ``p`` ranks."""
    counts = [j % 3 + 1 for j in range(p)]
    zero = [0 if j == 1 else 2 for j in range(p)]
    gaps = [4 * j + 1 for j in range(p)]  # a gap before each block
    overlapping = [j for j in range(p)]  # blocks of 2 rows, each overlapping the next
    return [("back to back", counts, None, 0, "float64"),
            ("gaps", counts, gaps, p - 1, "float64"),
            ("overlapping", [2] * p, overlapping, 0, "int32"),
            ("a zero count", zero, None, 0, "float64"),
            ("rows of one element", counts, None, 0, "uint8")]


def _expected(source: np.ndarray, counts: list[int], displs: list[int] | None,
              rank: int) -> np.ndarray:
    at = displs if displs is not None else [sum(counts[:j]) for j in range(len(counts))]
    return source[at[rank]: at[rank] + counts[rank]]


def _scatterv(comm, source, counts, displs, root, out=None):
    """A scatterv with the counts and displacements given at the root only."""
    mine = comm.rank == root
    return comm.scatterv(source if mine else None, counts if mine else None, root,
                         displs=displs if mine else None, out=out)


@pytest.mark.parametrize("compiled", ["1", "0"])
def test_repeated_scatterv_is_bound_and_matches_numpy(monkeypatch, compiled):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)

    def body(comm):
        p, r = comm.size, comm.rank
        bound = []
        for name, counts, displs, root, dtype in _signatures(p):
            width = 1 if name == "rows of one element" else 3
            rows = max((d or 0) + c for d, c in zip(displs or [sum(counts[:j]) for j in
                                                                range(p)], counts,
                                                     strict=True))
            source = _source(p, rows, dtype, width)
            want = _expected(source, counts, displs, r)
            for k in range(REPEATS):
                got = _scatterv(comm, source, counts, displs, root)
                assert got.dtype == want.dtype and np.array_equal(got, want), (name, k)
                out = np.full(want.shape, 99, want.dtype)
                got = _scatterv(comm, source, counts, displs, root, out=out)
                assert np.array_equal(got, want) and np.array_equal(out, want), (name, k, "out")
            bound.append(comm.bound_calls().get("scatterv"))
        return bound

    for p in (2, 3):
        bound = collops.spawn(body, p, transport="shm", timeout=100)
        want = "shm_direct" if compiled == "1" else None
        assert all(b == [want] * len(_signatures(p)) for b in bound), (p, bound)


def test_bound_scatterv_follows_signatures_that_change_between_calls():
    """Bound calls alternating between two signatures of the root's (other counts, other
    displacements, another dtype): a non-root bound to the other one reads the header the
    root sent and still returns the right rows."""
    def body(comm):
        p, r = comm.size, comm.rank
        first, second = [1] * p, [j + 2 for j in range(p)]
        shifted = [3 * j for j in range(p)]
        source = _source(p, 3 * p + p + 2)
        narrow = _source(p, sum(second), "float32")
        calls = [(_source(p, p), first, None), (source, second, shifted),
                 (narrow, second, None)]
        for k in range(3 * REPEATS):
            x, counts, displs = calls[k % len(calls)]
            got = _scatterv(comm, x, counts, displs, 0)
            want = _expected(x, counts, displs, r)
            assert got.dtype == want.dtype and np.array_equal(got, want), k
        return comm.bound_calls().get("scatterv")

    assert collops.spawn(body, 3, transport="shm", timeout=100) == ["shm_direct"] * 3
