"""Collectives on arbitrary picklable Python objects.

Every object is pickled once, with protocol 5, and unpickled once where it arrives.

**Small objects take one round.** A pickle of at most `SLOT` − `HEAD` bytes with no
out-of-band buffer travels in a fixed-size slot — its length in the slot's header, the bytes
after it — through the ordinary array collective of `SLOT` bytes per rank (allgather, bcast,
scatter, alltoall), which takes the transports' fast paths: mpi4py's lowercase methods' one
round, with no sizes exchanged first. Where ranks must agree whether anyone's object was too
big and the collective does not tell them all (gather, reduce and the scans take the
allgather; alltoall adds a one-word allreduce), the slot's header says so, and only then do
the ranks take the general path below.

**Large objects** go as frames: the pickle stream carries only the object's structure, while
large buffers (numpy arrays and other PickleBuffer-aware data) travel out of band, each moved by
its own array collective straight from the object's memory, so an object holding a large array
is not copied into one pickle, and no 2 GiB limit applies. Frame lengths are exchanged first;
then one collective per frame index.

Reductions (`reduce_object`, `allreduce_object`, `scan_object`, `exscan_object`) fold the
objects in rank order with ``op``: ``operator.add`` by default as in mpi4py, a collops
operator or its name (``"max"``: Python's ``max``…, as mpi4py maps ``MPI.MAX``), or any
callable.
"""

from __future__ import annotations

import operator
import pickle
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spec import make_spec
from ..errors import ArgumentError
from ..ops import Op

#: bytes per rank of the one-round path, and of its header (payload length, or `TOO_BIG`)
SLOT = 512
HEAD = 8
TOO_BIG = -1


_HEADER = struct.Struct("<q")


def _slot(frames: Sequence[np.ndarray] | bytes) -> np.ndarray:
    """A slot holding a small single-frame pickle (its frames, or its bytes), else one saying
    it is too big."""
    slot = np.empty(SLOT, np.uint8)
    view = slot.data
    small = frames if isinstance(frames, bytes) else (
        frames[0].data if len(frames) == 1 else None)
    if small is not None and len(small) <= SLOT - HEAD:
        _HEADER.pack_into(view, 0, len(small))
        view[HEAD: HEAD + len(small)] = small
    else:
        _HEADER.pack_into(view, 0, TOO_BIG)
    return slot


def _pickled(obj: Any) -> tuple[bytes | None, list[np.ndarray]]:
    """``obj`` pickled once: its bytes when small with no out-of-band buffer (no frames),
    else its frames."""
    buffers: list[pickle.PickleBuffer] = []
    main = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    if not buffers and len(main) <= SLOT - HEAD:
        return main, []
    return None, _frames(main, buffers)


def _fits(slots: np.ndarray) -> bool:
    """Whether every slot of ``slots`` (rows) holds its object."""
    view = slots.reshape(-1).data
    return all(_HEADER.unpack_from(view, r * SLOT)[0] != TOO_BIG for r in range(len(slots)))


def _unslot(slot: np.ndarray) -> Any:
    view = slot.data
    n = _HEADER.unpack_from(view, 0)[0]
    return pickle.loads(view[HEAD: HEAD + n])


def _unslot_all(rows: np.ndarray) -> list[Any]:
    """The object of every slot of ``rows``."""
    view = rows.reshape(-1).data
    out = []
    for r in range(len(rows)):
        at = r * SLOT
        n = _HEADER.unpack_from(view, at)[0]
        out.append(pickle.loads(view[at + HEAD: at + HEAD + n]))
    return out


def _python_op(op: Any) -> Callable[[Any, Any], Any]:
    """``op`` as a function of two Python objects (mpi4py's mapping of MPI's operators)."""
    if op is None:
        return operator.add
    if isinstance(op, str) or isinstance(op, Op):
        name = (op if isinstance(op, str) else op.name).upper()
        if name in PYTHON_OPS:
            return PYTHON_OPS[name]
        if isinstance(op, Op):
            return lambda a, b: op.fn(a, b)
        raise ArgumentError("reduce_object", "op", op, "not a built-in operator name "
                            f"(one of {', '.join(sorted(PYTHON_OPS))}) nor a callable")
    if callable(op):
        return op  # type: ignore[no-any-return]
    raise ArgumentError("reduce_object", "op", op, "must be a callable or a collops operator")


