"""Scatter and scatterv: block r of the root's SEND area ends in rank r's RECV area.

Specs are normalised to v-form, so one builder serves both collectives. Both algorithms are
the rooted patterns of `collops.algorithms.rooted` with the blocks flowing down from the root
(gather's are the same patterns flowing up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..schedule import Schedule
from .registry import register
from .rooted import rooted_binomial, rooted_binomial_cost, rooted_linear, rooted_linear_cost
from .spec import CallSpec


@register(
    ("scatter", "scatterv"), "linear", "The root sends every rank its block directly",
    cost=rooted_linear_cost,
)
def scatter_linear(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Root copies its own block and posts one send per other non-empty block."""
    return rooted_linear(rank, spec, up=False)


@register(
    ("scatter", "scatterv"), "binomial",
    "Binomial tree: each subtree's blocks travel as one message, halving at every level",
    cost=rooted_binomial_cost,
)
def scatter_binomial(rank: int, spec: CallSpec, params: Mapping[str, Any]) -> Schedule:
    """Receive the subtree's blocks from the parent, keep the first, forward the rest."""
    return rooted_binomial(rank, spec, up=False)
