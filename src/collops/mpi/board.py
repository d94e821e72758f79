"""The fingerprint board: where the ranks of one node post the call each ``mpi_native`` call
makes, so they agree on it through shared memory instead of an extra MPI collective.

MPI cannot tell mismatched calls apart, and what it does with them is worse than an error:
MPICH aborts the job on a count mismatch (a truncated message, whatever the error handler),
hangs on calls of different kinds and silently mixes the data of calls that differ only in
operator or dtype. So no rank may enter MPI's collective before it knows every rank makes the
same call. A communicator spanning nodes agrees through small messages first
(`spanning.SpanningAgreement`), at the cost of log2(p) message rounds. When all ranks of a
communicator share a node (as `MpiTransport.capabilities` has the nodes), each
instead posts ``(call key, fingerprint)`` into its row of an MPI-3 shared-memory window (a
ring of `RING` entries) and waits until every other rank has posted the same call there
(`Board.compare`): the cost of a shared-memory flag, and a `CollectiveMismatch` naming both
calls before any byte moves. A rank never runs more than one call ahead of the others this
way, so the ring never wraps onto an entry still being compared.

Each word is written by its rank only; the fingerprint is written before the key, and a
reader takes an entry only when the key it reads before and after the fingerprint is the
same, so a half-written entry is never taken for a mismatch.

**A barrier is its agreement.** Once a rank sees every rank's entry for a blocking barrier,
every rank has entered the barrier: that is all MPI_Barrier promises, so the board's
agreement is the barrier and MPI's is not called — with one exception. MPI_Barrier also
happens to flush the messages a rank sent before it: MPICH's shared-memory queues are
first-in first-out between two ranks, so a receiver that takes the barrier's message has
taken the messages sent ahead of it, and programs that send, then barrier, then look for
what arrived (the endpoints' remote puts, `tests/endpoints`) rely on that. A board-only
barrier would not move them (nothing calls MPI), so such a program saw nothing arrived. So
each barrier entry carries a flag, written before its key, in a row of flags beside the
entries (`flags`): set when its rank sent point-to-point messages over MPI since it last ran
MPI's barrier (`MpiTransport._sends` against the runner's mark). Every rank reads the same
flags once the call is agreed, so all make the same choice: MPI's barrier when any rank set
its flag, else none. The flag is decided once per call: a rank that posts its entry again
(the general route after the compiled one) keeps it, so no rank can read another value.
"""

from __future__ import annotations

from typing import Any

from ..algorithms import fingerprint as fp
from ..errors import CollectiveMismatch

#: entries per rank (a rank is at most one call ahead of the others)
RING = 256
#: bit 0 of a key: the entry is a blocking call's (MPI's blocking and non-blocking collectives
#: never match each other)
BLOCKING = 1


def call_key(seq: int, phase: int, blocking: bool) -> int:
    """The non-zero key of phase ``phase`` of call ``seq`` (``blocking``: of a blocking call)."""
    return ((seq * 4 + phase + 1) << 1) | (BLOCKING if blocking else 0)


