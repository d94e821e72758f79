"""``hier``: hierarchical collectives over MPI — node-local phases plus an inter-node phase
among node leaders, as Open MPI's ``han`` and MPICH's node-aware collectives do.

allreduce = reduce to each node's leader, allreduce among the leaders, bcast from each leader;
reduce = reduce to each node's leader, reduce among the leaders to the root's node, then to the
root; bcast = bcast within the root's node, among the leaders, within the other nodes;
allgather = gather to each node's leader, allgatherv among the leaders, bcast within each node;
barrier = barrier within each node, among the leaders, within each node again.

The node of each rank is the transport's (`Capabilities.node_of_rank`: MPI's
``COMM_TYPE_SHARED`` split, or ``COLLOPS_RANKS_PER_NODE`` to split one machine's ranks into
"nodes" for tests). The node-local phases run as MPI's own collectives on sub-communicators
of the call's MPI communicator — one per node, one among the leaders, duplicated from the ones
the communicator gets where it is made by its first ``hier`` call, without blocking
(`MpiTransport.hier_comms`); within one node the call's own — rather than through an
MPI-3 shared-memory window: MPI's node-local collectives already move the bytes through shared
memory (MPICH's POSIX collectives), with no copy into a window and no Python-level
synchronisation, and the same code runs when ``COLLOPS_RANKS_PER_NODE`` splits one machine.

Everything else is ``mpi_native``'s: the agreement on the call before MPI moves a byte, blocking
calls on MPI's blocking collectives (`blocking`), non-blocking ones as a chain of MPI's
non-blocking collectives driven by the progress engine (`native.NativeExecution`), the slots
that keep the start order of every MPI communicator the same on every rank.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..algorithms.native import NativeAlgorithm, NativeCall
from ..algorithms.registry import Algorithm, CostModel, add_algorithm, algorithms
from ..algorithms.spec import CallSpec
from ..errors import ScheduleError
from ..schedule import Schedule
from .native import CHECK, Flavour, Operation, cached_operation, mpi_reduction, start

NAME = "hier"
COLLECTIVES = ("allreduce", "bcast", "reduce", "allgather", "barrier")
#: a step of a non-blocking call: starts an MPI operation (its request) or does a local one
Step = Callable[[], Any]


def operation_for(MPI: Any, call: NativeCall, blocking: bool) -> Operation:
    """`hier_operation` for ``call`` on its communicator's nodes."""
    transport = call.transport
    nodes = transport.capabilities().node_of_rank
    layout = Layout(tuple(nodes[g] for g in call.group), call.rank)
    op = call.spec.op
    if op is not None and not op.commutative and not layout.contiguous:
        # phases node by node would change the operands' order: MPI's own over all ranks
        return cached_operation(MPI, call.spec, call.rank, blocking)
    return hier_operation(MPI, call.spec, layout,
                          lambda mc: transport.hier_comms(call.group, call.context, mc,
                                                          layout.mine, layout.leader, blocking),
                          blocking)


def comms_ready(call: NativeCall, mc: Any) -> bool:
    """Whether ``hier``'s node and leader communicators under ``mc`` are made (begun by the
    first call that asks: `MpiTransport.hier_comms`)."""
    nodes = call.transport.capabilities().node_of_rank
    layout = Layout(tuple(nodes[g] for g in call.group), call.rank)
    return call.transport.hier_comms(call.group, call.context, mc, layout.mine,
                                     layout.leader) is not None


HIER = Flavour(NAME, operation_for, comms_ready)


def register() -> None:
    """Add a ``hier`` record to each collective it runs."""
    from .blocking import bind
    native = NativeAlgorithm(functools.partial(start, flavour=HIER),
                             functools.partial(bind, flavour=HIER), blocking_only=True)
    for c in COLLECTIVES:
        add_algorithm(Algorithm(
            c, NAME, f"node-local phases and one among node leaders, with MPI's own {c}",
            _no_schedule, params=(CHECK,), cost=hier_cost, needs=frozenset({"mpi"}), native=native,
            transports=("mpi",), in_place=c == "allreduce", agrees_on_root=True))


