"""The MPI point-to-point channel of the agreement across nodes (`spanning.SpanningAgreement`).

Each collops communicator whose ranks span nodes gets one more MPI communicator, made with
its pool (`MpiTransport.collective_comm`), on which its ``mpi_native`` calls' agreements send
their words with MPI's own non-blocking point-to-point: round ``k`` of the dissemination is
MPI tag ``k``, from rank ``r`` to rank ``r + 2**k``, a message of `WORDS` 64-bit words from a
preallocated buffer, and each round has one standing receive (``MPI_Irecv`` into a buffer of
the channel, reposted once taken) that the agreements poll with ``MPI_Test``. Nothing of
collops' own message layer (headers, matching tables) lies on this path.

A message names its call (the call key, `board.call_key`), so calls need not take their
messages in order: what arrives for another call waits in the round's stash until that call's
agreement takes it, and a message of a call older than every agreement still running on this
rank (a call given up, whose messages nobody will take) is dropped. A rank that gives a call
up tells its peers with the transport's markers (`given_up`), as before; a peer that runs the
call without an agreement (a schedule, its arguments differing) learns of the agreement's
messages from `MpiTransport.check_peers`, which looks here for the calls its receives wait for
(`seen`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: words of a message: call key, the sender's own fingerprint, then the maxima folded so far
#: of the fingerprint, its complement, the blocking flag and its complement
WORDS = 6
#: sends kept before the finished ones are let go
_SENDS_KEPT = 16


class Channel:
    """The agreement messages of one collops communicator, over the MPI communicator
    ``comm`` (whose ranks are the collops communicator's, in order)."""

    __slots__ = ("comm", "rank", "size", "rounds", "inbox", "receives", "stash", "sends",
                 "active")

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.rounds = max(1, (self.size - 1).bit_length())
        self.inbox = [np.zeros(WORDS, np.uint64) for _ in range(self.rounds)]
        self.receives: list[Any] = [None] * self.rounds
        #: per round, the messages taken off MPI that no agreement has taken yet
        self.stash: list[list[list[int]]] = [[] for _ in range(self.rounds)]
        self.sends: list[tuple[Any, np.ndarray]] = []
        #: ``key >> 1`` of the agreements running on this rank
        self.active: set[int] = set()

    def source(self, round_: int) -> int:
        """The rank whose message of round ``round_`` this rank receives."""
        return (self.rank - (1 << round_)) % self.size

    def send(self, round_: int, words: list[int]) -> None:
        """Send round ``round_``'s message (``words``) to the rank ``2**round_`` on."""
        buffer = np.array(words, np.uint64)
        sends = self.sends
        sends.append((self.comm.Isend(buffer, (self.rank + (1 << round_)) % self.size,
                                      round_), buffer))
        if len(sends) > _SENDS_KEPT:
            self.sends = [(r, b) for r, b in sends if not r.Test()]

    def pump(self, round_: int) -> bool:
        """Move what MPI has for round ``round_`` into its stash; whether anything came."""
        got = False
        inbox, receives = self.inbox[round_], self.receives
        while True:
            request = receives[round_]
            if request is None:
                request = receives[round_] = self.comm.Irecv(inbox, self.source(round_),
                                                             round_)
            if not request.Test():
                return got
            receives[round_] = None
            self.stash[round_].append(inbox.tolist())
            got = True

    def take(self, round_: int, call: int) -> list[int] | None:
        """Call ``call``'s (``key >> 1``) message of round ``round_``, if it is in; the
        messages of calls older than every agreement running here are dropped."""
        self.pump(round_)
        stash = self.stash[round_]
        if not stash:
            return None
        if len(stash) == 1 and stash[0][0] >> 1 == call:
            return stash.pop()
        oldest = min(self.active, default=call)
        found = None
        kept = []
        for words in stash:
            if found is None and words[0] >> 1 == call:
                found = words
            elif words[0] >> 1 >= oldest:
                kept.append(words)
        stash[:] = kept
        return found

    def seen(self, call: int, phase: int, call_bits: int) -> int | None:
        """The sender's fingerprint of a message (any round) of phase ``phase`` of the call
        whose number is ``call`` modulo ``2**call_bits`` (as a tag holds it), if one is in."""
        for round_ in range(self.rounds):
            self.pump(round_)
            for words in self.stash[round_]:
                number, their_phase = divmod((words[0] >> 1) - 1, 4)
                if number & ((1 << call_bits) - 1) == call and their_phase == phase:
                    return words[1]
        return None

    def close(self) -> None:
        """Cancel the standing receives (before the communicator is freed or MPI ends)."""
        for request in self.receives:
            if request is not None:
                request.Cancel()
                request.Wait()
        self.receives = [None] * self.rounds
