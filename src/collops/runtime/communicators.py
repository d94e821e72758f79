"""Communicators that come and go: split, dup, idup, create, create_group, split_type, free.

A new communicator gets an id agreed among the ranks that make it (`context_ids` explains the
scheme and why it is safe for overlapping communicators and concurrent agreements), and
starts its calls at the members' floor. `free` is collective like ``MPI_Comm_free``: calls
still pending on the communicator complete first (MPI's rule), then the transport takes back
what the id held and the id returns to the rank's free set; afterwards any use of the object
raises `CommunicatorFreed` naming the call. A communicator that is dropped without `free`
keeps its id (Python's ``__del__`` must not run a collective), as an unfreed ``MPI_Comm``
does.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from ..errors import ArgumentError, CommunicatorFreed, CommunicatorLimit
from ..transport.tags import CALL_BITS, CONTEXT_LIMIT
from .abandon import giving_up
from .arguments import checked_int
from .context_ids import (
    BOOTSTRAP,
    MASK_WAIT,
    MASK_WORDS,
    ROUNDS_ALGORITHM,
    WHOLE_PHASES,
    WHOLE_ROUNDS,
    WINDOW_WORDS,
    WORLD,
    ContextIds,
    from_words,
    lowest,
    to_words,
)
from .engine import Execution
from .fastpaths import FastPaths
from .groups import CONGRUENT, IDENT, SIMILAR, UNDEFINED, UNEQUAL, Group
from .request import Request

if TYPE_CHECKING:
    from .comm import Comm

#: what a freed communicator still answers (everything else raises `CommunicatorFreed`)
_KEPT = frozenset({"name", "rank", "size", "context", "transport", "transport_name",
                   "freed", "__class__", "__dict__", "__exit__", "__enter__"})
_FREED_CLASSES: dict[type, type] = {}
#: `split_type` types: MPI_COMM_TYPE_SHARED's name (None: MPI_UNDEFINED)
SPLIT_TYPES = ("shared",)


class _Freed:
    """Mixed into a freed communicator's class: any call raises `CommunicatorFreed`."""

    def __getattribute__(self, name: str) -> Any:
        if name in _KEPT:
            return object.__getattribute__(self, name)
        raise CommunicatorFreed(name.lstrip("_"), object.__getattribute__(self, "name"),
                                object.__getattribute__(self, "rank"))


def _freed_class(cls: type) -> type:
    freed = _FREED_CLASSES.get(cls)
    if freed is None:
        freed = _FREED_CLASSES[cls] = type(f"Freed{cls.__name__}", (_Freed, cls), {})
    return freed


def _common_id(rows: list[tuple[int, int]]) -> int | None:
    """The lowest id in every ``(base, bits)`` row (bit i of bits: id base + i)."""
    common = -1
    for base, bits in rows:
        common &= bits << base
    return lowest(common) if rows else None


