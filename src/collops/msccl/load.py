"""MSCCL-IR XML as a collops algorithm.

`parse` reads an ``algo`` element into plain data; `to_algorithm` makes the algorithm record
whose builder turns one ``gpu`` element into that rank's schedule; `register` adds it to the
registry under the ``algo``'s name; `import_file` does all three after `collops check`'s checks.

Translation of the steps (``e`` = elements per chunk of the call, a region is buffer
``i``/``o``/ ``s`` → SEND/RECV/TMP at ``off·e``, ``cnt·e`` elements): ``s`` → send to the thread
block's send peer; ``r`` → receive from its receive peer; ``cpy`` → copy; ``re`` → reduce ``dst
= dst ∘ src``; ``rcs`` → receive into ``dst``, then send it on; ``rrc`` → receive into scratch,
then ``dst = src ∘ received``; ``rrs`` → the same into scratch, sent on; ``rrcs`` → ``rrc`` then
send ``dst``; ``nop`` → nothing, its dependency passed to the next step. Each step waits for the
step before it in its thread block — a send only if the step overwrites what it sent (a sent
chunk has left, as in MSCCL's buffered connections) — and for its ``depid``/``deps`` step. MSCCL
leaves the operand order of a reduction open (its operators are sums), so a reducing program
requires a commutative operator unless collops wrote it with ``ordered="1"`` and it reduces no
received data (``rr…``). An in-place program (``inplace="1"``) of allgather or allreduce begins
with a copy of the input into its place in the output and reads ``i`` there."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..algorithms.registry import (
    COMMUTATIVE,
    Algorithm,
    Restriction,
    add_algorithm,
)
from ..algorithms.spec import COLLECTIVES, CallSpec
from ..errors import PluginError
from ..schedule import RECV, SEND, TMP, Region, Schedule, ScheduleBuilder
from ..schedule.table import OP_BOR_BYTES, OP_CALL, OP_ZERO

REDUCING = ("reduce", "allreduce", "reduce_scatter", "reduce_scatter_block", "scan", "exscan")
#: the reductions collops writes as ``redop=`` on a ``re`` step (MSCCL's runtime sums)
REDOPS = {"bor_bytes": OP_BOR_BYTES, "zero": OP_ZERO}
#: MSCCL's collective names that collops spells differently
COLLECTIVE_OF = {"reduce_scatter": "reduce_scatter_block"}
SENDS = {"s", "rcs", "rrs", "rrcs"}
RECEIVES = {"r", "rcs", "rrc", "rrs", "rrcs"}
KNOWN = SENDS | RECEIVES | {"cpy", "re", "nop"}


@dataclass(frozen=True)
class Step:
    """One ``step`` element."""

    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    reverse: bool = False
    redop: str = ""


@dataclass(frozen=True)
class Block:
    """One ``tb`` element: its peers and its steps in order."""

    id: int
    send: int
    recv: int
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Gpu:
    """One ``gpu`` element: its chunk counts and thread blocks."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class MscclProgram:
    """An ``algo`` element, read."""

    name: str
    collective: str
    ngpus: int
    inplace: bool
    root: int | None
    ordered: bool
    gpus: tuple[Gpu, ...]
    origin: str

    @property
    def reduces_received(self) -> bool:
        """Whether a step reduces received data (operand order unspecified)."""
        return any(s.type.startswith("rr") for g in self.gpus for b in g.blocks
                   for s in b.steps)


