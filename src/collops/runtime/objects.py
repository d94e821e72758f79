"""Collectives on arbitrary picklable Python objects.

Objects are pickled with protocol 5: the pickle stream carries only the object's structure,
while large buffers (numpy arrays and other PickleBuffer-aware data) travel out of band as
separate frames, each moved by its own array collective straight from the object's memory.
So an object holding a large array is not copied into one pickle, and no 2 GiB limit applies.
Frame lengths are exchanged first; then one collective per frame index.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..algorithms.spec import make_spec
from ..errors import ArgumentError

if TYPE_CHECKING:
    from .comm import Comm


def dumps(obj: Any) -> list[np.ndarray]:
    """Frames of ``obj``: the pickle stream, then each out-of-band buffer (as uint8 views)."""
    buffers: list[pickle.PickleBuffer] = []
    main = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
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
    frames = dumps(obj) if comm.rank == root else []
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


def _gather_frames(comm: Comm, obj: Any, root: int | None) -> list[Any] | None:
    frames = dumps(obj)
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
    return _gather_frames(comm, obj, root)


def allgather_object(comm: Comm, obj: Any) -> list[Any]:
    """Every rank's object, in rank order, on every rank."""
    result = _gather_frames(comm, obj, None)
    assert result is not None
    return result


def scatter_object(comm: Comm, objs: Sequence[Any] | None, root: int = 0) -> Any:
    """Object ``objs[rank]`` of the root's sequence, on each rank."""
    comm._check_root("scatter_object", root)
    per_rank: list[list[np.ndarray]] = []
    if comm.rank == root:
        if objs is None or len(objs) != comm.size:
            raise ArgumentError("scatter_object", "objs", objs,
                                f"the root needs a sequence of {comm.size} objects", comm.rank)
        per_rank = [dumps(o) for o in objs]
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


def reduce_object(comm: Comm, obj: Any, fn: Callable[[Any, Any], Any], root: int = 0) -> Any:
    """``fn`` folded over the ranks' objects in rank order, on ``root``; None elsewhere."""
    gathered = gather_object(comm, obj, root)
    if gathered is None:
        return None
    acc = gathered[0]
    for item in gathered[1:]:
        acc = fn(acc, item)
    return acc


def allreduce_object(comm: Comm, obj: Any, fn: Callable[[Any, Any], Any]) -> Any:
    """`reduce_object` with the result broadcast to every rank."""
    return bcast_object(comm, reduce_object(comm, obj, fn, 0), 0)