def _no_schedule(rank: int, spec: CallSpec, params: Any) -> Schedule:
    raise ScheduleError(f"{spec.collective}[{NAME}] runs MPI's own collectives in phases over "
                        "the nodes: it is not a schedule")


def hier_cost(spec: CallSpec, model: CostModel) -> float:
    """The cheapest schedule's α-β estimate: selection takes ``hier`` only when asked to (or
    by a rule), as its gain depends on the machine's nodes, which the model does not see."""
    return min((a.estimate(spec, model) for a in algorithms(spec.collective)
                if not a.needs and a.eligible(spec)), default=float("inf"))


class Layout:
    """Where the ranks of a communicator sit: node of each rank (numbered from 0 in order of
    the nodes' lowest ranks), each node's ranks, and one rank's node and place in it."""

    def __init__(self, node_of_member: tuple[int, ...], rank: int) -> None:
        number: dict[int, int] = {}
        for n in node_of_member:
            number.setdefault(n, len(number))
        self.node = tuple(number[n] for n in node_of_member)
        self.members = [[r for r, n in enumerate(self.node) if n == k] for k in range(len(number))]
        self.mine = self.node[rank]
        self.local = self.members[self.mine].index(rank)
        self.leader = self.local == 0
        #: the ranks in the order the leaders' allgather leaves their blocks (node by node)
        self.order = [r for ranks in self.members for r in ranks]
        self.contiguous = self.order == list(range(len(self.node)))


def hier_operation(MPI: Any, spec: CallSpec, layout: Layout, comms: Callable[[Any], Any],
                   blocking: bool) -> Callable[[Any, Any, Any], Any]:
    """``operation(mc, send, recv)`` of `native.mpi_operation`'s kind for ``hier``: blocking,
    it runs the phases; else it returns the list of `Step` s that start them one by one.
    ``comms(mc)`` gives the node's and the leaders' communicators (None off the leaders)."""
    build = {"allreduce": _allreduce, "reduce": _reduce, "bcast": _bcast,
             "allgather": _allgather, "barrier": _barrier}[spec.collective]

    def operation(mc: Any, send: Any, recv: Any) -> Any:
        node, leaders = comms(mc)
        steps = build(MPI, spec, layout, node, leaders, send, recv, blocking)
        if not blocking:
            return steps
        for step in steps:
            step()
        return None
    return operation


def _call(comm: Any, name: str, blocking: bool) -> Any:
    return getattr(comm, name if blocking else "I" + name.lower())


def _allreduce(MPI: Any, spec: CallSpec, layout: Layout, node: Any, leaders: Any, s: Any,
               r: Any, blocking: bool) -> list[Step]:
    assert spec.op is not None
    t, op = mpi_reduction(MPI, spec.op, spec.dtype)
    n = spec.count
    mine = r if s is MPI.IN_PLACE and not layout.leader else s
    steps: list[Step] = [lambda: _call(node, "Reduce", blocking)(
        mine if mine is MPI.IN_PLACE else [mine, n, t],
        [r, n, t] if layout.leader else None, op, 0)]
    if leaders is not None and leaders.Get_size() > 1:
        steps.append(lambda: _call(leaders, "Allreduce", blocking)(MPI.IN_PLACE, [r, n, t], op))
    steps.append(lambda: _call(node, "Bcast", blocking)([r, n, t], 0))
    return steps


