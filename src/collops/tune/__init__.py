"""`collops tune`: the selection table measured on the user's own machine.

`grid` times every eligible algorithm and protocol setting of each collective and size on the
ranks of a job, in passes spread over the run (`measure` holds the timing itself); `decide`
turns the timings into rules (a winner only where it beats the default by more than the noise
in every round of every pass, sizes between measured ones split at their geometric mean);
`verify` re-times each rule against the defaults with the rules in force and drops those that
do not hold (`across`: again in jobs of their own; `state`: against the defaults' times before
the grid and once more at the end, so a machine state lasting the whole verification cannot
keep a rule); `table` writes them in the selection table's own format with their evidence and
the machine they came from. `jobs` tunes the settings a shared-memory job reads as it starts
(``protocols.shm.*``), a job per candidate value.
"""

from .decide import Decision, Timing, decide, ranges, refine_points
from .grid import measure_job
from .measure import spec_for
from .table import machine, write_table
from .verify import compare, verify_job

__all__ = ["Decision", "Timing", "compare", "decide", "machine", "measure_job", "ranges",
           "refine_points", "spec_for", "verify_job", "write_table"]
