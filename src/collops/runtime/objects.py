"""Collectives on arbitrary picklable Python objects.

Every object is pickled once, with protocol 5, and unpickled once where it arrives.

**Small objects take one round.** A pickle of at most `SLOT` − `HEAD` bytes with no
out-of-band buffer travels in a fixed-size slot — its length in the slot's header, the bytes
after it — through the ordinary array collective of `SLOT` bytes per rank (allgather, bcast,
scatter, alltoall), which takes the transports' fast paths: mpi4py's lowercase methods' one
round, with no sizes exchanged first. A compiled codec (`_slots.c`; `slot_codec` in Python)
pickles an object straight into its slot and unpickles only the slots this rank needs, in one
call each. Where ranks must agree whether anyone's object was too big and the collective does
not tell them all (allreduce and the scans take the allgather), the slot's header says so; an
alltoall's or scatter's sender with one object too big marks all its slots. Only then do the
ranks take the general path below. A gather (and a reduce) is one rooted round: a rank whose
object does not fit sends its frames to the root alone afterwards (`object_frames`), so the
others never wait for a sizes' exchange. Slot buffers are the communicator's, reused.

**Large objects** go as frames: the pickle stream carries the object's structure (and buffers
of at most a slot's size, so a small array stays in the slot), while larger buffers (numpy
arrays and other PickleBuffer-aware data) travel out of band, each moved by its own array
collective straight from the object's memory, so an object holding a large array is not
copied into one pickle, and no 2 GiB limit applies. Frame lengths are exchanged first;
then one collective per frame index.

Reductions (`reduce_object`, `allreduce_object`, `scan_object`, `exscan_object`) fold the
objects in rank order with ``op``: ``operator.add`` by default as in mpi4py, a collops
operator or its name (``"max"``: Python's ``max``…, as mpi4py maps ``MPI.MAX``), or any
callable.
"""

from __future__ import annotations

import operator
import pickle
from collections.abc import Callable, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config
from ..algorithms.spec import make_spec
from ..errors import ArgumentError
from ..ops import Op
from . import slot_codec
from .abandon import giving_up
from .arguments import checked_timeout
from .commbase import _SLOW
from .object_frames import FramesToRoot, frames_marked, mark_frames
from .request import Request
from .slot_codec import HEAD, TOO_BIG

try:  # the compiled codec (`_slots.c`); `slot_codec` is the same in Python
    from . import _slots
except ImportError:  # pragma: no cover - a build without a C compiler
    _slots = None  # type: ignore[assignment]

#: bytes per rank of the one-round path (its first `HEAD` bytes: the pickle's length, or
#: `TOO_BIG`)
SLOT = 512

#: a pickle that did not fit its slot: the stream and its out-of-band buffers
Pickled = tuple[bytes, list[pickle.PickleBuffer]]


class Slots:
    """A communicator's reused slot buffers: one slot and one per rank, to send and to
    receive. A blocking call's slots are decoded into new objects before it returns, so the
    next call may overwrite them."""

    __slots__ = ("send", "recv", "send_all", "recv_all")

    def __init__(self, size: int) -> None:
        self.send, self.recv = np.empty(SLOT, np.uint8), np.empty(SLOT, np.uint8)
        self.send_all = np.empty(size * SLOT, np.uint8)
        self.recv_all = np.empty(size * SLOT, np.uint8)


def _prepared(comm: Comm) -> tuple[Any, Slots]:
    """The slot codec in use (compiled unless missing or ``COLLOPS_COMPILED=0``) and the
    communicator's `Slots`."""
    own = comm._object_slots
    if own is None:
        own = comm._object_slots = Slots(comm.size)
    return (_slots if _slots is not None and config.settings.compiled else slot_codec), own


def _limit(comm: Comm, call: str, timeout: Any) -> float | None:
    """A call's ``timeout`` checked (None: the communicator's); one only this rank got wrong
    gives the call up, so its peers are told."""
    if timeout is None:
        return None
    with giving_up(comm):
        return checked_timeout(call, timeout, comm.rank)


def _root(comm: Comm, call: str, root: Any) -> None:
    """Check a rooted object call's ``root`` (at once when it is a plain rank)."""
    if type(root) is not int or not 0 <= root < comm.size:
        comm._check_root(call, root)


def _too_big(rows: np.ndarray, n: int) -> None:
    """Mark the ``n`` slots of ``rows`` too big: every receiver takes the frames' path."""
    for r in range(n):
        rows[r * SLOT: r * SLOT + HEAD].view(np.int64)[0] = TOO_BIG


