"""Whether the MPI ranks on this node are still alive, told without MPI: by their pids.

When a process of an MPI job dies, most launchers end the job. Where one does not (MPICH's
``mpiexec -disable-auto-cleanup``, or a process manager that leaves it to the application),
the survivors would wait for ever inside MPI, which has no portable way to say a peer is gone.
The ranks of one node know each other's pids (`pids_on_node`, exchanged when the transport is
made), so a waiting rank checks them (`NodePeers.first_dead`), as the ``shm`` transport does:
the transport's waits raise `PeerFailed` naming the dead rank, and a rank blocked inside a
blocking MPI call is freed by `BlockingGuard`, which aborts the job naming the dead rank.
Ranks on other nodes cannot be checked this way.

A rank that returns from its program early stays alive inside ``MPI_Finalize``, so its pid
says nothing. So the ranks of a node also share a window of one word each
(`node_peers`): a rank's transport, closing at its exit, marks its word `FINISHED`
(`NodePeers.mark_finished`), as the ``shm`` transport's ranks mark theirs EXITED. A peer still
waiting for a message from it, or for its entry on a `board.Board`, then raises `PeerFailed`
naming it — or the rank its own failure followed from, which a rank that raised `PeerFailed`
notes in its word (`NodePeers.note_cause`), so every survivor names the first cause. A
finished rank in an MPI collective already started is not a failure: it left only once its
part was done.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

#: seconds between two checks of the pids while a rank is blocked in an MPI call
GUARD_INTERVAL = 0.2


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (dead, not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            state = stat.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc: kill's answer stands
    return state not in (b"Z", b"X")


def pids_on_node(world: Any, shared: Any) -> dict[int, int]:
    """World rank -> pid of every rank of ``shared`` (this node's ranks of ``world``) but this
    one (collective over ``shared``). Every rank of the node has then attached MPICH's
    shared memory, whose name is removed now (`unlink_mpich_segments`)."""
    mine = world.Get_rank()
    pairs = shared.allgather((mine, os.getpid()))
    unlink_mpich_segments()
    return {rank: pid for rank, pid in pairs if rank != mine}


#: the names MPICH gives the shared memory its ranks of one node attach at MPI_Init
MPICH_SEGMENT_PREFIX = "mpich_shm_"


def unlink_mpich_segments(maps: str = "/proc/self/maps") -> list[str]:
    """Remove the names of the MPICH segments under /dev/shm this process maps (once every
    rank of the node has attached them): MPICH removes them only in MPI_Finalize, so a rank
    killed by a signal would leave them behind; the memory stays mapped, and MPICH's
    finalize does not mind the name being gone. The names removed."""
    try:
        with open(maps) as lines:
            names = sorted({line.split("/dev/shm/", 1)[1].split()[0] for line in lines
                            if "/dev/shm/" + MPICH_SEGMENT_PREFIX in line
                            and not line.rstrip().endswith("(deleted)")})
    except OSError:
        return []
    removed = []
    for name in names:
        try:
            os.unlink(f"/dev/shm/{name}")
            removed.append(name)
        except OSError:  # another rank of the node removed it first
            pass
    return removed


#: a rank's word in its node's window: still running, or returned from its program
RUNNING, FINISHED = 0, 1
#: the state's bits of a word; above them, 1 + the rank its failure followed from (if any)
STATE, CAUSE_SHIFT = 0xFF, 8


def node_peers(MPI: Any, world: Any, shared: Any) -> NodePeers:
    """The `NodePeers` of this node (``shared``: its ranks of ``world``), with the window of
    their `FINISHED` words (collective over ``shared``)."""
    pids = pids_on_node(world, shared)
    here = shared.allgather(world.Get_rank())
    size, mine = shared.Get_size(), shared.Get_rank()
    window = MPI.Win.Allocate_shared(size * 8 if mine == 0 else 0, 8, comm=shared)
    buf, _ = window.Shared_query(0)
    words = memoryview(buf).cast("B").cast("Q")
    words[mine] = RUNNING
    shared.Barrier()  # every word cleared before any rank may finish
    return NodePeers(pids, words, {rank: i for i, rank in enumerate(here)}, window)


class NodePeers:
    """The other ranks of this node, their pids and (with ``words``) whether they finished."""

    def __init__(self, pids: dict[int, int], words: Any = None,
                 index: dict[int, int] | None = None, window: Any = None) -> None:
        self.pids = pids
        #: one word per rank of the node (`FINISHED` once it returned), by `index` of its rank
        self.words, self.index = words, index or {}
        self.window = window  # kept: the words live in it

    def mark_finished(self, rank: int) -> None:
        """Tell this node's ranks that ``rank`` (this one) returned from its program."""
        if self.words is not None and rank in self.index:
            at = self.index[rank]
            self.words[at] = self.words[at] & ~STATE | FINISHED  # its cause kept

    def note_cause(self, rank: int, failed: int) -> None:
        """Record that ``rank``'s (this one's) failure follows from rank ``failed``'s (the
        first such rank only), for the peers that see it finish to name ``failed``."""
        if self.words is not None and rank in self.index and failed != rank:
            at = self.index[rank]
            if not self.words[at] >> CAUSE_SHIFT:
                self.words[at] = (failed + 1) << CAUSE_SHIFT | self.words[at]

    def cause(self, rank: int) -> int | None:
        """The rank whose failure ``rank``'s followed from (`note_cause`), if it said."""
        if self.words is None or rank not in self.index:
            return None
        noted = int(self.words[self.index[rank]]) >> CAUSE_SHIFT
        return noted - 1 if noted else None

    def first_finished(self, ranks: Iterable[int]) -> int | None:
        """The lowest of ``ranks`` on this node that returned from its program, or None."""
        if self.words is None:
            return None
        words, index = self.words, self.index
        for rank in sorted(ranks):
            if rank in self.pids and words[index[rank]] & STATE == FINISHED:
                return rank
        return None

    def first_dead(self, ranks: Iterable[int] | None = None) -> int | None:
        """The lowest of ``ranks`` (default: all of this node's others) whose process is gone;
        None if all live (ranks on other nodes are not checked)."""
        wanted = sorted(self.pids if ranks is None else set(ranks) & self.pids.keys())
        for rank in wanted:
            if not alive(self.pids[rank]):
                return rank
        return None


class BlockingGuard:
    """While the ``with`` block runs a blocking MPI call, a thread checks this node's pids and,
    if one is gone, calls ``abort`` with why (`abort.abort_job`: stderr, then ``MPI_Abort``):
    a blocked call never returns when a peer died, so ending the job is the only way out."""

    def __init__(self, peers: NodePeers, rank: int, call: str, abort: Callable[[str], None],
                 interval: float = GUARD_INTERVAL) -> None:
        self.peers, self.rank, self.call = peers, rank, call
        self.abort, self.interval = abort, interval
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> BlockingGuard:
        if self.peers.pids:
            self._thread = threading.Thread(target=self._watch, daemon=True,
                                            name=f"collops-guard-{self.call}")
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(self.interval):
            dead = self.peers.first_dead()
            if dead is not None:
                self.abort(f"collops: MPI rank {dead} (pid {self.peers.pids[dead]}) died "
                           f"while rank {self.rank} was blocked in {self.call}; aborting the job")
                return
