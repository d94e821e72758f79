"""`collops tune`: the selection table measured on the user's own machine.

`measure` times every eligible algorithm of each collective and size on the ranks of a job;
`decide` turns the timings into rules (a winner only where it beats the default by more than
the measured noise, sizes between measured ones split at their geometric mean); `table` writes
them in the selection table's own format with their evidence and the machine they came from.
"""

from .decide import Decision, Timing, decide, ranges, refine_points
from .measure import measure_job, spec_for
from .table import machine, write_table

__all__ = ["Decision", "Timing", "decide", "machine", "measure_job", "ranges",
           "refine_points", "spec_for", "write_table"]
