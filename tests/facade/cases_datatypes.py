"""Derived datatypes with gaps in facade calls (run by `cases.run_cases`): columns, indexed
blocks, subarrays and resized types in collectives (every form) and point-to-point, checked
against numpy slicing of the same buffers. Elements outside a type stay as they were."""

from __future__ import annotations

from functools import reduce as fold
from typing import Any

import numpy as np

from collops import MPI

from .cases import case, data, forms

ROWS, COLS = 4, 5


def _grid(rank: int) -> np.ndarray:
    """Rank ``rank``'s ROWS x COLS array."""
    return data(rank, ROWS * COLS).reshape(ROWS, COLS)


def _column() -> Any:
    """One column of a ROWS x COLS array of doubles, resized to one element's extent (so a
    displacement counts columns), as MPI programs write it."""
    return MPI.DOUBLE.Create_vector(ROWS, 1, COLS).Create_resized(0, 8).Commit()


@case
def case_datatype_bcast_indexed_block(comm: Any) -> list[tuple[str, Any, Any]]:
    results = []
    odd = MPI.DOUBLE.Create_indexed_block(1, list(range(1, 10, 2))).Commit()
    root = comm.size - 1

    def make() -> tuple[np.ndarray]:
        return (data(comm.rank, 10) if comm.rank == root else np.full(10, -1.0),)

    expected = np.full(10, -1.0)
    expected[1::2] = data(root, 10)[1::2]
    if comm.rank == root:
        expected = data(root, 10)
    for label, got in forms(comm, lambda b: comm.Bcast([b, 1, odd], root),
                            lambda b: comm.Ibcast([b, 1, odd], root),
                            lambda b: comm.Bcast_init([b, 1, odd], root), make,
                            lambda b: b[0].copy()):
        results.append((label, got, expected))
    odd.Free()
    return results


@case
def case_datatype_allreduce_column(comm: Any) -> list[tuple[str, Any, Any]]:
    results = []
    column = _column()
    total = fold(np.add, [_grid(r)[:, 2] for r in range(comm.size)])

    def make() -> tuple[np.ndarray, np.ndarray]:
        return _grid(comm.rank), np.full((ROWS, COLS), 7.0)

    expected = np.full((ROWS, COLS), 7.0)
    expected[:, 2] = total
    for label, got in forms(comm, lambda s, r: comm.Allreduce([s, 1, 2, column],
                                                             [r, 1, 2, column]),
                            lambda s, r: comm.Iallreduce([s, 1, 2, column], [r, 1, 2, column]),
                            lambda s, r: comm.Allreduce_init([s, 1, 2, column],
                                                             [r, 1, 2, column]),
                            make, lambda b: b[1].copy()):
        results.append((label, got, expected))
    inplace = _grid(comm.rank)
    comm.Allreduce(MPI.IN_PLACE, [inplace, (1, 2), column], op=MPI.SUM)
    expected = _grid(comm.rank)
    expected[:, 2] = total
    results.append(("IN_PLACE", inplace, expected))
    column.Free()
    return results


@case
def case_datatype_allgather_columns(comm: Any) -> list[tuple[str, Any, Any]]:
    """Every rank's 2x2 subarray lands as one column of a (4, p) array: a column type
    resized to one element, so rank r's block starts at column r."""
    p, results = comm.size, []
    block = MPI.DOUBLE.Create_subarray([ROWS, COLS], [2, 2], [1, 2]).Commit()
    column = MPI.DOUBLE.Create_vector(4, 1, p).Create_resized(0, 8).Commit()

    def make() -> tuple[np.ndarray, np.ndarray]:
        return _grid(comm.rank), np.zeros((4, p))

    expected = np.stack([_grid(r)[1:3, 2:4].ravel() for r in range(p)], axis=1)
    for label, got in forms(comm, lambda s, r: comm.Allgather([s, 1, block], [r, 1, column]),
                            lambda s, r: comm.Iallgather([s, 1, block], [r, 1, column]),
                            lambda s, r: comm.Allgather_init([s, 1, block], [r, 1, column]),
                            make, lambda b: b[1].copy()):
        results.append((label, got, expected))
    results.append(("extents", (block.Get_extent(), block.Get_size(), column.Get_extent(),
                                column.Get_true_extent()),
                    ((0, 8 * ROWS * COLS), 32, (0, 8), (0, 8 * (3 * p + 1)))))
    block.Free()
    column.Free()
    return results