def _slot_frames(rows: np.ndarray, r: int) -> list[np.ndarray]:
    """The frames of the pickle slot ``r`` of ``rows`` holds (a copy: the slot is reused)."""
    at = r * SLOT
    n = int(rows[at: at + HEAD].view(np.int64)[0])
    return [rows[at + HEAD: at + HEAD + n].copy()]


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


def bcast_object(comm: Comm, obj: Any, root: int = 0, *, timeout: float | None = None) -> Any:
    """Broadcast a picklable object from ``root``."""
    if type(root) is not int or not 0 <= root < comm.size:  # (a plain rank: no call)
        _root(comm, "bcast_object", root)
    t = None if timeout is None else _limit(comm, "bcast_object", timeout)
    codec, own = _prepared(comm)
    slot = own.send
    big = codec.encode(slot, 0, SLOT, obj) if comm.rank == root else None
    # its bound runner, inline; in place at the root, which needs no copy of its own slot
    got_slot = comm.bcast(slot, root, out=slot if comm.rank == root else own.recv, timeout=t)
    if comm.rank == root:
        return obj if big is None else _bcast_frames(comm, obj, _frames(*big), root, t)
    got = codec.decode(got_slot, SLOT, 1, 0, 1)
    return got[0] if got is not None else _bcast_frames(comm, None, [], root, t)


def _bcast_frames(comm: Comm, obj: Any, frames: list[np.ndarray], root: int,
                  t: float | None) -> Any:
    lengths = comm.bcast(_lengths(frames) if comm.rank == root else None, root, timeout=t)
    out: list[np.ndarray] = []
    for k, n in enumerate(lengths.tolist()):
        buf = frames[k] if comm.rank == root else np.empty(n, np.uint8)
        spec = make_spec("bcast", comm.size, np.uint8, count=n, root=root)
        if comm.rank == root:
            comm._run_phase(spec, buf, np.empty(n, np.uint8), ("object", k), t)
        else:
            comm._run_phase(spec, None, buf, ("object", k), t)
        out.append(buf)
    return obj if comm.rank == root else loads(out)


def _gathered(comm: Comm, obj: Any, count: int, t: float | None = None) -> list[Any]:
    """The objects of ranks 0 … ``count`` − 1 on every rank: small, every rank's slot
    gathered everywhere in one round; else (some rank's object did not fit) as frames."""
    codec, own = _prepared(comm)
    mine = own.send
    big = codec.encode(mine, 0, SLOT, obj)
    rows = comm._fast("allgather", mine, None, 0, own.recv_all, None, t)
    if rows is _SLOW:
        rows = comm.allgather(mine, out=own.recv_all, timeout=t)
    got = codec.decode(rows, SLOT, comm.size, 0, count)
    if got is not None:
        return got  # type: ignore[no-any-return]
    frames = _frames(*big) if big is not None else _slot_frames(rows, comm.rank)
    return _gather_frames(comm, frames, t)[:count]


def _gather_frames(comm: Comm, frames: list[np.ndarray], t: float | None) -> list[Any]:
    mine = _lengths(frames)
    table = _exchange_lengths(comm, mine, t)
    depth = max(len(row) for row in table)
    received: list[list[np.ndarray]] = [[] for _ in range(comm.size)]
    for k in range(depth):
        counts = [int(row[k]) if k < len(row) else 0 for row in table]
        mine_k = frames[k] if k < len(frames) else np.empty(0, np.uint8)
        whole = np.empty(sum(counts), np.uint8)
        spec = make_spec("allgatherv", comm.size, np.uint8, counts=counts)
        comm._run_phase(spec, mine_k, whole, ("object", k), t)
        offsets = np.cumsum([0] + counts)
        for r in range(comm.size):
            if k < len(table[r]):
                received[r].append(whole[offsets[r]: offsets[r + 1]])
    return [loads(fr) for fr in received]


def _exchange_lengths(comm: Comm, mine: np.ndarray, t: float | None) -> list[list[int]]:
    counts = comm.allgather(np.asarray([len(mine)], np.int64), timeout=t)
    flat = comm.allgatherv(mine, counts=counts.tolist(), timeout=t)
    out, pos = [], 0
    for n in counts.tolist():
        out.append(flat[pos: pos + n].tolist())
        pos += n
    return out