class Board:
    """One communicator's board over a shared window of ``size`` rows of `RING` entries."""

    __slots__ = ("window", "words", "rank", "size", "mine", "flags")

    def __init__(self, MPI: Any, comm: Any) -> None:
        """Collective over ``comm``, whose ranks must all share this node."""
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        nbytes = self.size * RING * 24  # entries (fingerprint, key), then a flag per entry
        self.window = MPI.Win.Allocate_shared(nbytes if self.rank == 0 else 0, 8, comm=comm)
        buf, _ = self.window.Shared_query(0)
        self.words = memoryview(buf).cast("B").cast("Q")
        self.mine = self.rank * RING * 2
        #: where the rows of flags start (rank r's flag of slot i: ``flags + r * RING + i``)
        self.flags = self.size * RING * 2
        for i in range(self.mine, self.mine + RING * 2):
            self.words[i] = 0
        for i in range(self.flags + self.rank * RING, self.flags + (self.rank + 1) * RING):
            self.words[i] = 0
        comm.Barrier()  # every row cleared before any rank posts

    @classmethod
    def for_comm(cls, MPI: Any, comm: Any) -> Board | None:
        """A board over ``comm`` when all its ranks share one node (collective), else None."""
        if comm.Get_size() < 2:
            return None
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        try:
            if node.Get_size() != comm.Get_size():
                return None
            return cls(MPI, node)
        finally:
            node.Free()

    def post(self, key: int, fingerprint: int, flag: int | None = None) -> None:
        """Post this rank's entry for ``key`` (before it enters MPI), with its ``flag``
        (None: the flag stays as it is)."""
        at = self.mine + ((key >> 1) % RING) * 2
        words = self.words
        words[at + 1] = 0
        if flag is not None:
            words[self.flags + self.rank * RING + (key >> 1) % RING] = flag
        words[at] = fingerprint
        words[at + 1] = key

    def row(self, rank: int) -> int:
        """The offset of ``rank``'s row (for `enter`)."""
        return rank * RING * 2

    def enter(self, key: int, fingerprint: int, rows: tuple[int, ...], spins: int = 0,
              flag: int | None = None) -> bool:
        """`post` (with ``flag``), then whether the ranks of ``rows`` (`row`) have all posted
        this very entry, looking again up to ``spins`` times (False: not yet, or a mismatch —
        `compare` tells which)."""
        slot = ((key >> 1) % RING) * 2
        words, at = self.words, self.mine + slot
        words[at + 1] = 0
        if flag is not None:
            words[self.flags + self.rank * RING + slot // 2] = flag
        words[at] = fingerprint
        words[at + 1] = key
        while True:
            for row in rows:
                at = row + slot
                if words[at + 1] != key or words[at] != fingerprint or words[at + 1] != key:
                    break
            else:
                return True
            if spins <= 0:
                return False
            spins -= 1

    def compare(self, key: int, fingerprint: int, ranks: Any
                ) -> tuple[bool, tuple[int, int, int] | None]:
        """``(whether all of ranks posted key's call, the first mismatch)``; a mismatch is
        ``(rank, its key, its fingerprint)``: another call, or this one made blocking on one
        rank and non-blocking on the other."""
        words, slot, call = self.words, ((key >> 1) % RING) * 2, key >> 1
        posted = True
        for rank in ranks:
            at = rank * RING * 2 + slot
            theirs = words[at + 1]
            their_fp = words[at]
            if words[at + 1] != theirs or theirs >> 1 < call:
                posted = False  # being written, or not there yet
            elif theirs >> 1 == call and (theirs != key or their_fp != fingerprint):
                return False, (rank, theirs, their_fp)
        return posted, None

    def posted(self, key: int) -> bool:
        """Whether this rank posted ``key``'s entry already."""
        return self.words[self.mine + ((key >> 1) % RING) * 2 + 1] == key

    def flagged(self, key: int) -> bool:
        """Whether any rank's flag for ``key``'s call is set (call it once every rank's
        entry is there: they all read the same flags then)."""
        words, at = self.words, self.flags + (key >> 1) % RING
        return any(words[at + rank * RING] for rank in range(self.size))

    def give_up(self, key: int) -> bool:
        """Post `fingerprint.GIVEN_UP` for ``key``'s call unless this rank posted it already
        (its peers waiting there then raise `CollectiveMismatch`); whether it did."""
        at = self.mine + ((key >> 1) % RING) * 2
        if self.words[at + 1] >> 1 >= key >> 1:
            return False
        self.post(key, fp.GIVEN_UP)
        return True

    def not_posted(self, key: int, ranks: Any) -> list[int]:
        """Those of ``ranks`` whose entry for ``key``'s call is not on the board yet."""
        words, slot, call = self.words, ((key >> 1) % RING) * 2, key >> 1
        return [rank for rank in ranks if words[rank * RING * 2 + slot + 1] >> 1 < call]


def mismatch_message(rank: int, mine: int, my_key: int, other: int, theirs: int,
                     their_key: int, what: str) -> str:
    """What a rank says when ``other``'s call at this point is not its own."""
    if their_key >> 1 == my_key >> 1 and theirs == mine:
        how = "blocking" if my_key & BLOCKING else "non-blocking"
        other_how = "blocking" if their_key & BLOCKING else "non-blocking"
        return (f"rank {rank}: made call #{(my_key >> 1) // 4} ({fp.describe(mine)}) {how} "
                f"but rank {other} made it {other_how}: MPI's blocking and non-blocking "
                f"collectives never match each other ({what})")
    return f"rank {rank}: {fp.mismatch(mine, theirs, f'rank {other}')} ({what})"


def raise_mismatch(mismatch: tuple[int, int, int], rank: int, key: int, fingerprint: int,
                   what: str) -> None:
    """Raise `CollectiveMismatch` for a mismatch `Board.compare` found."""
    other, their_key, theirs = mismatch
    raise CollectiveMismatch(mismatch_message(rank, fingerprint, key, other, theirs, their_key,
                                              what))
