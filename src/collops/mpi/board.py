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

**A bcast whose data every rank knows goes in one phase.** The flag word of a bcast
envelope's entry may carry, from bit `KNOWN_SHIFT` up, the signature its rank knows the data
has (the root from its array, a reader from its ``out=``; `blocking.BlockingCall.run_known`).
Read once every entry is there, like the barrier's flag: all the same, and every rank
broadcasts the data itself; else every rank goes the envelope's two phases.

**A small bcast's root does not wait.** Its readers wait for its data anyway, so they wait
for every entry as before; but MPI's root returns as soon as its eager send is out, and
waiting for the readers' entries made the root's call as slow as the slowest reader. So root 0
of a bound bcast of at most `DEFER_MAX` bytes (the compiled route, untimed, nothing in
flight) posts its entry flagged `DEFERRED`, enters MPI at once and notes the call as pending
(`defer`); before it posts its next call on this board — or when the communicator is freed —
it checks that every reader posted the same call (`settle`). Why that is safe:

* MPICH's MPI_Bcast of a few hundred bytes returns at root 0 without any reader taking part
  (measured: 2-4 ranks, before and after its shared-memory collectives take over). Not at
  another root — MPICH then has the root hand its data to rank 0 and wait for it — nor once
  the message is large, which is why only root 0 and small messages defer, and no setting
  of MPICH's broadcast or eager protocol (``MPIR_CVAR_*BCAST*``, ``*EAGER*``) may be set.
* A reader never enters MPI on a mismatch: it waits for every entry as before. So the one
  thing a mismatch can leave behind is the root's broadcast, unmatched: an eager message in
  the reader's unexpected queue (or the root's data in MPICH's shared-memory buffer) on that
  MPI communicator. MPI keeps an unexpected message until a receive on its communicator
  matches it, and the next broadcast from root 0 on that communicator would match it — the
  stale data taken for the new call's, silently. So once a deferred call is found
  mismatched, nobody may call on the communicator again: every rank that sees a mismatch
  where some rank's entry is `DEFERRED` (the readers, at once) or `BROKEN` refuses every
  later call (`break_off`, `refuse`: `CommunicatorBroken`), the root raises the mismatch it
  finds late (`CollectiveMismatch` naming both calls) and posts its next call's entry as
  `BROKEN`, so a reader that saw only the other readers' entries (and raised without
  knowing of the deferral) refuses at that call instead of waiting for ever. A freed broken
  communicator's MPI communicators are kept, not freed, so MPI cannot give their context to
  a new communicator that would meet the stranded message.
* The root runs at most one call ahead: its next call waits for the readers' entries of the
  deferred one (they post every call before its data moves, so they are there unless a
  reader is behind), which keeps the ring's invariant.

The same holds, sides swapped, for a reduce of at most `DEFER_MAX` bytes with a built-in
operator on 2 ranks with root 0: rank 1 only sends (MPICH's MPI_Reduce returns there without
the root, measured), the root waits for every entry, as it waits for the data anyway. Not on
more ranks: a non-root inside MPI's reduction tree receives from its children.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..algorithms import fingerprint as fp
from ..errors import CollectiveMismatch, CommunicatorBroken

#: entries per rank (a rank is at most one call ahead of the others)
RING = 256
#: bit 0 of a key: the entry is a blocking call's (MPI's blocking and non-blocking collectives
#: never match each other)
BLOCKING = 1
#: bits of an entry's flag word: a barrier's rank sent messages since its last MPI barrier
FLUSH = 1
#: its rank entered MPI without waiting for the others' entries (a small bcast's root, a
#: small 2-rank reduce's non-root)
DEFERRED = 2
#: its rank refuses calls on this communicator (a mismatch a deferred call was part of)
BROKEN = 4
#: a bcast envelope's flag holds, from this bit up, the signature its rank knows the data has
#: (`blocking.BlockingCall.run_known`; 0: none)
KNOWN_SHIFT = 3
#: the bytes of a call that does not wait for the others' entries: MPICH's MPI_Bcast of
#: this size returns at root 0 without its readers (the bound envelope, 256), its 2-rank
#: MPI_Reduce at rank 1 without the root
DEFER_MAX = 256