@case
def case_datatype_gatherv_indexed(comm: Any) -> list[tuple[str, Any, Any]]:
    """Gatherv into every other element (a type of one element at 0 with extent 2) at
    per-rank counts and displacements; the gaps keep their values."""
    p, r, results = comm.size, comm.rank, []
    every_other = MPI.DOUBLE.Create_indexed([1], [0]).Create_resized(0, 16).Commit()
    counts = [k + 1 for k in range(p)]
    displs = [sum(counts[:k]) + k for k in range(p)]  # one spare element between blocks
    length = 2 * (displs[-1] + counts[-1])
    expected = np.full(length, -2.0)
    for k in range(p):
        expected[2 * displs[k]: 2 * (displs[k] + counts[k]): 2] = data(k, counts[k])
    for label, got in forms(
            comm, lambda s, b: comm.Gatherv(s, [b, (counts, displs), every_other], 0),
            lambda s, b: comm.Igatherv(s, [b, (counts, displs), every_other], 0),
            lambda s, b: comm.Gatherv_init(s, [b, (counts, displs), every_other], 0),
            lambda: (data(r, counts[r]), np.full(length, -2.0)), lambda b: b[1].copy()):
        results.append((label, got, expected if r == 0 else np.full(length, -2.0)))
    every_other.Free()
    return results


@case
def case_datatype_halo_exchange(comm: Any) -> list[tuple[str, Any, Any]]:
    """The halo exchange MPI programs write with a column type: each rank's first and last
    inner columns to its neighbours' halo columns, by Sendrecv, Isend/Irecv and persistent
    requests (the buffer changed between starts)."""
    p, r, results = comm.size, comm.rank, []
    right, left = (r + 1) % p, (r - 1) % p
    column = _column()

    def expected_after(mine: np.ndarray, of_left: np.ndarray,
                       of_right: np.ndarray) -> np.ndarray:
        out = mine.copy()
        out[:, 0] = of_left[:, COLS - 2]
        out[:, COLS - 1] = of_right[:, 1]
        return out

    grids = [_grid(k) for k in range(p)]
    want = expected_after(grids[r], grids[left], grids[right])
    a = _grid(r)
    comm.Sendrecv([a, (1, COLS - 2), column], right, 1, [a, (1, 0), column], left, 1)
    comm.Sendrecv([a, (1, 1), column], left, 2, [a, (1, COLS - 1), column], right, 2)
    results.append(("Sendrecv", a, want))
    a = _grid(r)
    status = MPI.Status()
    requests = [comm.Irecv([a, (1, 0), column], left, 3),
                comm.Irecv([a, (1, COLS - 1), column], right, 4),
                comm.Isend([a, (1, COLS - 2), column], right, 3),
                comm.Isend([a, (1, 1), column], left, 4)]
    MPI.Request.Waitall(requests)
    results.append(("Isend/Irecv", a, want))
    a = _grid(r)
    persistent = [comm.Recv_init([a, 1, 0, column], left, 5),
                  comm.Send_init([a, 1, COLS - 2, column], right, 5)]
    for start in range(2):
        a[:, 1:COLS - 1] += 100 * start  # each start sends the column as it is then
        MPI.Prequest.Startall(persistent)
        MPI.Request.Waitall(persistent, [status, MPI.Status()])
        shifted = [g.copy() for g in grids]
        for g in shifted:
            g[:, 1:COLS - 1] += 100 * (start * (start + 1) // 2)
        results.append((f"persistent start {start}", a[:, 0].copy(),
                        shifted[left][:, COLS - 2]))
    results.append(("status counts", (status.Get_count(column), status.Get_elements(MPI.DOUBLE),
                                      status.Get_count(MPI.DOUBLE)), (1, ROWS, ROWS)))
    if r % 2 == 0 and p > 1:
        comm.Send([_grid(r), 1, 3, column], right, 6)
        got = np.zeros((ROWS, COLS))
        comm.Recv([got, 1, 1, column], left, 6)
    elif p > 1:
        got = np.zeros((ROWS, COLS))
        comm.Recv([got, 1, 1, column], left, 6)
        comm.Send([_grid(r), 1, 3, column], right, 6)
    if p > 1:
        expected = np.zeros((ROWS, COLS))
        expected[:, 1] = grids[left][:, 3]
        results.append(("Send/Recv", got, expected))
    column.Free()
    return results


@case
def case_datatype_uncommitted_and_freed(comm: Any) -> list[tuple[str, Any, Any]]:
    results = []
    column = MPI.DOUBLE.Create_vector(ROWS, 1, COLS)
    for label, buf in (("uncommitted", [_grid(0), 1, column]),):
        try:
            comm.Bcast(buf, 0)
            results.append((label, "no error", "ERR_TYPE"))
        except MPI.Exception as exc:
            results.append((label, exc.Get_error_class(), MPI.ERR_TYPE))
    column.Commit()
    column.Free()
    try:
        comm.Bcast([_grid(0), 1, column], 0)
        results.append(("freed", "no error", "an error"))
    except MPI.Exception:
        results.append(("freed", True, True))
    return results