def parse(text: str, origin: str = "<string>") -> MscclProgram:
    """Read MSCCL-IR XML; a malformed file is a `PluginError` naming what is wrong."""
    try:
        algo = ET.fromstring(text)
    except ET.ParseError as exc:
        raise PluginError(origin, f"not XML: {exc}") from exc
    if algo.tag != "algo":
        raise PluginError(origin, f"the root element is <{algo.tag}>, expected <algo>")
    name = _attr(algo, "name", origin)
    coll = _attr(algo, "coll", origin)
    collective = COLLECTIVE_OF.get(coll, coll)
    if collective not in COLLECTIVES:
        raise PluginError(origin, f"<algo coll={coll!r}>: not a collective collops runs "
                                  f"(one of {', '.join(COLLECTIVES)}, or reduce_scatter)")
    gpus = tuple(_gpu(g, origin) for g in algo.findall("gpu"))
    ngpus = int(_attr(algo, "ngpus", origin))
    if sorted(g.id for g in gpus) != list(range(ngpus)):
        raise PluginError(origin, f"<algo ngpus={ngpus}> but gpu ids "
                                  f"{sorted(g.id for g in gpus)}")
    for g in gpus:
        for role in ("send", "recv"):
            peers = [getattr(b, role) for b in g.blocks if getattr(b, role) >= 0]
            twice = sorted({q for q in peers if peers.count(q) > 1})
            if twice:
                raise PluginError(origin, f"gpu {g.id}: more than one thread block {role}s "
                                          f"{'to' if role == 'send' else 'from'} gpu {twice[0]} "
                                          "(other channels): collops keeps one ordered stream "
                                          "of messages per pair of ranks")
    root = algo.get("root")
    return MscclProgram(name, collective, ngpus, algo.get("inplace", "0") == "1",
                        None if root is None else int(root), algo.get("ordered") == "1",
                        tuple(sorted(gpus, key=lambda g: g.id)), origin)


def _attr(element: ET.Element, name: str, origin: str) -> str:
    value = element.get(name)
    if value is None:
        raise PluginError(origin, f"<{element.tag}> has no {name}= attribute")
    return value


def _gpu(element: ET.Element, origin: str) -> Gpu:
    blocks = []
    for tb in element.findall("tb"):
        steps = []
        for st in tb.findall("step"):
            kind = _attr(st, "type", origin)
            if kind not in KNOWN:
                raise PluginError(origin, f"gpu {element.get('id')} tb {tb.get('id')} step "
                                          f"{st.get('s')}: unknown type {kind!r} (collops "
                                          f"reads {', '.join(sorted(KNOWN))})")
            steps.append(Step(kind, st.get("srcbuf", "i"), int(st.get("srcoff", "-1")),
                              st.get("dstbuf", "o"), int(st.get("dstoff", "-1")),
                              int(st.get("cnt", "1")), int(st.get("depid", "-1")),
                              int(st.get("deps", "-1")), st.get("reverse") == "1",
                              st.get("redop", "")))
        blocks.append(Block(int(_attr(tb, "id", origin)), int(tb.get("send", "-1")),
                            int(tb.get("recv", "-1")), tuple(steps)))
    return Gpu(int(_attr(element, "id", origin)), int(element.get("i_chunks", "0")),
               int(element.get("o_chunks", "0")), int(element.get("s_chunks", "0")),
               tuple(sorted(blocks, key=lambda b: b.id)))


def chunk_elements(program: MscclProgram, spec: CallSpec) -> int | None:
    """Elements per chunk for ``spec`` (the same on every rank), or None if the buffers do
    not divide into the program's chunks."""
    found: int | None = None
    for g in program.gpus:
        send, recv = spec.buffer_counts(g.id)
        for have, chunks in ((send, g.i_chunks), (recv, g.o_chunks)):
            if chunks == 0:
                if have:
                    return None
                continue
            if have % chunks:
                return None
            e = have // chunks
            if found is None:
                found = e
            elif e != found:
                return None
    return found if found is not None else 0


def _uniform(spec: CallSpec) -> bool:
    """Whether every block of the call has one count (v-variants called like their regular
    forms)."""
    return all(len(set(c)) <= 1 for c in (spec.counts, spec.sendcounts, spec.recvcounts)) and (
        not spec.sendcounts or set(spec.sendcounts) == set(spec.recvcounts))


