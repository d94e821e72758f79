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
agreement takes it (a call's agreement may start long after later calls' agreements: it waits
for the earlier call sharing its MPI communicator). The messages of a call whose agreement
this rank gave up, which nobody will take, are dropped; what no agreement here ever takes (a
call given up before its agreement started) is dropped, oldest first, once a round holds
`STASH_LIMIT` messages. A rank that gives a call up tells its peers with the transport's
markers (`given_up`); a peer that runs the call without an agreement (a schedule, its
arguments differing) learns of the agreement's messages from `MpiTransport.check_peers`,
which looks here for the calls its receives wait for (`seen`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: words of a message: call key, the sender's own fingerprint, then the maxima folded so far
#: of the fingerprint, its complement, the blocking flag and its complement
WORDS = 6
#: sends kept before the finished ones are let go
_SENDS_KEPT = 16
#: messages a round's stash holds before the oldest are dropped; calls given up remembered
STASH_LIMIT = 1024


class Channel:
    """The agreement messages of one collops communicator, over the MPI communicator
    ``comm`` (whose ranks are the collops communicator's, in order)."""

    __slots__ = ("comm", "rank", "size", "rounds", "inbox", "receives", "stash", "sends",
                 "abandoned")

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.rounds = max(1, (self.size - 1).bit_length())
        self.inbox = [np.zeros(WORDS, np.uint64) for _ in range(self.rounds)]
        self.receives: list[Any] = [None] * self.rounds
        #: per round, the messages taken off MPI that no agreement has taken yet
        self.stash: list[list[list[int]]] = [[] for _ in range(self.rounds)]
        self.sends: list[tuple[Any, np.ndarray]] = []
        #: ``key >> 1`` of the calls whose agreement this rank gave up
        self.abandoned: set[int] = set()

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
        """Call ``call``'s (``key >> 1``) message of round ``round_``, if it is in."""
        self.pump(round_)
        stash = self.stash[round_]
        if not stash:
            return None
        if stash[0][0] >> 1 == call:
            return stash.pop(0)
        for i, words in enumerate(stash):
            if words[0] >> 1 == call:
                del stash[i]
                return words
        if self.abandoned:
            stash[:] = [words for words in stash if words[0] >> 1 not in self.abandoned]
        if len(stash) > STASH_LIMIT:
            stash.sort(key=lambda words: words[0] >> 1)
            del stash[: len(stash) - STASH_LIMIT // 2]
        return None

    def abandon(self, call: int) -> None:
        """This rank gave up call ``call``'s (``key >> 1``) agreement: drop its messages."""
        abandoned = self.abandoned
        abandoned.add(call)
        if len(abandoned) > STASH_LIMIT:
            for old in sorted(abandoned)[: STASH_LIMIT // 2]:
                abandoned.discard(old)
        for stash in self.stash:
            stash[:] = [words for words in stash if words[0] >> 1 != call]

    def seen(self, call: int, phase: int, call_bits: int) -> int | None:
        """The sender's fingerprint of a message (any round) of phase ``phase`` of the call
        whose number is ``call`` modulo ``2**call_bits`` (as a tag holds it), if one is in."""
        for round_ in range(self.rounds):
            self.pump(round_)
            for words in self.stash[round_]:
                number, their_phase = divmod((words[0] >> 1) - 1, 4)  # as `call_key`
                if number & ((1 << call_bits) - 1) == call and their_phase == phase:
                    return words[1]
        return None

    def close(self) -> None:
        """Cancel the standing receives (before the communicator is freed or MPI ends)."""
        for request in self.receives:
            if request is not None:
                try:
                    request.Cancel()
                    request.Wait()
                except Exception:  # noqa: BLE001 - MPI's error at the end changes nothing
                    pass
        self.receives = [None] * self.rounds

