"""What one rank of a direct call takes from the members' slots once they hold the call: the
`ReadPlan` both the Python reader (`make_reader`) and the compiled runner
(`direct._compiled_runner`) are built from, and the Python reader itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..algorithms.spec import CallSpec
from . import direct_roles as roles
from . import direct_vector as vector
from .direct_area import DirectArea
from .segment import DIRECT_SLOTS

#: ``read(slot, send, recv)``: one signature's reads of the slots
Reader = Callable[[int, Any, Any], None]


@dataclass(frozen=True)
class ReadPlan:
    """What one rank takes from the members' slots once they hold a call: the one
    description both the Python reader (`make_reader`) and the compiled runner are built from.

    ``kind``: "none"; "copy" (``count`` items — ``lengths[i]`` for member i where given — at
    byte ``offset`` of each member's slot into ``recv`` at item ``dst[i]``); "self"
    (``count`` items of ``send`` from item ``self_from`` into ``recv``, unless they are one
    buffer); "reduce" (the members' ``count`` items at
    byte ``offset`` folded in the order of ``members`` into ``recv``).
    """

    kind: str
    members: tuple[int, ...] = ()
    offset: int = 0
    dst: tuple[int, ...] = ()
    count: int = 0
    self_from: int = 0
    lengths: tuple[int, ...] = ()

    def piece_lengths(self) -> tuple[int, ...]:
        """Items copied from each member's slot (a "copy")."""
        return self.lengths or (self.count,) * len(self.dst)


def read_plan(spec: CallSpec, rank: int) -> ReadPlan:
    """The `ReadPlan` of ``rank`` in a direct call of ``spec``."""
    c, n, p = spec.collective, spec.count, spec.size
    block = rank * n * spec.itemsize  # this rank's block in a whole-buffer contribution
    awaits = roles.awaits(spec, rank)
    if c in vector.REGULAR:
        return vector.read_plan(spec, rank, awaits, ReadPlan)  # type: ignore[no-any-return]
    if c == "barrier" or (not awaits and c not in ("bcast", "scatter")):
        return ReadPlan("none")
    if c in REDUCING_DIRECT:
        return ReadPlan("reduce", tuple(awaits), block if c == "reduce_scatter_block" else 0,
                        count=n)
    if c in ("allgather", "gather", "alltoall"):
        return ReadPlan("copy", tuple(range(p)), block if c == "alltoall" else 0,
                        tuple(j * n for j in range(p)), n)
    if rank == spec.root:  # bcast: the root has its data; scatter: its own block
        return ReadPlan("self", count=n, self_from=rank * n if c == "scatter" else 0)
    return ReadPlan("copy", (spec.root,), block if c == "scatter" else 0, (0,), n)


def make_reader(area: DirectArea, spec: CallSpec, rank: int) -> Reader:
    """``read(slot, send, recv)``: `read_plan` carried out on views of the slots (flat, typed
    ``recv``; folds by `Op.combine_into`), every view prepared here."""
    plan, dt, slots = read_plan(spec, rank), spec.dtype, range(DIRECT_SLOTS)
    n = plan.count
    lengths = plan.piece_lengths() if plan.kind == "copy" else (n,) * len(plan.members)
    views = [[area.view(j, i, dt, m, plan.offset) for j, m in zip(plan.members, lengths,
                                                                   strict=True)]
             for i in slots]
    if plan.kind == "none":
        return _nothing
    if plan.kind == "reduce":
        assert spec.op is not None
        combine = spec.op.combine_into

        def reduce_all(slot: int, send: Any, recv: Any) -> None:
            vs = views[slot]
            if len(vs) == 1:
                recv[...] = vs[0]
                return
            combine(recv, vs[0], vs[1])
            for v in vs[2:]:
                combine(recv, recv, v)
        return reduce_all
    if plan.kind == "copy":
        places = [slice(d, d + m) for d, m in zip(plan.dst, lengths, strict=True)]

        def copy(slot: int, send: Any, recv: Any) -> None:
            for place, v in zip(places, views[slot], strict=True):
                recv[place] = v
        return copy
    own = slice(plan.self_from, plan.self_from + n)

    def own_part(slot: int, send: Any, recv: Any) -> None:
        if recv is not None and send is not None and recv is not send:
            recv[:n] = send.reshape(-1)[own]
    return own_part


def _nothing(slot: int, send: Any, recv: Any) -> None:
    return None


REDUCING_DIRECT = frozenset({"reduce", "allreduce", "reduce_scatter_block", "scan", "exscan"})
