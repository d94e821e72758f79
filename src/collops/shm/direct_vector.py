"""The v-collectives through the direct slots (``shm_direct``): what each rank writes into its
slot and reads from its peers' when blocks have their own counts and displacements.

A v-call is its regular form with per-rank sizes: ``allgatherv`` and ``gatherv`` write each
rank's block into its slot and copy every member's block to its displacement in ``recv``
(one piece per member, of that member's length); ``scatterv``'s root writes its blocks
packed in rank order (copying them out of ``x`` first only when its displacements are not
already that order), and each reader copies its own block; ``reduce_scatter`` writes the
whole vector and folds every member's copy of this rank's block. Counts are the same on every
rank; displacements of received blocks are the receiving rank's own, so only the root of a
``scatterv`` ever uses its ``displs``. ``alltoallv`` is not here: a reader would need its
peers' ``sdispls``; nor is ``gatherv``'s record (`direct_gatherv`: its counts need not be
given on every rank, so each block's length travels in its writer's header), though a
gatherv whose counts every rank knows can be read as here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..algorithms.spec import CallSpec, prefix

#: v-collective -> its regular form, whose roles in the direct areas it shares
REGULAR = {"allgatherv": "allgather", "gatherv": "gather", "scatterv": "scatter",
           "reduce_scatter": "reduce_scatter_block"}
#: those whose record is `direct`'s (``gatherv``'s is `direct_gatherv`'s: lengths in headers)
SUPPORTED = tuple(c for c in REGULAR if c != "gatherv")


def regular(collective: str) -> str:
    """The regular collective whose roles ``collective`` takes (itself if not a v-form)."""
    return REGULAR.get(collective, collective)


def contribution_bytes(spec: CallSpec) -> int:
    """Bytes the largest writer of a v-call puts into its slot."""
    if spec.collective in ("allgatherv", "gatherv"):
        return max(spec.counts, default=0) * spec.itemsize
    return sum(spec.counts) * spec.itemsize  # scatterv's root, reduce_scatter's every rank


def own_bytes(spec: CallSpec, rank: int) -> int:
    """Bytes ``rank`` puts into its slot for a v-call (when it writes at all)."""
    if spec.collective in ("allgatherv", "gatherv"):
        return spec.counts[rank] * spec.itemsize
    return sum(spec.counts) * spec.itemsize


def packed(spec: CallSpec) -> bool:
    """Whether a scatterv root's blocks already lie packed in rank order in its ``x``."""
    return spec.displs == prefix(spec.counts)


def pack(spec: CallSpec, send: np.ndarray) -> np.ndarray:
    """A scatterv root's blocks of ``send`` (flat) packed in rank order."""
    return np.concatenate([send[d: d + c] for d, c in zip(spec.displs, spec.counts,
                                                             strict=True)])


def read_plan(spec: CallSpec, rank: int, awaits: list[int], make: Any) -> Any:
    """The `ReadPlan` (``make``) of ``rank`` in a direct v-call of ``spec``, whose slots
    ``awaits`` it reads."""
    c, size = spec.collective, spec.itemsize
    counts = spec.counts
    at = prefix(counts)  # where each block lies in a whole-vector slot
    if c == "reduce_scatter":
        return make("reduce", tuple(awaits), at[rank] * size, count=counts[rank])
    if c in ("allgatherv", "gatherv"):
        if not awaits:
            return make("none")
        return make("copy", tuple(awaits), 0, tuple(spec.displs[j] for j in awaits),
                    max(counts, default=0), lengths=tuple(counts[j] for j in awaits))
    if rank == spec.root:  # scatterv: the root's own block, straight from its x
        return make("self", count=counts[rank], self_from=spec.displs[rank])
    return make("copy", (spec.root,), at[rank] * size, (0,), counts[rank])