def _reduce(MPI: Any, spec: CallSpec, layout: Layout, node: Any, leaders: Any, s: Any,
            r: Any, blocking: bool) -> list[Step]:
    assert spec.op is not None
    t, op = mpi_reduction(MPI, spec.op, spec.dtype)
    n, root = spec.count, spec.root
    root_node, root_local = layout.node[root], layout.members[layout.node[root]].index(root)
    is_root = root == _rank_of(layout)
    # the leader of the root's node reduces into the root's buffer when it is the root
    buf = r if is_root else (np.empty(n, spec.dtype) if layout.leader else None)
    mine = r if s is MPI.IN_PLACE and not layout.leader else s
    steps: list[Step] = [lambda: _call(node, "Reduce", blocking)(
        mine if mine is MPI.IN_PLACE else [mine, n, t],
        [buf, n, t] if layout.leader else None, op, 0)]
    if leaders is not None and leaders.Get_size() > 1:
        steps.append(lambda: _call(leaders, "Reduce", blocking)(
            MPI.IN_PLACE if layout.mine == root_node else [buf, n, t],
            [buf, n, t] if layout.mine == root_node else None, op, root_node))
    if layout.mine == root_node and root_local != 0:
        if layout.leader:
            steps.append(lambda: _call(node, "Send", blocking)([buf, n, t], root_local))
        elif is_root:
            steps.append(lambda: _call(node, "Recv", blocking)([r, n, t], 0))
    return steps


def _rank_of(layout: Layout) -> int:
    return layout.members[layout.mine][layout.local]


def _bcast(MPI: Any, spec: CallSpec, layout: Layout, node: Any, leaders: Any, s: Any, r: Any,
           blocking: bool) -> list[Step]:
    n, byte, root = spec.count * spec.itemsize, MPI.BYTE, spec.root
    root_node, root_local = layout.node[root], layout.members[layout.node[root]].index(root)
    steps: list[Step] = []
    if _rank_of(layout) == root and s is not None and s is not MPI.IN_PLACE:
        r[: s.size] = s
    at_root_node = layout.mine == root_node
    if at_root_node and root_local != 0:
        steps.append(lambda: _call(node, "Bcast", blocking)([r, n, byte], root_local))
    if leaders is not None and leaders.Get_size() > 1:
        steps.append(lambda: _call(leaders, "Bcast", blocking)([r, n, byte], root_node))
    if not (at_root_node and root_local != 0):
        steps.append(lambda: _call(node, "Bcast", blocking)([r, n, byte], 0))
    return steps


def _allgather(MPI: Any, spec: CallSpec, layout: Layout, node: Any, leaders: Any, s: Any,
               r: Any, blocking: bool) -> list[Step]:
    byte, block = MPI.BYTE, spec.counts[0] * spec.itemsize
    me = _rank_of(layout)
    raw = r.reshape(-1).view(np.uint8)
    mine = raw[me * block: (me + 1) * block] if s is MPI.IN_PLACE else s
    whole = raw if layout.contiguous else np.empty(raw.size, np.uint8)
    start = sum(len(m) for m in layout.members[: layout.mine]) * block
    here = whole[start: start + len(layout.members[layout.mine]) * block]
    steps: list[Step] = [lambda: _call(node, "Gather", blocking)(
        [mine, block, byte], [here, block, byte] if layout.leader else None, 0)]
    if leaders is not None and leaders.Get_size() > 1:
        counts = [len(m) * block for m in layout.members]
        displs = [sum(counts[:k]) for k in range(len(counts))]
        steps.append(lambda: _call(leaders, "Allgatherv", blocking)(
            MPI.IN_PLACE, [whole, counts, displs, byte]))
    steps.append(lambda: _call(node, "Bcast", blocking)([whole, whole.size, byte], 0))
    if not layout.contiguous:
        def reorder() -> None:
            blocks = whole.reshape(len(layout.order), block)
            raw.reshape(len(layout.order), block)[layout.order] = blocks
        steps.append(reorder)
    return steps


def _barrier(MPI: Any, spec: CallSpec, layout: Layout, node: Any, leaders: Any, s: Any,
             r: Any, blocking: bool) -> list[Step]:
    steps: list[Step] = [lambda: _call(node, "Barrier", blocking)()]
    if leaders is not None and leaders.Get_size() > 1:
        steps.append(lambda: _call(leaders, "Barrier", blocking)())
    steps.append(lambda: _call(node, "Barrier", blocking)())
    return steps