def _loc(better: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def pick(a: Any, b: Any) -> Any:
        if better(b[0], a[0]) or (b[0] == a[0] and b[1] < a[1]):
            return b
        return a
    return pick


PYTHON_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "SUM": operator.add, "PROD": operator.mul, "MAX": lambda a, b: b if b > a else a,
    "MIN": lambda a, b: b if b < a else a, "LAND": lambda a, b: a and b,
    "LOR": lambda a, b: a or b, "LXOR": lambda a, b: bool(a) != bool(b),
    "BAND": operator.and_, "BOR": operator.or_, "BXOR": operator.xor,
    "MAXLOC": _loc(operator.gt), "MINLOC": _loc(operator.lt),
}


def _fold(values: Sequence[Any], fn: Callable[[Any, Any], Any]) -> Any:
    acc = values[0]
    for item in values[1:]:
        acc = fn(acc, item)
    return acc

if TYPE_CHECKING:
    from .comm import Comm


def dumps(obj: Any) -> list[np.ndarray]:
    """Frames of ``obj``: the pickle stream, then each out-of-band buffer (as uint8 views)."""
    buffers: list[pickle.PickleBuffer] = []
    main = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return _frames(main, buffers)


def _frames(main: bytes, buffers: list[pickle.PickleBuffer]) -> list[np.ndarray]:
    frames = [np.frombuffer(main, np.uint8)]
    for b in buffers:
        try:
            raw = b.raw()
        except BufferError:
            raw = memoryview(bytes(b))
        frames.append(np.frombuffer(raw, np.uint8) if raw.nbytes else np.empty(0, np.uint8))
    return frames


def loads(frames: Sequence[np.ndarray]) -> Any:
    """Inverse of `dumps`."""
    return pickle.loads(frames[0].tobytes(), buffers=[memoryview(f) for f in frames[1:]])  # type: ignore[arg-type]


def _lengths(frames: Sequence[np.ndarray]) -> np.ndarray:
    return np.asarray([len(f) for f in frames], np.int64)


def bcast_object(comm: Comm, obj: Any, root: int = 0) -> Any:
    """Broadcast a picklable object from ``root``."""
    comm._check_root("bcast_object", root)
    small, frames = _pickled(obj) if comm.rank == root else (None, [])
    slot = _slot(small or frames) if comm.rank == root else np.empty(SLOT, np.uint8)
    comm.bcast(slot, root, out=slot)
    if _fits(slot[None, :]):
        return obj if comm.rank == root else _unslot(slot)
    return _bcast_frames(comm, obj, frames, root)


def _bcast_frames(comm: Comm, obj: Any, frames: list[np.ndarray], root: int) -> Any:
    lengths = comm.bcast(_lengths(frames) if comm.rank == root else None, root)
    out: list[np.ndarray] = []
    for k, n in enumerate(lengths.tolist()):
        buf = frames[k] if comm.rank == root else np.empty(n, np.uint8)
        spec = make_spec("bcast", comm.size, np.uint8, count=n, root=root)
        if comm.rank == root:
            comm._run_phase(spec, buf, np.empty(n, np.uint8), ("object", k))
        else:
            comm._run_phase(spec, None, buf, ("object", k))
        out.append(buf)
    return obj if comm.rank == root else loads(out)


def _all_slots(comm: Comm, mine: bytes | list[np.ndarray]) -> np.ndarray | None:
    """Every rank's slot (rows, in rank order), or None when some object did not fit."""
    slots = comm.allgather(_slot(mine), out=np.empty(comm.size * SLOT, np.uint8))
    rows = slots.reshape(comm.size, SLOT)
    return rows if _fits(rows) else None


