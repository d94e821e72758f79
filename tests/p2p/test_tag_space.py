"""Point-to-point traffic has a tag space of its own: no collective's message ever carries
the phase `P2P_PHASE`, and every point-to-point message does."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops.runtime.p2p_channel import P2P_PHASE, wire_tag
from collops.transport import inproc
from collops.transport.tags import PHASE_BITS, SEQ_BITS, call_of_tag_base

pytestmark = pytest.mark.timeout(120)


def _phase(tag: int) -> int:
    return (tag >> SEQ_BITS) & ((1 << PHASE_BITS) - 1)


def test_collectives_never_use_the_point_to_point_phase(monkeypatch):
    tags: list[tuple[str, int]] = []
    original = inproc.InprocTransport.isend

    def recording(self, peer, tag, data, fingerprint=0):
        tags.append(("p2p" if fingerprint == 0 else "collective", tag))
        return original(self, peer, tag, data, fingerprint)

    monkeypatch.setattr(inproc.InprocTransport, "isend", recording)

    def body(comm):
        x = np.arange(6.0) + comm.rank
        big = np.arange(300_000.0)
        comm.bcast(big if comm.rank == 0 else None)  # envelope and data phases
        comm.scatterv(np.arange(9.0) if comm.rank == 0 else None, [2, 3, 4])
        comm.allgatherv(x[: comm.rank + 1])  # counts exchanged first
        comm.alltoallv(np.arange(6.0), [2, 2, 2])
        comm.gatherv(x[: comm.rank + 1], 0)
        for name in ("allreduce", "reduce_scatter", "scan", "exscan", "allgather", "alltoall"):
            getattr(comm, name)(x)
        comm.iallreduce(x).wait()
        comm.bcast_object({"r": comm.rank})
        comm.allgather_object(list(range(5000)))
        comm.barrier()
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        comm.sendrecv(big, right, 9, source=left)
        comm.sendrecv_object("hi", right, source=left)
        return comm.rank

    def ring_sync(comm):
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        request = comm.irecv(source=left)
        comm.ssend(np.ones(2), right)
        request.wait()
        return body(comm)

    collops.spawn(ring_sync, 3, timeout=60)
    kinds = {kind for kind, _ in tags}
    assert kinds == {"p2p", "collective"}
    for kind, tag in tags:
        assert (_phase(tag) == P2P_PHASE) == (kind == "p2p"), (kind, hex(tag))


def test_wire_tags_keep_the_context_and_differ_by_part_and_number():
    seen = {wire_tag(5, seq, part) for seq in range(3000) for part in range(3)}
    assert len(seen) == 9000
    assert {call_of_tag_base(t)[0] for t in seen} == {5}
    assert wire_tag(5, 1 << 30, 0) != wire_tag(5, 0, 0)