def gather_object(comm: Comm, obj: Any, root: int = 0, *, timeout: float | None = None
                  ) -> list[Any] | None:
    """Every rank's object, in rank order, on ``root``; None elsewhere. One rooted round
    of slots; a rank whose object does not fit then sends its frames to the root alone."""
    if type(root) is not int or not 0 <= root < comm.size:  # (a plain rank: no call)
        _root(comm, "gather_object", root)
    t = None if timeout is None else _limit(comm, "gather_object", timeout)
    codec, own = _prepared(comm)
    mine, here = own.send, comm.rank == root
    big = codec.encode(mine, 0, SLOT, obj)
    frames = _frames(*big) if big is not None else []
    if frames:
        mark_frames(mine, frames)
    # the gather's call number: the frames' tag space (read before the gather takes it)
    seq = int(comm._call_number[0]) if frames or here else 0
    into = own.recv_all if here else None
    rows = comm._fast("gather", mine, None, root, into, None, t)
    if rows is _SLOW:
        rows = comm.gather(mine, root, out=into, timeout=t)
    if not here:
        if frames:
            _frames_to_root(comm, seq, root, frames, {}, t)
        return None
    got = codec.decode(rows, SLOT, comm.size, 0, comm.size)
    if got is not None:
        return got  # type: ignore[no-any-return]
    return _gathered_to_root(comm, codec, rows, seq, root, frames, t)


def _gathered_to_root(comm: Comm, codec: Any, rows: np.ndarray, seq: int, root: int,
                      frames: list[np.ndarray], t: float | None) -> list[Any]:
    """The root's objects of a gather whose slots say some did not fit: those that did
    from their slots, the others' frames received from their ranks (its own copied)."""
    got: list[Any] = [None] * comm.size
    expected = {}
    for j in range(comm.size):
        at = j * SLOT
        if int(rows[at: at + HEAD].view(np.int64)[0]) != TOO_BIG:
            got[j] = codec.decode(rows[at: at + SLOT], SLOT, 1, 0, 1)[0]
        elif j != comm.rank:
            expected[j] = frames_marked(rows, at)
    arrived = _frames_to_root(comm, seq, root, [], expected, t)
    for j in expected:
        got[j] = loads(arrived.frames_of(j))
    if frames:
        got[comm.rank] = loads([f.copy() for f in frames])
    return got


def _frames_to_root(comm: Comm, seq: int, root: int, frames: list[np.ndarray],
                    expected: dict[int, int], t: float | None) -> FramesToRoot:
    """Send ``frames`` to ``root``, or receive the ``expected`` ranks' there, to completion."""
    ex = FramesToRoot(comm, "gather_object", seq, root, frames, expected,
                      comm._timeout(t, "gather_object"))

    def one() -> Any:
        yield ex

    Request(comm, one(), True).wait()
    return ex


def allgather_object(comm: Comm, obj: Any, *, timeout: float | None = None) -> list[Any]:
    """Every rank's object, in rank order, on every rank."""
    return _gathered(comm, obj, comm.size, _limit(comm, "allgather_object", timeout))


def scatter_object(comm: Comm, objs: Sequence[Any] | None, root: int = 0, *,
                   timeout: float | None = None) -> Any:
    """Object ``objs[rank]`` of the root's sequence, on each rank."""
    if type(root) is not int or not 0 <= root < comm.size:  # (a plain rank: no call)
        _root(comm, "scatter_object", root)
    t = None if timeout is None else _limit(comm, "scatter_object", timeout)
    codec, own = _prepared(comm)
    per_rank: list[list[np.ndarray]] = []
    rows = None
    if comm.rank == root:
        if objs is None or len(objs) != comm.size:
            raise ArgumentError("scatter_object", "objs", objs,
                                f"the root needs a sequence of {comm.size} objects", comm.rank)
        rows = own.send_all
        per_rank = _encode_rows(codec, rows, objs)
    mine = comm._fast("scatter", rows, None, root, own.recv, None, t)
    if mine is _SLOW:
        mine = comm.scatter(rows, root, out=own.recv, timeout=t)
    got = codec.decode(mine, SLOT, 1, 0, 1)
    return got[0] if got is not None else _scatter_frames(comm, per_rank, root, t)


def _encode_rows(codec: Any, rows: np.ndarray, objs: Sequence[Any]) -> list[list[np.ndarray]]:
    """Each of ``objs`` pickled once into its slot of ``rows``; when one does not fit, every
    slot says so and the frames of every object come back (else none)."""
    bigs = codec.encode_rows(rows, SLOT, objs)
    if bigs is None:
        return []
    frames = [_slot_frames(rows, j) if big is None else _frames(*big)
              for j, big in enumerate(bigs)]
    _too_big(rows, len(objs))
    return frames


def _scatter_frames(comm: Comm, per_rank: list[list[np.ndarray]], root: int,
                    t: float | None) -> Any:
    if comm.rank == root:
        depth = max(len(f) for f in per_rank)
        table = np.zeros((comm.size, depth), np.int64)
        for r, frames in enumerate(per_rank):
            table[r, : len(frames)] = _lengths(frames) + 1  # 0 marks "no such frame"
    table = comm.bcast(table if comm.rank == root else None, root, timeout=t)
    mine: list[np.ndarray] = []
    for k in range(table.shape[1]):
        counts = np.maximum(table[:, k] - 1, 0).tolist()
        send = None
        if comm.rank == root:
            send = np.concatenate([f[k] if k < len(f) else np.empty(0, np.uint8)
                                   for f in per_rank])
        recv = np.empty(counts[comm.rank], np.uint8)
        spec = make_spec("scatterv", comm.size, np.uint8, counts=counts, root=root)
        comm._run_phase(spec, send, recv, ("object", k), t)
        if table[comm.rank, k]:
            mine.append(recv)
    return loads(mine)


