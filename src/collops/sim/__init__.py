"""Simulation: the algorithms' own schedules executed on modelled networks.

Two models read the same schedules: a vectorised *congestion model* (phases of concurrent
messages, each as slow as its busiest link) for thousands of ranks, and a *packet-level*
discrete-event model (FIFO links, packets, message vs packet switching) for fidelity.
Reductions on a combining tree can be combined in the network. Plots live in
`collops.sim.plots` (matplotlib, imported only when used).
"""

from .api import (
    MODELS,
    SimResult,
    call_specs,
    format_results,
    parse_nodes,
    parse_size,
    parse_sizes,
    run_program,
    simulate,
    simulate_schedules,
    simulate_sweep,
)
from .congestion import CongestionOutcome, RoundStats, congestion_model
from .des import Environment, Event, Process, Timeout
from .packet import PacketOutcome, PacketSimulation, packet_model
from .program import Program, program_from_messages, program_from_schedules

__all__ = [
    "MODELS", "CongestionOutcome", "Environment", "Event", "PacketOutcome", "PacketSimulation",
    "Process", "Program", "RoundStats", "SimResult", "Timeout", "call_specs", "congestion_model",
    "format_results", "packet_model", "parse_nodes", "parse_size", "parse_sizes",
    "program_from_messages", "program_from_schedules", "run_program", "simulate",
    "simulate_schedules", "simulate_sweep",
]