def to_algorithm(program: MscclProgram, name: str | None = None) -> Algorithm:
    """The (unregistered) collops algorithm that runs ``program``."""
    if program.inplace and program.collective not in ("allgather", "allreduce"):
        raise PluginError(program.origin, f"an in-place {program.collective} program: collops "
                                          "reads in-place MSCCL programs of allgather and "
                                          "allreduce only")
    name = name or program.name
    if not name.isidentifier():
        raise PluginError(program.origin, f"<algo name={name!r}>: collops names algorithms "
                                          "with Python identifiers (e.g. allgather_ring)")
    restrictions = [
        Restriction("ngpus", f"the number of ranks is {program.ngpus} (the program's ngpus)",
                    lambda s: s.size == program.ngpus),
        Restriction("chunks", "every rank's buffers divide into the program's chunks, with "
                              "one chunk size for all",
                    lambda s: s.size == program.ngpus and chunk_elements(program, s) is not None),
    ]
    if program.root is not None and program.collective in ("bcast", "scatter", "scatterv",
                                                            "gather", "gatherv", "reduce"):
        restrictions.append(Restriction("root", f"the root is {program.root} (the program's)",
                                        lambda s: s.root == program.root))
    if program.collective in REDUCING and (program.reduces_received or not program.ordered):
        restrictions.append(COMMUTATIVE)
    restrictions.append(Restriction(
        "uniform", "every block has the same count (MSCCL programs are for regular calls)",
        _uniform))

    def build(rank: int, spec: CallSpec, params: Any) -> Schedule:
        return _schedule(program, rank, spec)

    return Algorithm(program.collective, name, f"MSCCL-IR program {program.name} "
                     f"({program.ngpus} ranks)", build, tuple(restrictions),
                     origin=program.origin)


def register(program: MscclProgram, name: str | None = None) -> Algorithm:
    """Add ``program`` to the registry (refused if its name is taken for its collective)."""
    alg = to_algorithm(program, name)
    add_algorithm(alg, "collops msccl import")
    return alg


def import_file(path: str | Path) -> Algorithm:
    """Read, check (as `collops check` does) and register the MSCCL-IR program in ``path``."""
    from ..check.checker import check_algorithm
    where = str(Path(path).resolve())
    try:
        text = Path(where).read_text()
    except OSError as exc:
        raise PluginError(str(path), f"cannot read: {exc}") from exc
    program = parse(text, where)
    alg = to_algorithm(program)
    report = check_algorithm(alg, [program.ngpus], unit_counts(alg, program))
    if not report.ok:
        why = str(report.problems[0]) if report.problems else "no call it can take"
        raise PluginError(where, f"the program fails collops check:\n{why}")
    return register(program)


def unit_counts(alg: Algorithm, program: MscclProgram, how_many: int = 3) -> list[int]:
    """The first few counts per block the program can take (for checking it)."""
    from ..check.cases import make_case
    found: list[int] = []
    for count in range(1, 4097):
        if alg.eligible(make_case(program.collective, program.ngpus, count,
                                  root=program.root or 0).specs[0]):
            found.append(count)
            if len(found) == how_many:
                break
    return found