def alltoall_object(comm: Comm, objs: Sequence[Any], *, timeout: float | None = None
                    ) -> list[Any]:
    """``objs[j]`` goes to rank j; returns the received objects in rank order. One round
    when every object fits its slot: a rank with one that does not marks all its slots, so
    every rank sees it and all take the frames' path."""
    if len(objs) != comm.size:
        raise ArgumentError("alltoall_object", "objs", objs,
                            f"needs one object per rank ({comm.size})", comm.rank)
    t = _limit(comm, "alltoall_object", timeout)
    codec, own = _prepared(comm)
    rows = own.send_all
    per_dest = _encode_rows(codec, rows, objs)
    got_rows = comm._fast("alltoall", rows, None, 0, own.recv_all, None, t)
    if got_rows is _SLOW:
        got_rows = comm.alltoall(rows, out=own.recv_all, timeout=t)
    got = codec.decode(got_rows, SLOT, comm.size, 0, comm.size)
    if got is not None:
        return got  # type: ignore[no-any-return]
    return _alltoall_frames(comm, per_dest or [_slot_frames(rows, j) for j in range(comm.size)],
                            t)


def _alltoall_frames(comm: Comm, per_dest: list[list[np.ndarray]], t: float | None
                     ) -> list[Any]:
    my_depth = max(len(f) for f in per_dest)
    depth = int(comm.allreduce(np.asarray([my_depth], np.int64), "MAX", timeout=t)[0])
    lengths = np.zeros((comm.size, depth), np.int64)
    for j, frames in enumerate(per_dest):
        lengths[j, : len(frames)] = _lengths(frames) + 1  # 0 marks "no such frame"
    incoming = comm.alltoall(lengths, timeout=t)
    received: list[list[np.ndarray]] = [[] for _ in range(comm.size)]
    for k in range(depth):
        send_counts = np.maximum(lengths[:, k] - 1, 0).tolist()
        recv_counts = np.maximum(incoming[:, k] - 1, 0).tolist()
        send = np.concatenate([f[k] if k < len(f) else np.empty(0, np.uint8) for f in per_dest])
        recv = np.empty(sum(recv_counts), np.uint8)
        spec = make_spec("alltoallv", comm.size, np.uint8, sendcounts=send_counts,
                         recvcounts=recv_counts)
        comm._run_phase(spec, send, recv, ("object-v", k), t)
        offsets = np.cumsum([0] + recv_counts)
        for r in range(comm.size):
            if incoming[r, k]:
                received[r].append(recv[offsets[r]: offsets[r + 1]])
    return [loads(fr) for fr in received]


def reduce_object(comm: Comm, obj: Any, op: Any = None, root: int = 0, *,
                  timeout: float | None = None) -> Any:
    """``op`` (default ``operator.add``) folded over the ranks' objects in rank order, on
    ``root``; None elsewhere."""
    fn = operator.add if op is None else _python_op(op)
    gathered = gather_object(comm, obj, root, timeout=timeout)
    return None if gathered is None else reduce(fn, gathered)


def allreduce_object(comm: Comm, obj: Any, op: Any = None, *, timeout: float | None = None
                     ) -> Any:
    """``op`` folded over the ranks' objects in rank order, on every rank (every rank
    gathers them all and folds them)."""
    fn = operator.add if op is None else _python_op(op)
    return reduce(fn, _gathered(comm, obj, comm.size, _limit(comm, "allreduce_object", timeout)))


def scan_object(comm: Comm, obj: Any, op: Any = None, *, timeout: float | None = None) -> Any:
    """``op`` folded over the objects of ranks 0 … rank, on each rank."""
    fn = _python_op(op)
    return reduce(fn, _gathered(comm, obj, comm.rank + 1, _limit(comm, "scan_object", timeout)))


def exscan_object(comm: Comm, obj: Any, op: Any = None, *, timeout: float | None = None
                  ) -> Any:
    """``op`` folded over the objects of ranks 0 … rank − 1 (None on rank 0, as in mpi4py)."""
    fn = _python_op(op)
    before = _gathered(comm, obj, comm.rank, _limit(comm, "exscan_object", timeout))
    return reduce(fn, before) if before else None
