"""The agreement across nodes (`collops.mpi.spanning`), every rank in one process over a
stand-in for the MPI transport's messages: all ranks reach the same verdict whatever the
rank count and whichever ranks differ, and a rank that gives the call up ends it on all."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from collops.algorithms.fingerprint import fingerprint
from collops.errors import CollectiveMismatch
from collops.mpi import given_up
from collops.mpi.spanning import SpanningAgreement
from collops.transport.base import Handle
from collops.transport.tags import make_tag_base

SIZES = [2, 3, 4, 5, 7, 8]


class Wires:
    """Messages between ranks in one process, matched by (sender, receiver, tag)."""

    def __init__(self, size: int) -> None:
        self.sent: dict[tuple[int, int, int], tuple[bytes, int]] = {}
        self.ends = [End(self, r) for r in range(size)]


class End:
    """What `SpanningAgreement` uses of `MpiTransport`, for one rank."""

    def __init__(self, wires: Wires, rank: int) -> None:
        self.wires, self.rank = wires, rank
        self.posted: dict[tuple[int, int], tuple[Handle, memoryview]] = {}
        self._given_up: dict[tuple[int, int], tuple[int, str]] = {}
        self.gave_up: list[int] = []

    def isend(self, peer: int, tag: int, data: memoryview, fp: int = 0) -> Handle:
        self.wires.sent[(self.rank, peer, tag)] = (bytes(data), fp)
        h = Handle(peer, tag, data.nbytes)
        h.done = True
        return h

    def irecv(self, peer: int, tag: int, out: memoryview) -> Handle:
        h = Handle(peer, tag)
        self.posted[(peer, tag)] = (h, out)
        return h

    def progress(self) -> None:
        for (peer, tag), (h, out) in list(self.posted.items()):
            got = self.wires.sent.pop((peer, self.rank, tag), None)
            if got is not None:
                data, h.fingerprint = got
                h.nbytes = len(data)
                if len(data) == out.nbytes:
                    out[:] = data
                h.done = True
                del self.posted[(peer, tag)]

    def unexpected_for_call(self, value: int, shift: int) -> tuple[int, int] | None:
        return None

    def drop_receive(self, h: Handle) -> None:
        self.posted.pop((h.peer, h.tag), None)

    def give_up(self, tag_base: int, error: BaseException, fp: int | None = None) -> None:
        """As `MpiTransport.give_up`: every other rank gets a marker."""
        self.gave_up.append(tag_base)
        why = getattr(error, "gave_up", (self.rank, f"{type(error).__name__}: {error}"))
        for end in self.wires.ends:
            if end is not self:
                end._given_up[(self.rank, tag_base >> given_up.CALL_SHIFT)] = why


def _fp(count: int) -> int:
    return fingerprint("allreduce", "mpi_native", 0, np.dtype(np.float64), (count,), "sum")


def _run(size: int, fps: list[int], blocking: list[bool], absent: int | None = None
         ) -> list[BaseException | None]:
    """Every rank's outcome, polling all in turn; rank ``absent`` gives the call up at once."""
    wires = Wires(size)
    group = list(range(size))
    agreements: dict[int, SpanningAgreement] = {}
    if absent is not None:
        wires.ends[absent].give_up(make_tag_base(3, 7, 0), ValueError("only rank 1 sees this"))
    outcome: list[BaseException | None] = [None] * size
    for r in group:
        if r != absent:
            agreements[r] = SpanningAgreement(wires.ends[r], group, r, 3, 7, 0, fps[r],
                                              blocking[r], "allreduce[mpi_native]")
    left = set(agreements)
    for _ in range(100):
        for r in sorted(left):
            try:
                if agreements[r].poll():
                    left.discard(r)
            except CollectiveMismatch as exc:
                outcome[r] = exc
                left.discard(r)
        if not left:
            return outcome
    raise AssertionError(f"ranks {sorted(left)} never finished")


@pytest.mark.parametrize("size", SIZES)
def test_ranks_that_make_the_same_call_agree(size):
    assert _run(size, [_fp(4)] * size, [True] * size) == [None] * size


@pytest.mark.parametrize("size", SIZES)
def test_one_rank_with_another_call_makes_every_rank_raise(size):
    for odd in range(size):
        fps = [_fp(4)] * size
        fps[odd] = _fp(5)
        outcome = _run(size, fps, [True] * size)
        assert all(isinstance(o, CollectiveMismatch) for o in outcome), (odd, outcome)
        assert all("count: " in str(o) for o in outcome), outcome


@pytest.mark.parametrize("size", SIZES)
def test_a_call_blocking_on_one_rank_only_makes_every_rank_raise(size):
    for odd, first in itertools.product(range(size), (True, False)):
        blocking = [first] * size
        blocking[odd] = not first
        outcome = _run(size, [_fp(4)] * size, blocking)
        assert all("never match" in str(o) for o in outcome), (odd, outcome)


@pytest.mark.parametrize("size", SIZES)
def test_a_rank_that_gave_the_call_up_ends_it_on_every_rank(size):
    for absent in range(size):
        outcome = _run(size, [_fp(4)] * size, [True] * size, absent=absent)
        for r, o in enumerate(outcome):
            if r != absent:
                assert isinstance(o, CollectiveMismatch), (absent, r, outcome)
                assert f"rank {absent}" in str(o) and "only rank 1 sees this" in str(o), o
