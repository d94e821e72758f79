"""OSU-style benchmarks of collops collectives, side by side with MPI (``collops bench``)."""

from .measure import BUS_FACTOR, Record, bus_bandwidth_factor, data_size

__all__ = ["BUS_FACTOR", "Record", "bus_bandwidth_factor", "data_size"]
