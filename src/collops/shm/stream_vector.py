"""The v-collectives through the stream rings (``shm_stream``): what one rank writes, reads
and copies itself when blocks have their own counts and displacements.

Each v-form streams as its regular form does (`stream_plan._layout_of`), with per-rank block
lengths and the displacements of the rank that owns them: ``allgatherv`` and ``gatherv``
write the rank's block, and a reader puts writer w's block at its own ``displs[w]``;
``scatterv``'s root writes block r from its ``displs[r]``, the blocks interleaved chunk by
chunk so each reader is fed at the same rate. The counts are in the call's fingerprint
(`shm.direct.call_fingerprint`), so every chunk a reader takes has the length it expects.
``alltoallv`` is not here: its counts are each rank's own, so a reader could not tell a
writer's chunk of another length from its own.
"""

from __future__ import annotations

from ..algorithms.spec import CallSpec

SUPPORTED = ("scatterv", "gatherv", "allgatherv")

#: writes ``(src byte in send, bytes, readers, offset in the reader's block)``, reads
#: ``(writer, byte of its block in recv, bytes)``, own ``(src, dst, bytes)``
Layout = tuple[list[tuple[int, int, tuple[int, ...], int]], list[tuple[int, int, int]],
               tuple[int, int, int]]


def _chunks(src: int, nbytes: int, chunk: int, whole: bool) -> list[tuple[int, int, int]]:
    """``(src byte, bytes, offset in the block)`` of a block of ``nbytes`` from ``src`` in
    chunks of ``chunk`` bytes (one chunk when ``whole``)."""
    step = nbytes if whole else chunk
    return [(src + t, min(step, nbytes - t), t) for t in range(0, nbytes, max(step, 1))]


def layout_of(spec: CallSpec, me: int, chunk: int, whole: bool = False) -> Layout:
    """What group member ``me`` writes, reads and copies itself in a v-call of ``spec``, as
    `stream_plan._layout_of` describes them for the regular forms."""
    c, p, root, size = spec.collective, spec.size, spec.root, spec.itemsize
    nbytes = [n * size for n in spec.counts]
    at = [d * size for d in spec.displs]
    others = [(me + d) % p for d in range(1, p)]
    writes: list[tuple[int, int, tuple[int, ...], int]] = []
    reads: list[tuple[int, int, int]] = []
    own = (0, 0, 0)
    if c in ("allgatherv", "gatherv"):
        if c == "allgatherv" or me != root:
            mask = (root,) if c == "gatherv" else tuple(others)
            writes = [(src, n, mask, t) for src, n, t in _chunks(0, nbytes[me], chunk, whole)]
        if c == "allgatherv" or me == root:
            reads = [(w, at[w], nbytes[w]) for w in others]
            own = (0, at[me], nbytes[me])
    elif me == root:  # scatterv's root: one block per reader, interleaved chunk by chunk
        blocks = {r: _chunks(at[r], nbytes[r], chunk, whole) for r in others}
        for i in range(max((len(b) for b in blocks.values()), default=0)):
            writes += [(src, n, (r,), t) for r in others if i < len(blocks[r])
                       for src, n, t in (blocks[r][i],)]
        own = (at[me], 0, nbytes[me])
    else:
        reads = [(root, 0, nbytes[me])]
    reads = [read for read in reads if read[2]]  # nothing comes from a writer of no bytes
    return writes, reads, own if own[2] else (0, 0, 0)
