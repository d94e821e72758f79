"""Scatter and scatterv: block r of the root's SEND area ends in rank r's RECV area.

Specs are normalised to v-form, so one builder serves both collectives. Both algorithms are
the rooted patterns of `collops.algorithms.rooted` with the blocks flowing down from the root
(gather's are the same patterns flowing up).
"""

from __future__ import annotations

from .rooted import register_rooted

register_rooted(
    ("scatter", "scatterv"), up=False,
    linear="The root sends every rank its block directly",
    binomial="Binomial tree: each subtree's blocks travel as one message, halving at every level",
)