class Communicators(FastPaths):
    """Making, comparing and freeing communicators (mixed into `Comm`)."""

    freed = False
    #: (tag, job ranks) -> create_group calls made with them on this communicator
    _group_calls: dict[tuple[int, tuple[int, ...]], int] | None = None

    # -- the id agreement ----------------------------------------------------------------------
    def _agree(self, call: str, values: list[int], seq: int, timeout: float | None,
               phase: int = 0, cycle: int = WHOLE_PHASES
               ) -> Generator[Execution, None, tuple[np.ndarray, int, int]]:
        """Allgather ``values`` and agree on a free id: ``(table of values, id, first call
        number)`` — phase ``phase`` with the window, then rounds of whole masks if need be
        (`context_ids`), in the ``cycle`` phases after it in turn (1: one round only)."""
        ids = self._contexts
        base, held = ids.window()
        held <<= base
        n = len(values)
        key = (self.context, seq)
        whole = 0
        rounds = WHOLE_ROUNDS if cycle > 1 else 1
        try:
            table = yield from self._allgather_ints(
                call, [*values, ids.floor, base, *to_words(held >> base, WINDOW_WORDS)], seq,
                phase, timeout)
            start = int(table[:, n].max())
            context = _common_id([(int(r[n + 1]), from_words(r[n + 2:])) for r in table])
            ids.unlock(held)
            held = 0
            kept_waiting, round_ = False, 0
            while context is None and round_ < rounds:
                offered = ids.whole(key)
                whole = offered or 0
                masks = yield from self._allgather_ints(
                    f"{call} (whole id masks)", [int(offered is None),
                                                 *to_words(whole, MASK_WORDS)],
                    seq, phase + 1 + round_ % cycle, timeout, ROUNDS_ALGORITHM)
                ids.put_back(key, whole)
                whole = 0
                context = _common_id([(0, from_words(r[1:])) for r in masks])
                kept_waiting = bool(masks[:, 0].any())
                if context is None and kept_waiting:  # another round, once this rank's mask
                    round_ += 1                      # is free or a moment has passed
                    if offered is None:
                        yield _MaskFree(ids)  # type: ignore[misc]
                else:
                    break
            if context is None:
                others = ids.locked.bit_count()  # this agreement holds none of them now
                raise CommunicatorLimit(
                    f"{call} on {self.name}, rank {self.rank}: " + (
                        f"no communicator id agreed in {rounds} rounds: communicators being "
                        "made at the same time on other communicators held the ids each time"
                        if kept_waiting else
                        "no communicator id is free on every rank (a rank holds at most "
                        f"{CONTEXT_LIMIT - 2} communicators at once: free() the ones no longer "
                        f"used; this rank holds {ids.in_use - 2}"
                        + (f", and {others} are offered to communicators being made at the "
                           "same time" if others else "") + ")"))
        finally:  # what a failed phase left locked, and the rounds' place
            ids.unlock(held | whole)
            ids.leave(key)
        return table[:, :n], context, start

    def _made(self, group: list[int], context: int, start: int, name: str,
              begun: Any = None) -> Comm:
        """This rank's communicator ``context`` over ``group`` (job ranks), calls from
        ``start``; ``begun``: what the transport began for it at the call (`idup`), done."""
        from .comm import Comm
        self._contexts.take(context)
        made = getattr(self.transport, "communicator_made", None)
        if made is not None:  # MPI: the new communicator's own MPI ones (point-to-point, board)
            try:
                if begun is None:
                    made(tuple(group), context)
                else:
                    made(tuple(group), context, begun)
            except BaseException:
                self._contexts.release(context, start)  # the id is not used after all
                raise
        comm = Comm(self.transport, group, context, progress=self._progress,
                    contexts=self._contexts, timeout=self.timeout, name=name)
        comm._call_number[0] = start
        return comm

    def _split(self, call: str, color: int | None, key: int, seq: int, name: str,
               phase: int = 0, begun: Any = None) -> Generator[Execution, None, Comm | None]:
        """The phases of a split (see `split`) whose call number is ``seq``.

        The communicator-making calls on one communicator agree and make theirs one at a time,
        in the calls' order, whatever order they are waited in (an ``idup`` waited for after a
        later ``dup``): a transport may make each one's own resources by a blocking collective
        (MPI's ``MPI_Comm_create_group`` in `communicator_made`), which two ranks making them
        in other orders would deadlock; and agreements in flight at once on a rank lock ids the
        others then cannot offer, which left a later one with no id common to every rank (two
        ``idup``s and a ``dup``: `CommunicatorLimit`, a run in three).

        Calls on different communicators are not ordered that way: ``idup``s on two of them
        may end in different orders on different ranks. So an ``idup`` has the transport begin
        what it makes without blocking where the call is made, in its parent's call order
        (``begun``: the transport's ``communicator_begun``), and waits for it here, polled."""
        making = self._making
        making.append(seq)
        try:
            while making[0] != seq:
                yield _Turn(making, seq)  # type: ignore[misc]
            flag = 0 if color is None else 1
            table, context, start = yield from self._agree(
                call, [flag, 0 if color is None else color, key], seq,
                self._timeout(None, call), phase,
                # create_group's calls take two phases each (`create_group`): one round there
                WHOLE_PHASES if phase == 0 else 1)
            if color is None:
                return None
            members = [r for r in range(self.size) if table[r, 0] and table[r, 1] == color]
            members.sort(key=lambda r: (int(table[r, 2]), r))
            if begun is not None and not begun.poll():
                self._contexts.take(context)  # the id is this one's while MPI makes its own
                try:
                    yield begun
                except BaseException:
                    self._contexts.release(context, start)
                    raise
            return self._made([self._group[r] for r in members], context, start, name, begun)
        finally:
            making.remove(seq)

    # -- making communicators -------------------------------------------------------------------
    def split(self, color: int | None, key: int = 0) -> Comm | None:
        """Ranks with equal ``color`` form a new communicator, ordered by ``(key, rank)``.

        A rank passing ``color=None`` (or `UNDEFINED`) takes part but gets None back.
        """
        with giving_up(self):
            colour = None if color is None else checked_int("split", "color", color, self.rank)
            colour = None if colour == UNDEFINED else colour
            key = checked_int("split", "key", key, self.rank)
        seq = self._reserve()
        return Request(self, self._split("split", colour, key, seq,  # type: ignore[no-any-return]
                                         f"{self.name}.split({color})"), True).wait()

    def _inherit(self, new: Comm) -> Comm:
        """``new`` (a duplicate) with this communicator's algorithm settings."""
        new._overrides = dict(self._overrides)
        new._params = {k: dict(v) for k, v in self._params.items()}
        return new

    def dup(self) -> Comm:
        """The same group with its own message space (and this one's algorithm settings)."""
        seq = self._reserve()
        new = Request(self, self._split("dup", 0, self.rank, seq, f"{self.name}.dup"), True).wait()
        return self._inherit(new)

    def idup(self) -> Request:
        """`dup` without blocking: a `Request` whose value is the new communicator."""
        seq = self._reserve()
        begin = getattr(self.transport, "communicator_begun", None)
        begun = None if begin is None else begin(tuple(self._group), self.context)

        def phases() -> Generator[Execution, None, Comm]:
            try:
                new = yield from self._split("idup", 0, self.rank, seq, f"{self.name}.dup",
                                             begun=begun)
            except BaseException:
                if begun is not None:  # its wait ends here (what it made is left to MPI)
                    begun.forget()
                raise
            assert new is not None
            return self._inherit(new)

        return Request(self, phases())

    def create(self, group: Group) -> Comm | None:
        """A communicator over ``group`` (a subgroup of this one's; its order gives the ranks),
        collective over this communicator; None on ranks outside the group."""
        with giving_up(self):
            ranks = self._subgroup("create", group)
        me = self.transport.rank
        seq = self._reserve()
        color = 0 if me in ranks else None
        key = ranks.index(me) if me in ranks else 0
        return Request(self, self._split("create", color, key, seq,  # type: ignore[no-any-return]
                                         f"{self.name}.create"), True).wait()

    def create_group(self, group: Group, tag: int = 0) -> Comm | None:
        """A communicator over ``group`` (a subgroup of this one's), collective over the
        group's ranks only (the others need not call); None on a rank outside it. Concurrent
        calls over overlapping groups need different ``tag`` values (as in MPI)."""
        from .comm import Comm
        ranks = self._subgroup("create_group", group)
        tag = checked_int("create_group", "tag", tag, self.rank)
        if tag < 0:
            raise ArgumentError("create_group", "tag", tag, "must not be negative", self.rank)
        if self.transport.rank not in ranks:
            return None
        # the agreement runs among the members alone, on the id no communicator gets: its
        # call number names the parent and the tag (concurrent calls differ in one of them),
        # its phases the how-many-th call of these on the parent (consecutive ones differ;
        # the last phase is point-to-point's)
        if self._group_calls is None:
            self._group_calls = {}
        made = self._group_calls.get((tag, tuple(ranks)), 0)
        self._group_calls[(tag, tuple(ranks))] = made + 1
        among = Comm(self.transport, ranks, BOOTSTRAP, progress=self._progress,
                     contexts=self._contexts, timeout=self.timeout,
                     name=f"{self.name}.create_group")
        among._call_number[0] = ((self.context << 4) | (tag & 15)) % (1 << CALL_BITS)
        try:
            new = Request(among, among._split("create_group", 0, among.rank, among._reserve(),
                                              f"{self.name}.create_group",
                                              2 * (made % 3)), True).wait()
        finally:
            self.transport.release_comm(BOOTSTRAP, tuple(ranks), self._timeout(None, "free"))
        return new  # type: ignore[no-any-return]

    def split_type(self, split_type: str | int | None, key: int = 0) -> Comm | None:
        """Ranks that share memory (``"shared"``: the transport's node of each rank) form a
        communicator, ordered by ``(key, rank)``; ``None`` (or `UNDEFINED`) gives None."""
        if split_type == UNDEFINED:
            split_type = None
        with giving_up(self):
            if split_type is not None and split_type not in SPLIT_TYPES:
                raise ArgumentError("split_type", "split_type", split_type,
                                    f"must be one of {SPLIT_TYPES} or None", self.rank)
            key = checked_int("split_type", "key", key, self.rank)
        nodes = self.transport.capabilities().node_of_rank
        color = None if split_type is None else (
            int(nodes[self.transport.rank]) if nodes else 0)
        seq = self._reserve()
        return Request(self, self._split("split_type", color, key, seq,  # type: ignore[no-any-return]
                                         f"{self.name}.split_type({split_type})"), True).wait()

    @property
    def nodes_spanned(self) -> int:
        """How many of the transport's nodes this communicator's ranks are on (1 when the
        transport knows no nodes): the node is a level smaller than the communicator when
        this is more than 1."""
        nodes = self.transport.capabilities().node_of_rank
        return len({nodes[rank] for rank in self._group}) if nodes else 1

    # -- groups and comparison ------------------------------------------------------------------
    @property
    def group(self) -> Group:
        """This communicator's ranks, as a `Group`."""
        return Group(self._group, self.transport.rank)

    def _subgroup(self, call: str, group: Any) -> list[int]:
        """The job ranks of ``group``, checked to be ranks of this communicator."""
        if not isinstance(group, Group):
            raise ArgumentError(call, "group", type(group).__name__, "must be a Group",
                                self.rank)
        outside = sorted(set(group.ranks) - set(self._group))
        if outside:
            raise ArgumentError(call, "group", group, f"job ranks {outside} are not in "
                                f"{self.name}", self.rank)
        return list(group.ranks)

    def compare(self, other: Any) -> int:
        """`IDENT` (this very communicator), `CONGRUENT` (same ranks and order), `SIMILAR`
        (same ranks) or `UNEQUAL`."""
        if not isinstance(other, Communicators):
            raise ArgumentError("compare", "other", type(other).__name__,
                                "must be a communicator", self.rank)
        if other is self:
            return IDENT
        if other._group == self._group:
            return CONGRUENT
        return SIMILAR if set(other._group) == set(self._group) else UNEQUAL

    # -- freeing --------------------------------------------------------------------------------
    def free(self) -> None:
        """Free this communicator (collective over it, like ``MPI_Comm_free``): its pending
        calls complete first, then its id returns to the ranks' free sets; any later use of
        this object raises `CommunicatorFreed`."""
        if self.context == WORLD:
            raise ArgumentError("free", "comm", self.name, "the world communicator cannot be "
                                "freed", self.rank)
        for request in list(self._pending):
            request.settle()
        try:  # a mismatch the transport finds late is raised once the communicator is freed
            self.transport.release_comm(self.context, tuple(self._group),
                                        self._timeout(None, "free"))
        finally:
            self._contexts.release(self.context, int(self._call_number[0]))
            self._bound_calls.clear()
            self._cache.clear()
            self._pending.clear()
            self.freed = True
            self.__class__ = _freed_class(type(self))

    def __enter__(self) -> Self:
        """``with comm.dup() as c:`` — ``c`` is freed at the end of the block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Free the communicator, unless the block freed it already."""
        if not self.freed:
            self.free()


class _MaskFree:
    """An agreement whose rank offered no whole mask in its last round (another agreement
    held it) waiting, before its next round, until no agreement holds this rank's mask or
    `MASK_WAIT` seconds passed (a bound: agreements waiting on one another's masks across
    ranks must not wait for ever), polled like an execution."""

    __slots__ = ("ids", "deadline")

    def __init__(self, ids: ContextIds) -> None:
        self.ids = ids
        #: when the next round goes whatever the mask (the engine's wait wakes by then)
        self.deadline: float | None = time.monotonic() + MASK_WAIT

    def poll(self) -> bool:
        """Whether the next round may go."""
        assert self.deadline is not None
        return self.ids.holder is None or time.monotonic() >= self.deadline


class _Turn:
    """A communicator-making call waiting for the ones begun before it on the same
    communicator to make theirs (`Communicators._split`), polled like an execution."""

    __slots__ = ("making", "seq", "deadline")

    def __init__(self, making: list[int], seq: int) -> None:
        self.making, self.seq = making, seq
        self.deadline: float | None = None

    def poll(self) -> bool:
        """Whether this call is the first not yet done."""
        return self.making[0] == self.seq
