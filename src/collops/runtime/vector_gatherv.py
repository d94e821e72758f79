"""``gatherv`` with counts given on every rank, at the root only, or nowhere.

A non-root's counts are never needed (MPI ignores them); the root's are needed only to
place the blocks. Where the selection table chooses ``shm_direct`` for a gatherv (the
shared-memory transport, from a spec no rank's counts enter: `headed`), each block's length
travels in its writer's header (`collops.shm.direct_gatherv`): one phase whatever the counts,
the root checking its counts against the headers or, given none, taking the lengths from
them. Elsewhere no rank can tell whether the others were given counts, so the counts are
always exchanged first (`exchanged_counts`), and each rank given counts checks them against
what the ranks hold (after taking part in the data phase, so no rank is left waiting).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config as _cfg
from ..algorithms.spec import make_spec, prefix
from ..errors import ArgumentError, CollectiveMismatch, CollopsError
from ..shm.direct_gatherv import STREAM_NAME, full_spec, learns, own_spec
from .arguments import checked_displs, rows_spanned
from .engine import Execution

if TYPE_CHECKING:
    from .commbase import CommBase
    from .phases import PhaseGenerators

#: the prepared calls' counts signature of a gatherv through headers (the counts are not
#: every rank's, so none of them enters it)
HEADED = ("gatherv", "headers")


def headed(comm: CommBase, root: int, dtype: np.dtype, algorithm: str | None) -> bool:
    """Whether a gatherv to ``root`` of ``dtype`` runs with each block's length in its
    writer's header: the selection chooses ``shm_direct`` for its spec without counts (the
    same on every rank; remembered until the settings change)."""
    if comm._generation != _cfg.generation:
        comm._new_generation()
    key = ("gatherv headed", root, dtype, algorithm)
    got = comm._cache.get(key)
    if got is None:
        spec = make_spec("gatherv", comm.size, dtype, counts=(0,) * comm.size, root=root)
        try:
            chosen = comm._choose(spec, algorithm, {})
        except CollopsError:  # the data phase reports it
            got = False
        else:
            got = chosen.algorithm.name == "shm_direct" and chosen.algorithm.native is not None
        comm._cache.put(key, got)
    return bool(got)


def streamed(comm: CommBase, root: int, dtype: np.dtype, counts: tuple[int, ...],
             algorithm: str | None) -> bool:
    """Whether a gatherv rank given ``counts`` (elements) has the blocks streamed: the
    selection table chooses the stream for a gatherv of those counts (an algorithm asked
    for is taken as it is)."""
    if algorithm is not None:
        return False
    try:
        chosen = comm._choose(full_spec(comm.size, dtype, root, counts, None), None, {})
    except CollopsError:  # the data phase reports it
        return False
    return bool(chosen.algorithm.name == STREAM_NAME)


def mismatch(call: str, given: list[int], held: list[int], rank: int) -> CollectiveMismatch | None:
    """The error of a rank given ``counts`` that differ from the rows the ranks hold (None:
    they agree)."""
    for j, (g, h) in enumerate(zip(given, held, strict=True)):
        if g != h:
            return CollectiveMismatch(f"rank {rank}: {call}: counts[{j}] is {g} but rank {j} "
                                      f"gives {h} rows")
    return None


def by_headers(comm: CommBase, call: str, data: np.ndarray, root: int, counts: Any,
               displs: Any, out: Any, algorithm: str | None, params: dict[str, Any],
               timeout: float | None) -> Generator[Execution, None, np.ndarray | None]:
    """A gatherv in one phase through the direct slots, lengths in headers (see `headed`);
    ``counts`` (rows) and ``displs`` are significant at the root only, where given."""
    p, rank = comm.size, comm.rank
    rows = data.shape[0] if data.ndim else 1
    trailing = data.shape[1:] if data.ndim else ()
    per_row = int(np.prod(trailing, dtype=np.int64))
    receives = rank == root
    row_counts = None
    if counts is not None:
        row_counts = comm._counts(call, "counts", counts)
        if row_counts[rank] != rows:
            raise ArgumentError(call, "counts", counts, f"entry {rank} is {row_counts[rank]} "
                                f"but x has {rows} rows", rank)
    row_displs = None
    if receives and displs is not None:
        row_displs = checked_displs(call, "displs", displs, row_counts or [0] * p, rank,
                                    row_counts is not None)
    result = None
    if receives and row_counts is not None:
        total = rows_spanned(row_displs, row_counts) if row_displs else sum(row_counts)
        result = comm._out(call, out, (total, *trailing), data.dtype,
                           zeros=row_displs is not None)
        if np.shares_memory(result, data):
            data = data.copy()  # x as its own block of out (MPI_IN_PLACE): copied first
    given = None if row_counts is None else tuple(c * per_row for c in row_counts)
    displs_at_root = None if row_displs is None else tuple(d * per_row for d in row_displs)
    streams = given is not None and streamed(comm, root, data.dtype, given, algorithm)
    spec = own_spec(p, data.dtype, root, rows * per_row,
                    given if receives or streams else None, displs_at_root, streams)
    seq = comm._reserve()
    execution = comm._execute(spec, data, result, seq, 0, algorithm, params, timeout,
                              counts_signature=HEADED, agree=True)
    yield execution
    stream = getattr(execution, "streamed", None)
    if stream is not None:  # the root's header said so: its counts, through the stream
        yield comm._execute(stream, data, result, seq, 1, STREAM_NAME, params, timeout,
                            counts_signature=HEADED)
    if not learns(spec, rank):
        return result
    return learned(comm, call, execution, data, displs, out)


def guess_key(root: int, x: np.ndarray) -> tuple[Any, ...]:
    """The cache key of a root's guess of the rows it gathers (`learned`) for arrays like
    ``x``."""
    return ("gatherv guess", root, x.dtype, x.shape[1:])


def learned(comm: CommBase, call: str, execution: Any, data: np.ndarray, displs: Any,
            out: Any) -> np.ndarray:
    """A root's result of a gatherv given no counts: the blocks as the headers said (the
    rows each rank sent kept as the root's next guess, `collops.shm.direct_gatherv`)."""
    lengths, got = execution.lengths, execution.recv
    trailing = data.shape[1:] if data.ndim else ()
    per_row = int(np.prod(trailing, dtype=np.int64))
    row_bytes = per_row * data.dtype.itemsize
    rank = comm.rank
    for j, n in enumerate(lengths):
        if row_bytes and n % row_bytes:
            raise CollectiveMismatch(f"rank {rank}: {call}: rank {j} sent "
                                     f"{n // data.dtype.itemsize} elements, not rows of "
                                     f"{per_row}")
    row_counts = [n // row_bytes if row_bytes else 0 for n in lengths]
    if data.ndim and row_bytes:
        comm._cache.put(guess_key(rank, data), tuple(row_counts))
    if displs is not None:  # the blocks' overlaps, now that their lengths are known
        at = checked_displs(call, "displs", displs, row_counts, rank, True)
        total = rows_spanned(at, row_counts)
    else:
        at, total = list(prefix(tuple(row_counts))), sum(row_counts)
    shape = (total, *trailing)
    # a new result holds zeros between the blocks; a caller's out keeps what it held there
    result = (np.zeros(shape, data.dtype) if out is None
              else comm._out(call, out, shape, data.dtype))
    if result.shape != shape:
        result = result.reshape(shape)
    if not total or not row_bytes:  # nothing sent (every block empty)
        return result
    flat = result.reshape(total, -1)
    rows = got[: total * row_bytes].view(data.dtype).reshape(flat.shape)
    for d, c in zip(at, row_counts, strict=True):
        flat[d: d + c] = rows[d: d + c]
    return result


def exchanged_counts(comm: PhaseGenerators, call: str, data: np.ndarray, counts: Any, seq: int,
                     timeout: float | None
                     ) -> Generator[Execution, None, tuple[list[int], Exception | None]]:
    """Every rank's rows, exchanged (a gatherv's route that does not carry lengths), and the
    error of a rank whose given ``counts`` differ from them (raised after the data phase)."""
    rows = data.shape[0] if data.ndim else 1
    per_row = int(np.prod(data.shape[1:], dtype=np.int64)) if data.ndim else 1
    given = None
    if counts is not None:  # checked before any message
        given = comm._counts(call, "counts", counts)
        if given[comm.rank] != rows:
            raise ArgumentError(call, "counts", counts, f"entry {comm.rank} is "
                                f"{given[comm.rank]} but x has {rows} rows", comm.rank)
    got = yield from comm._allgather_ints(call, [rows, per_row], seq, 0, timeout)
    if any(int(v) != per_row for v in got[:, 1]) and any(got[:, 0]):
        bad = [r for r in range(comm.size) if got[r, 1] != per_row and got[r, 0]]
        raise ArgumentError(call, "x", data.shape, f"trailing shape differs from rank "
                            f"{bad[0]}'s", comm.rank)
    held = [int(v) for v in got[:, 0]]
    return held, None if given is None else mismatch(call, given, held, comm.rank)
