"""A collops schedule as MSCCL-IR XML (the ``algo`` → ``gpu`` → ``tb`` → ``step`` format of msccl-
tools' ``ir_to_xml`` "old format", which MSCCL's runtime parses).

Only primitive steps are written: ``s`` (send), ``r`` (receive), ``cpy``, ``re`` (reduce: ``dst
= dst ∘ src``) and ``nop`` (a dependency carrier). Steps that move nothing (count 0) are left
out and their dependencies passed on to their dependents. A few attributes MSCCL does not define
and ignores travel along so a file comes back exactly: ``root`` on ``algo`` (the root the
program was built for), ``ordered="1"`` on ``algo`` (written with ``--ordered``: its reductions
combine in rank order, so it is right for non-commutative operators) and ``reverse``/``redop``
on a ``re`` step (collops' operand order, and the byte-wise OR and zero-fill of
`gather.or_combine`)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..algorithms.registry import get_algorithm
from ..algorithms.spec import CallSpec, make_spec
from ..errors import ArgumentError
from ..ops import SUM, Op
from ..schedule import Buffer, Schedule, StepKind
from ..schedule.table import FLAG_REVERSE, OP_BOR_BYTES, OP_ZERO

BUFFER_LETTER = {int(Buffer.SEND): "i", int(Buffer.RECV): "o", int(Buffer.TMP): "s"}
#: collops collectives MSCCL's runtime knows under another name
MSCCL_NAME = {"reduce_scatter_block": "reduce_scatter"}
REDUCING = ("reduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "scan", "exscan")


@dataclass
class _Block:
    """A thread block: its send and receive peers and its steps (collops step ids)."""

    send: int = -1
    recv: int = -1
    steps: list[int] = field(default_factory=list)


#: the operator an ``ordered`` export is built for: any non-commutative one (the schedule
#: only names "the call's operator"; what matters is that it may not reorder operands)
IN_RANK_ORDER = Op(np.add, commutative=False, name="in_rank_order")


def export_spec(collective: str, nprocs: int, count: int, root: int = 0,
                ordered: bool = False) -> CallSpec:
    """The call an export is made for: ``count`` elements per block, float32 (MSCCL's chunks
    are elements), equal counts for the v-variants; a reduction by a commutative operator
    (MSCCL's sums) unless ``ordered``."""
    c, p = collective, nprocs
    dtype = np.float32
    op = (IN_RANK_ORDER if ordered else SUM) if c in REDUCING else None
    if c in ("scatterv", "gatherv", "allgatherv", "reduce_scatter"):
        return make_spec(c, p, dtype, counts=[count] * p, root=root, op=op)
    if c == "alltoallv":
        return make_spec(c, p, dtype, sendcounts=[count] * p, recvcounts=[count] * p)
    return make_spec(c, p, dtype, count=count, root=root, op=op)


def to_xml(collective: str, algorithm: str, nprocs: int, count: int | None = None,
           root: int = 0, params: dict[str, str] | None = None, name: str | None = None,
           ordered: bool = False) -> str:
    """``algorithm`` of ``collective`` on ``nprocs`` ranks, ``count`` elements per block
    (default: as many as ranks), as MSCCL-IR XML; ``ordered``: the schedule for operators
    that are not commutative (combining in rank order), marked so."""
    alg = get_algorithm(collective, algorithm, call="collops msccl export")
    if alg.native is not None or alg.needs:
        raise ArgumentError("collops msccl export", "algorithm", algorithm,
                            "is a transport's own collective, not a schedule")
    count = nprocs if count is None else count
    if count < 1:
        raise ArgumentError("collops msccl export", "count", count, "must be at least 1")
    spec = export_spec(collective, nprocs, count, root, ordered and collective in REDUCING)
    alg.check(spec)
    schedules = alg.build_all(spec, params or {})
    ordered = ordered and collective in REDUCING
    return program_xml(schedules, name or f"{collective}_{algorithm}",
                       MSCCL_NAME.get(collective, collective), root, ordered)


def program_xml(schedules: Sequence[Schedule], name: str, coll: str, root: int = 0,
                ordered: bool = False) -> str:
    """Every rank's schedule as one MSCCL-IR ``algo`` element; ``ordered``: its reductions
    combine in rank order, so the program is right for non-commutative operators too."""
    partner = _partners(schedules)
    algo = ET.Element("algo", {
        "name": name, "proto": "Simple", "nchannels": "1",
        "nchunksperloop": str(max(max(s.send_count, s.recv_count) for s in schedules)),
        "ngpus": str(len(schedules)), "coll": coll, "inplace": "0", "root": str(root)})
    if ordered:
        algo.set("ordered", "1")
    for s in schedules:
        _gpu(algo, s, partner)
    ET.indent(algo, space="  ")
    return ET.tostring(algo, encoding="unicode") + "\n"


def _partners(schedules: Sequence[Schedule]) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(rank, step) of each send or receive -> (buffer, offset) of the other end's region."""
    ends: dict[tuple[int, int, int, str], tuple[int, int, int]] = {}
    for s in schedules:
        for i in range(len(s)):
            if s.kind[i] == StepKind.SEND:
                ends[(s.rank, int(s.peer[i]), int(s.seq[i]), "s")] = (
                    i, int(s.src_buf[i]), int(s.src_off[i]))
            elif s.kind[i] == StepKind.RECV:
                ends[(int(s.peer[i]), s.rank, int(s.seq[i]), "r")] = (
                    i, int(s.dst_buf[i]), int(s.dst_off[i]))
    partner = {}
    for (src, dst, seq, side), (step, _, _) in ends.items():
        other = ends[(src, dst, seq, "r" if side == "s" else "s")]
        partner[(src if side == "s" else dst, step)] = other
    return partner


def _gpu(algo: ET.Element, s: Schedule, partner: dict) -> None:
    gpu = ET.SubElement(algo, "gpu", {"id": str(s.rank), "i_chunks": str(s.send_count),
                                      "o_chunks": str(s.recv_count),
                                      "s_chunks": str(s.tmp_count)})
    kept = [i for i in range(len(s)) if s.count[i] > 0]
    deps = _deps_through_dropped(s, set(kept))
    blocks: dict[tuple[str, int], _Block] = {}
    block_of: dict[int, tuple[str, int]] = {}
    for i in kept:
        kind = int(s.kind[i])
        key = (("send", int(s.peer[i])) if kind == StepKind.SEND else
               ("recv", int(s.peer[i])) if kind == StepKind.RECV else ("local", -1))
        block = blocks.setdefault(key, _Block(send=key[1] if key[0] == "send" else -1,
                                              recv=key[1] if key[0] == "recv" else -1))
        block.steps.append(i)
        block_of[i] = key
    order = sorted(blocks, key=lambda k: (blocks[k].send, blocks[k].recv))
    tb_id = {k: n for n, k in enumerate(order)}
    # each step's dependencies outside its own block (inside, the block's order covers them)
    outside = {i: sorted({d for d in deps[i] if block_of[d] != block_of[i]}) for i in kept}
    position: dict[int, int] = {}
    layout: dict[tuple[str, int], list[tuple[str, int, int | None]]] = {}
    for key in order:
        rows: list[tuple[str, int, int | None]] = []  # (what, step, dependency)
        for i in blocks[key].steps:
            extra = outside[i]
            for d in extra[1:]:
                rows.append(("nop", i, d))
            position[i] = len(rows)
            rows.append(("step", i, extra[0] if extra else None))
        layout[key] = rows
    depended_on = {d for i in kept for d in outside[i]}
    for key in order:
        block = blocks[key]
        tb = ET.SubElement(gpu, "tb", {"id": str(tb_id[key]), "send": str(block.send),
                                        "recv": str(block.recv), "chan": "0"})
        for n, (what, i, dep) in enumerate(layout[key]):
            attrs = ({"s": str(n), "type": "nop", "srcbuf": "i", "srcoff": "-1",
                      "dstbuf": "o", "dstoff": "-1", "cnt": "0"} if what == "nop"
                     else _step_attrs(s, i, n, partner))
            if dep is None:
                attrs.update(depid="-1", deps="-1")
            else:
                attrs.update(depid=str(tb_id[block_of[dep]]), deps=str(position[dep]))
            attrs["hasdep"] = "1" if what == "step" and i in depended_on else "0"
            ET.SubElement(tb, "step", attrs)


def _step_attrs(s: Schedule, i: int, n: int, partner: dict) -> dict[str, str]:
    kind = int(s.kind[i])
    src = (BUFFER_LETTER[int(s.src_buf[i])], str(int(s.src_off[i])))
    dst = (BUFFER_LETTER[int(s.dst_buf[i])], str(int(s.dst_off[i])))
    if kind == StepKind.SEND:
        _, buf, off = partner[(s.rank, i)]
        dst, letter = (BUFFER_LETTER[buf], str(off)), "s"
    elif kind == StepKind.RECV:
        _, buf, off = partner[(s.rank, i)]
        src, letter = (BUFFER_LETTER[buf], str(off)), "r"
    else:
        letter = "cpy" if kind == StepKind.COPY else "re"
    attrs = {"s": str(n), "type": letter, "srcbuf": src[0], "srcoff": src[1],
             "dstbuf": dst[0], "dstoff": dst[1], "cnt": str(int(s.count[i]))}
    if kind == StepKind.REDUCE:
        if int(s.flags[i]) & FLAG_REVERSE:
            attrs["reverse"] = "1"
        if int(s.op[i]) == OP_BOR_BYTES:
            attrs["redop"] = "bor_bytes"
        elif int(s.op[i]) == OP_ZERO:
            attrs["redop"] = "zero"
    return attrs


def _deps_through_dropped(s: Schedule, kept: set[int]) -> dict[int, set[int]]:
    """Each kept step's dependencies, a dropped (empty) step replaced by its own."""
    preds: dict[int, set[int]] = defaultdict(set)
    for a, b in zip(s.dep_from.tolist(), s.dep_to.tolist(), strict=True):
        preds[b].add(a)
    resolved: dict[int, set[int]] = {}

    def kept_preds(i: int) -> set[int]:
        if i not in resolved:
            out: set[int] = set()
            for d in preds[i]:
                out |= {d} if d in kept else kept_preds(d)
            resolved[i] = out
        return resolved[i]

    return {i: kept_preds(i) for i in kept}