# -- one rank's schedule ----------------------------------------------------------------------
def _schedule(program: MscclProgram, rank: int, spec: CallSpec) -> Schedule:
    gpu = program.gpus[rank]
    e = chunk_elements(program, spec) or 0
    send_count, recv_count = spec.buffer_counts(rank)
    scratch = sum(s.cnt for b in gpu.blocks for s in b.steps if s.type.startswith("rr")) * e
    b = ScheduleBuilder(rank, spec.size, send_count, recv_count, gpu.s_chunks * e + scratch)
    spare = [gpu.s_chunks * e]  # next free scratch element for received data
    alias = 0
    start: list[int] = []
    if program.inplace:
        alias = rank * send_count if program.collective == "allgather" else 0
        if send_count:
            start = [b.copy(RECV(alias, send_count), SEND(0, send_count))]

    def region(buf: str, off: int, cnt: int) -> Region:
        if buf == "i":
            return RECV(alias + off * e, cnt * e) if program.inplace else SEND(off * e, cnt * e)
        return (RECV if buf == "o" else TMP)(off * e, cnt * e)

    def fresh(cnt: int) -> Region:
        at = spare[0]
        spare[0] += cnt * e
        return TMP(at, cnt * e)

    done: dict[tuple[int, int], list[int]] = {}
    nxt = {blk.id: 0 for blk in gpu.blocks}
    last = {blk.id: list(start) for blk in gpu.blocks}
    pending: dict[int, list[tuple[int, Region]]] = {blk.id: [] for blk in gpu.blocks}
    by_id = {blk.id: blk for blk in gpu.blocks}
    remaining = sum(len(blk.steps) for blk in gpu.blocks)
    while remaining:
        progressed = False
        for blk in gpu.blocks:
            while nxt[blk.id] < len(blk.steps):
                st = blk.steps[nxt[blk.id]]
                dep: list[int] = []
                if st.depid >= 0:
                    if (st.depid, st.deps) not in done:
                        if st.depid not in by_id or st.deps >= len(by_id[st.depid].steps):
                            raise PluginError(program.origin, f"gpu {rank} tb {blk.id} step "
                                              f"{nxt[blk.id]} depends on tb {st.depid} step "
                                              f"{st.deps}, which does not exist")
                        break
                    dep = done[(st.depid, st.deps)]
                writes = _written(st, region)
                after = last[blk.id] + dep + [
                    i for i, read in pending[blk.id] if writes is not None
                    and _overlap(read, writes)]
                chain, sends = _step(b, blk, st, after, region, fresh)
                last[blk.id] = chain if chain else after
                pending[blk.id] += sends
                done[(blk.id, nxt[blk.id])] = last[blk.id] + [i for i, _ in sends]
                nxt[blk.id] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = [f"tb {k} step {v}" for k, v in nxt.items() if v < len(by_id[k].steps)]
            raise PluginError(program.origin, f"gpu {rank}: the steps' dependencies form a "
                                              f"cycle ({', '.join(stuck)} wait for each other)")
    return b.build()


def _written(st: Step, region: Any) -> Region | None:
    """The region of the rank's own buffers a step writes (None: none, or fresh scratch)."""
    if st.type in ("r", "rcs", "rrc", "rrcs", "cpy", "re"):
        return region(st.dstbuf, st.dstoff, st.cnt)  # type: ignore[no-any-return]
    return None


def _overlap(a: Region, b: Region) -> bool:
    return a[0] == b[0] and a[1] < b[1] + b[2] and b[1] < a[1] + a[2]


def _step(b: ScheduleBuilder, blk: Block, st: Step, after: list[int], region: Any,
          fresh: Any) -> tuple[list[int], list[tuple[int, Region]]]:
    """Add the collops steps of one MSCCL step. Returns the ids the next step of the thread
    block waits for, and the sends it issued with the region each reads: as in MSCCL, a send
    does not hold up the steps after it (its data has left), except a step that overwrites
    what it sends."""
    t = st.type
    if t == "nop":
        return [], []
    src, dst = region(st.srcbuf, st.srcoff, st.cnt), region(st.dstbuf, st.dstoff, st.cnt)
    if t == "s":
        return after, [(b.send(blk.send, src, after), src)]
    if t == "r":
        return [b.recv(blk.recv, dst, after)], []
    if t == "cpy":
        return [b.copy(dst, src, after)], []
    if t == "re":
        return [b.reduce(dst, src, after, reverse=st.reverse,
                         op=REDOPS.get(st.redop, OP_CALL))], []
    if t == "rcs":
        got = b.recv(blk.recv, dst, after)
        return [got], [(b.send(blk.send, dst, [got]), dst)]
    into = fresh(st.cnt)  # rrc, rrs, rrcs: the received data lands in scratch first
    got = b.recv(blk.recv, into, after)
    if t == "rrs":
        red = b.reduce(into, src, [got])
        return [red], [(b.send(blk.send, into, [red]), into)]
    ready = [got] + ([b.copy(dst, src, after)] if src != dst else [])
    red = b.reduce(dst, into, ready)
    if t == "rrc":
        return [red], []
    return [red], [(b.send(blk.send, dst, [red]), dst)]