def call_key(seq: int, phase: int, blocking: bool) -> int:
    """The non-zero key of phase ``phase`` of call ``seq`` (``blocking``: of a blocking call)."""
    return ((seq * 4 + phase + 1) << 1) | (BLOCKING if blocking else 0)


class Board:
    """One communicator's board over a shared window of ``size`` rows of `RING` entries."""

    __slots__ = ("window", "words", "rank", "size", "mine", "flags", "pending", "broken",
                 "serial")

    def __init__(self, MPI: Any, comm: Any, serial: int = 0) -> None:
        """Collective over ``comm``, whose ranks must all share this node; ``serial``: the
        same number on every rank (`NativeComms` reuses a freed communicator's board by
        it)."""
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.serial = serial
        nbytes = self.size * RING * 24  # entries (fingerprint, key), then a flag per entry
        self.window = MPI.Win.Allocate_shared(nbytes if self.rank == 0 else 0, 8, comm=comm)
        buf, _ = self.window.Shared_query(0)
        self.words = memoryview(buf).cast("B").cast("Q")
        self.mine = self.rank * RING * 2
        #: where the rows of flags start (rank r's flag of slot i: ``flags + r * RING + i``)
        self.flags = self.size * RING * 2
        #: this rank's own state, shared with the compiled runners: the key and fingerprint
        #: of its deferred call not yet checked (0: none), and whether it refuses calls
        self.pending = np.zeros(3, np.uint64)
        #: why this communicator refuses calls (None: it does not)
        self.broken: str | None = None
        self.reuse(comm)

    def reuse(self, comm: Any) -> Board:
        """Clear this rank's rows and state for a new communicator over the same ranks
        (collective over ``comm``: every row cleared before any rank posts)."""
        for i in range(self.mine, self.mine + RING * 2):
            self.words[i] = 0
        for i in range(self.flags + self.rank * RING, self.flags + (self.rank + 1) * RING):
            self.words[i] = 0
        self.pending[:] = 0
        self.broken = None
        comm.Barrier()
        return self

    @classmethod
    def for_comm(cls, MPI: Any, comm: Any, serial: int = 0) -> Board | None:
        """A board over ``comm`` when all its ranks share one node (collective), else None."""
        if comm.Get_size() < 2:
            return None
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
        try:
            if node.Get_size() != comm.Get_size():
                return None
            return cls(MPI, node, serial)
        finally:
            node.Free()

    def post(self, key: int, fingerprint: int, flag: int = 0) -> None:
        """Post this rank's entry for ``key`` (before it enters MPI), with its ``flag``."""
        at = self.mine + ((key >> 1) % RING) * 2
        words = self.words
        words[at + 1] = 0
        words[self.flags + self.rank * RING + (key >> 1) % RING] = flag
        words[at] = fingerprint
        words[at + 1] = key

    def row(self, rank: int) -> int:
        """The offset of ``rank``'s row (for `enter`)."""
        return rank * RING * 2

    def enter(self, key: int, fingerprint: int, rows: tuple[int, ...], spins: int = 0,
              flag: int = 0) -> bool:
        """`post` (with ``flag``), then whether the ranks of ``rows`` (`row`) have all posted
        this very entry, looking again up to ``spins`` times (False: not yet, or a mismatch —
        `compare` tells which)."""
        slot = ((key >> 1) % RING) * 2
        words, at = self.words, self.mine + slot
        words[at + 1] = 0
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
        return any(words[at + rank * RING] & FLUSH for rank in range(self.size))

    def same_signature(self, key: int, signature: int) -> bool:
        """Whether every rank's flag for ``key``'s call names ``signature`` (non-zero; call it
        once every rank's entry is there: they all read the same flags then)."""
        words, at = self.words, self.flags + (key >> 1) % RING
        return all(int(words[at + rank * RING]) >> KNOWN_SHIFT == signature
                   for rank in range(self.size))

    def flag_of(self, rank: int, key: int) -> int:
        """``rank``'s flag word for ``key``'s slot (read it once its entry is seen)."""
        return int(self.words[self.flags + rank * RING + (key >> 1) % RING])

    # -- deferred calls: they enter MPI without waiting for the others (see `docs/mpi.md`) --
    def defer(self, key: int, fingerprint: int) -> None:
        """Note that this rank entered MPI for ``key`` without waiting for the others."""
        self.pending[0], self.pending[1] = key, fingerprint

    def settle(self, ranks: Any, rank: int, at_call: str, key: int = 0) -> bool:
        """Check this rank's deferred call against the entries of ``ranks``: True once it is
        checked (or there is none), False while some entry is not there yet; a mismatch makes
        this communicator refuse calls, posts the call ``key`` that found it (``at_call``) as
        broken, so the others waiting there refuse too, and raises `CollectiveMismatch`."""
        deferred = int(self.pending[0])
        if not deferred:
            return True
        fingerprint, call = int(self.pending[1]), deferred >> 1
        words, slot = self.words, (call % RING) * 2
        for other in ranks:
            at = other * RING * 2 + slot
            theirs = words[at + 1]
            their_fp = words[at]
            if words[at + 1] != theirs or theirs >> 1 < call:
                return False  # being written, or not there yet
            if theirs != deferred or their_fp != fingerprint:
                message = (mismatch_message(rank, fingerprint, deferred, other, their_fp, theirs,
                                            "a call that did not wait checks the others' "
                                            "entries at the next call")
                           + f"; found at {at_call}, once MPI's call had sent its data")
                self.break_off(message)
                if key:
                    self.post(key, fp.GIVEN_UP, BROKEN)
                raise CollectiveMismatch(message)
        self.pending[0] = 0
        return True

    def break_off(self, why: str) -> None:
        """Refuse every later call on this communicator (`refuse`), because of ``why``."""
        if self.broken is None:
            self.broken = why
        self.pending[2] = 1

    def refuse(self, key: int, what: str) -> None:
        """If this communicator refuses calls: post ``key``'s entry as broken (the others
        waiting there refuse too) and raise `CommunicatorBroken`."""
        if self.broken is None:
            return
        self.post(key, fp.GIVEN_UP, BROKEN)
        raise CommunicatorBroken(
            f"rank {self.rank}: {what} refused: an earlier call's mismatch left a message of "
            f"MPI's collective unmatched on this communicator, which no call may meet "
            f"({self.broken})")

    def mismatched(self, mismatch: tuple[int, int, int], rank: int, key: int,
                   fingerprint: int, what: str) -> None:
        """Raise `CollectiveMismatch` for a mismatch `compare` found, first refusing later
        calls when any rank entered MPI for this call (a deferred or broken entry)."""
        call = key >> 1
        message = mismatch_message(rank, fingerprint, key, mismatch[0], mismatch[2],
                                   mismatch[1], what)
        at = (call % RING) * 2
        for other in range(self.size):
            if other != rank and self.words[other * RING * 2 + at + 1] >> 1 == call \
                    and self.flag_of(other, key) & (DEFERRED | BROKEN):
                self.break_off(message)
                if self.flag_of(other, key) & BROKEN:
                    raise CommunicatorBroken(
                        f"rank {rank}: {what.split(',')[0]} refused: rank {other} refuses "
                        f"calls on this communicator after an earlier mismatch")
                break
        raise CollectiveMismatch(message)

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


def may_defer() -> bool:
    """Whether a small bcast's root may skip the wait (no MPICH setting chooses its bcast or
    eager protocol: another algorithm might make the root wait for its readers)."""
    return not any(name.startswith("MPIR_CVAR_") and ("BCAST" in name or "EAGER" in name)
                   for name in os.environ)

