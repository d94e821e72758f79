"""Pictures of a schedule (`collops show`): one lane per rank, one box per step, an arrow per
message, dependencies as edges — as text and as a PNG, in steps or in simulated time."""

from .timeline import Timeline, timeline

__all__ = ["Timeline", "timeline"]