def _gather_frames(comm: Comm, frames: list[np.ndarray], root: int | None
                   ) -> list[Any] | None:
    mine = _lengths(frames)
    table = _exchange_lengths(comm, mine)
    depth = max(len(row) for row in table)
    received: list[list[np.ndarray]] = [[] for _ in range(comm.size)]
    for k in range(depth):
        counts = [int(row[k]) if k < len(row) else 0 for row in table]
        mine_k = frames[k] if k < len(frames) else np.empty(0, np.uint8)
        gets = root is None or comm.rank == root
        whole = np.empty(sum(counts), np.uint8) if gets else None
        coll = "allgatherv" if root is None else "gatherv"
        spec = make_spec(coll, comm.size, np.uint8, counts=counts, root=root or 0)
        comm._run_phase(spec, mine_k, whole, ("object", k))
        if whole is not None:
            offsets = np.cumsum([0] + counts)
            for r in range(comm.size):
                if k < len(table[r]):
                    received[r].append(whole[offsets[r]: offsets[r + 1]])
    if root is not None and comm.rank != root:
        return None
    return [loads(fr) for fr in received]


def _exchange_lengths(comm: Comm, mine: np.ndarray) -> list[list[int]]:
    counts = comm.allgather(np.asarray([len(mine)], np.int64))
    flat = comm.allgatherv(mine, counts=counts.tolist())
    out, pos = [], 0
    for n in counts.tolist():
        out.append(flat[pos: pos + n].tolist())
        pos += n
    return out


def gather_object(comm: Comm, obj: Any, root: int = 0) -> list[Any] | None:
    """Every rank's object, in rank order, on ``root``; None elsewhere."""
    comm._check_root("gather_object", root)
    small, frames = _pickled(obj)
    rows = _all_slots(comm, small or frames)
    if rows is None:
        return _gather_frames(comm, _as_frames(small, frames), root)
    return _unslot_all(rows) if comm.rank == root else None


def _as_frames(small: bytes | None, frames: list[np.ndarray]) -> list[np.ndarray]:
    """The frames of a pickle `_pickled` returned as bytes or as frames."""
    return [np.frombuffer(small, np.uint8)] if small is not None else frames


def allgather_object(comm: Comm, obj: Any) -> list[Any]:
    """Every rank's object, in rank order, on every rank."""
    small, frames = _pickled(obj)
    rows = _all_slots(comm, small or frames)
    if rows is not None:
        return _unslot_all(rows)
    result = _gather_frames(comm, _as_frames(small, frames), None)
    assert result is not None
    return result


def scatter_object(comm: Comm, objs: Sequence[Any] | None, root: int = 0) -> Any:
    """Object ``objs[rank]`` of the root's sequence, on each rank."""
    comm._check_root("scatter_object", root)
    per_rank: list[list[np.ndarray]] = []
    slots = np.empty(comm.size * SLOT, np.uint8)
    if comm.rank == root:
        if objs is None or len(objs) != comm.size:
            raise ArgumentError("scatter_object", "objs", objs,
                                f"the root needs a sequence of {comm.size} objects", comm.rank)
        per_rank = [dumps(o) for o in objs]
        rows = slots.reshape(comm.size, SLOT)
        for r, frames in enumerate(per_rank):
            rows[r] = _slot(frames)
        if not _fits(rows):  # one too big: every rank takes the frames' path
            for r in range(comm.size):
                _HEADER.pack_into(memoryview(rows[r]), 0, TOO_BIG)
    mine_slot = comm.scatter(slots if comm.rank == root else None, root,
                             out=np.empty(SLOT, np.uint8))
    if _fits(mine_slot[None, :]):
        return _unslot(mine_slot)
    return _scatter_frames(comm, per_rank, root)


def _scatter_frames(comm: Comm, per_rank: list[list[np.ndarray]], root: int) -> Any:
    if comm.rank == root:
        depth = max(len(f) for f in per_rank)
        table = np.zeros((comm.size, depth), np.int64)
        for r, frames in enumerate(per_rank):
            table[r, : len(frames)] = _lengths(frames) + 1  # 0 marks "no such frame"
    table = comm.bcast(table if comm.rank == root else None, root)
    mine: list[np.ndarray] = []
    for k in range(table.shape[1]):
        counts = np.maximum(table[:, k] - 1, 0).tolist()
        send = None
        if comm.rank == root:
            send = np.concatenate([f[k] if k < len(f) else np.empty(0, np.uint8)
                                   for f in per_rank])
        recv = np.empty(counts[comm.rank], np.uint8)
        spec = make_spec("scatterv", comm.size, np.uint8, counts=counts, root=root)
        comm._run_phase(spec, send, recv, ("object", k))
        if table[comm.rank, k]:
            mine.append(recv)
    return loads(mine)


