"""The agreement across nodes (`collops.mpi.spanning`), every rank in one process over a
stand-in for the MPI transport's messages: all ranks reach the same verdict whatever the
rank count and whichever ranks differ, and a rank that gives the call up ends it on all."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import pytest

from collops.algorithms.fingerprint import fingerprint
from collops.errors import CollectiveMismatch
from collops.mpi import given_up
from collops.mpi.channel import Channel
from collops.mpi.spanning import SpanningAgreement
from collops.transport.tags import make_tag_base

SIZES = [2, 3, 4, 5, 7, 8]


class Wires:
    """Messages between ranks in one process: MPI point-to-point in order per (sender,
    receiver, tag), and the transport's give-up markers."""

    def __init__(self, size: int) -> None:
        self.queues: dict[tuple[int, int, int], list[np.ndarray]] = defaultdict(list)
        self.ends = [End(self, r, size) for r in range(size)]


class Request:
    """An MPI request of `Comm`: a send done at once, or a receive that `Test` completes."""

    def __init__(self, test: Callable[[], bool]) -> None:
        self.Test = test

    def Cancel(self) -> None:  # noqa: N802 - mpi4py's name
        self.Test = lambda: True

    def Wait(self) -> None:  # noqa: N802 - mpi4py's name
        pass


class Comm:
    """What `Channel` uses of an mpi4py communicator, for one rank."""

    def __init__(self, wires: Wires, rank: int, size: int) -> None:
        self.wires, self.rank, self.size = wires, rank, size

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return self.rank

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return self.size

    def Isend(self, buf: np.ndarray, dest: int, tag: int) -> Request:  # noqa: N802
        self.wires.queues[(self.rank, dest, tag)].append(buf.copy())
        return Request(lambda: True)

    def Irecv(self, buf: np.ndarray, source: int, tag: int) -> Request:  # noqa: N802
        queue = self.wires.queues[(source, self.rank, tag)]

        def test() -> bool:
            if not queue:
                return False
            buf[:] = queue.pop(0)
            return True
        return Request(test)


class End:
    """What `SpanningAgreement` uses of `MpiTransport`, for one rank."""

    def __init__(self, wires: Wires, rank: int, size: int) -> None:
        self.wires, self.rank = wires, rank
        self.channel = Channel(Comm(wires, rank, size))
        self._given_up: dict[tuple[int, int], tuple[int, str]] = {}
        self._unexpected: dict[tuple[int, int], object] = {}
        self._wakers: list[object] = []
        self.gave_up: list[int] = []

    def agreement_channel(self, group: tuple[int, ...], context: int) -> Channel:
        return self.channel

    def progress(self) -> None:
        pass

    def give_up(self, tag_base: int, error: BaseException, fp: int | None = None) -> None:
        """As `MpiTransport.give_up`: every other rank gets a marker."""
        self.gave_up.append(tag_base)
        why = getattr(error, "gave_up", (self.rank, f"{type(error).__name__}: {error}"))
        for end in self.wires.ends:
            if end is not self:
                end._given_up[(self.rank, tag_base >> given_up.CALL_SHIFT)] = why


def _fp(count: int) -> int:
    return fingerprint("allreduce", "mpi_native", 0, np.dtype(np.float64), (count,), "sum")


def _run(size: int, fps: list[int], blocking: list[bool], absent: int | None = None,
         wires: Wires | None = None, seq: int = 7) -> list[BaseException | None]:
    """Every rank's outcome of call ``seq``, polling all in turn; rank ``absent`` gives the
    call up at once."""
    wires = wires or Wires(size)
    group = list(range(size))
    agreements: dict[int, SpanningAgreement] = {}
    if absent is not None:
        wires.ends[absent].give_up(make_tag_base(3, seq, 0),
                                   ValueError("only rank 1 sees this"))
    outcome: list[BaseException | None] = [None] * size
    for r in group:
        if r != absent:
            agreements[r] = SpanningAgreement(wires.ends[r], group, r, 3, seq, 0, fps[r],
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


@pytest.mark.parametrize("size", SIZES)
def test_the_calls_after_a_mismatch_agree_and_its_leftovers_are_dropped(size):
    """Words of a call every rank left (a mismatch) stay on the wires; the later calls take
    only their own and drop those."""
    wires = Wires(size)
    fps = [_fp(4)] * size
    fps[size - 1] = _fp(5)
    assert all(o is not None for o in _run(size, fps, [True] * size, wires=wires))
    for seq in (8, 20):
        assert _run(size, [_fp(4)] * size, [True] * size, wires=wires, seq=seq) == [None] * size
    for end in wires.ends:
        assert all(((words[0] >> 1) - 1) // 4 > 7
                   for stash in end.channel.stash for words in stash)
        assert not end._wakers


@pytest.mark.parametrize("size", SIZES)
def test_an_agreement_that_starts_after_a_later_calls_keeps_its_words(size):
    """A call's agreement may start after a later call's (it waits for an earlier call on
    its MPI communicator): the words that came for it meanwhile are kept for it."""
    wires = Wires(size)
    group = list(range(size))
    agreements = {}
    for r in group:
        for seq in ((7, 10) if r % 2 == 0 else (10,)):
            agreements[(r, seq)] = SpanningAgreement(
                wires.ends[r], group, r, 3, seq, 0, _fp(seq), False, "allreduce[mpi_native]")
    for _ in range(3):
        for key in sorted(agreements):
            agreements[key].poll()
    for r in group[1::2]:
        agreements[(r, 7)] = SpanningAgreement(wires.ends[r], group, r, 3, 7, 0, _fp(7),
                                               False, "allreduce[mpi_native]")
    left = set(agreements)
    for _ in range(100):
        for key in sorted(left):
            if agreements[key].poll():
                left.discard(key)
    assert not left


@pytest.mark.parametrize("size", SIZES)
def test_calls_in_flight_take_their_own_words_in_any_order(size):
    """Two calls agreeing at once on every rank (non-blocking calls in flight), polled in
    the opposite order of their start on odd ranks: each takes its own words."""
    wires = Wires(size)
    group = list(range(size))
    agreements = {(r, seq): SpanningAgreement(wires.ends[r], group, r, 3, seq, 0, _fp(seq),
                                              False, "allreduce[mpi_native]")
                  for r in group for seq in (7, 8)}
    left = set(agreements)
    for _ in range(100):
        for r, seq in sorted(left, key=lambda k: (k[0], -k[1] if k[0] % 2 else k[1])):
            if agreements[(r, seq)].poll():
                left.discard((r, seq))
    assert not left
