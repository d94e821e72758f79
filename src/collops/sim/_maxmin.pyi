"""Type stub of the compiled progressive filling (`collops.sim._maxmin`)."""

from typing import Any

def fill(pair_flow: Any, pair_link: Any, capacity: Any, rate: Any, /) -> int:
    """Write every flow's max-min fair rate into ``rate``; returns the rounds of filling."""

def fill_routes(flows: Any, offsets: Any, links: Any, capacity: Any, rate: Any,
                unbounded: float, /) -> int:
    """Max-min fair rates of flows given as message ids over CSR routes (heap order)."""