def alltoall_object(comm: Comm, objs: Sequence[Any]) -> list[Any]:
    """``objs[j]`` goes to rank j; returns the received objects in rank order."""
    if len(objs) != comm.size:
        raise ArgumentError("alltoall_object", "objs", objs,
                            f"needs one object per rank ({comm.size})", comm.rank)
    per_dest = [dumps(o) for o in objs]
    rows = np.stack([_slot(frames) for frames in per_dest]).reshape(-1)
    got = comm.alltoall(rows, out=np.empty(comm.size * SLOT, np.uint8)).reshape(comm.size, SLOT)
    mine_fit = _fits(rows.reshape(comm.size, SLOT)) and _fits(got)
    if comm.allreduce(np.array([mine_fit], np.int64), "min")[0]:
        return _unslot_all(got)
    return _alltoall_frames(comm, per_dest)


def _alltoall_frames(comm: Comm, per_dest: list[list[np.ndarray]]) -> list[Any]:
    my_depth = max(len(f) for f in per_dest)
    depth = int(comm.allreduce(np.asarray([my_depth], np.int64), "MAX")[0])
    lengths = np.zeros((comm.size, depth), np.int64)
    for j, frames in enumerate(per_dest):
        lengths[j, : len(frames)] = _lengths(frames) + 1  # 0 marks "no such frame"
    incoming = comm.alltoall(lengths)
    received: list[list[np.ndarray]] = [[] for _ in range(comm.size)]
    for k in range(depth):
        send_counts = np.maximum(lengths[:, k] - 1, 0).tolist()
        recv_counts = np.maximum(incoming[:, k] - 1, 0).tolist()
        send = np.concatenate([f[k] if k < len(f) else np.empty(0, np.uint8) for f in per_dest])
        recv = np.empty(sum(recv_counts), np.uint8)
        spec = make_spec("alltoallv", comm.size, np.uint8, sendcounts=send_counts,
                         recvcounts=recv_counts)
        comm._run_phase(spec, send, recv, ("object-v", k))
        offsets = np.cumsum([0] + recv_counts)
        for r in range(comm.size):
            if incoming[r, k]:
                received[r].append(recv[offsets[r]: offsets[r + 1]])
    return [loads(fr) for fr in received]


def reduce_object(comm: Comm, obj: Any, op: Any = None, root: int = 0) -> Any:
    """``op`` (default ``operator.add``) folded over the ranks' objects in rank order, on
    ``root``; None elsewhere."""
    fn = _python_op(op)
    gathered = gather_object(comm, obj, root)
    return None if gathered is None else _fold(gathered, fn)


def allreduce_object(comm: Comm, obj: Any, op: Any = None) -> Any:
    """``op`` folded over the ranks' objects in rank order, on every rank: small objects are
    gathered everywhere in one round and folded on each rank; large ones folded on rank 0
    and broadcast."""
    fn = _python_op(op)
    small, frames = _pickled(obj)
    rows = _all_slots(comm, small or frames)
    if rows is not None:
        return _fold(_unslot_all(rows), fn)
    gathered = _gather_frames(comm, _as_frames(small, frames), 0)
    return bcast_object(comm, None if gathered is None else _fold(gathered, fn), 0)


def scan_object(comm: Comm, obj: Any, op: Any = None) -> Any:
    """``op`` folded over the objects of ranks 0 … rank, on each rank."""
    fn = _python_op(op)
    return _fold(allgather_object(comm, obj)[: comm.rank + 1], fn)


def exscan_object(comm: Comm, obj: Any, op: Any = None) -> Any:
    """``op`` folded over the objects of ranks 0 … rank − 1 (None on rank 0, as in mpi4py)."""
    fn = _python_op(op)
    before = allgather_object(comm, obj)[: comm.rank]
    return _fold(before, fn) if before else None
