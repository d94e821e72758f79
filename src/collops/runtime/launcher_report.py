"""What `collops run` shows of the ranks' tracebacks when a job fails.

The first failing rank's traceback matters; the others are mostly its echoes — each survivor's
`PeerFailed` naming it, the `CollectiveMismatch` of the ranks it left mid-call, a
`KeyboardInterrupt` on every rank after Ctrl-C — and ~20 lines each would bury it. So a rank's
traceback (from ``Traceback (most recent call last):`` to its end) is held until the rank
exits, and then written in full, or as one line (``rank 2: PeerFailed — rank 1 died in
allgather (call 17, step 3 of ring)``) when its error is such a follow-on.
"""

from __future__ import annotations

TRACEBACK_START = b"Traceback (most recent call last):"
#: errors that always follow another rank's failure
ALWAYS_FOLLOW_ON = frozenset({"PeerFailed", "KeyboardInterrupt"})
#: errors that follow the first failure once one has been shown in full
FOLLOW_ON_AFTER_FIRST = frozenset({"CollectiveMismatch"})


def traceback_start(data: bytes | bytearray) -> int:
    """Where a traceback starts at the beginning of a line of ``data``, or -1."""
    at = data.find(TRACEBACK_START)
    while at > 0 and data[at - 1] != ord("\n"):
        at = data.find(TRACEBACK_START, at + 1)
    return at


def final_exception(text: bytes) -> tuple[str, str] | None:
    """``(type name, first line of its message)`` of the exception a traceback ends with."""
    lines = text.decode(errors="replace").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(TRACEBACK_START.decode())]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        if line and not line[0].isspace():
            name, _, message = line.partition(": ")
            return name.rpartition(".")[2], message.strip()
    return None


class TracebackReport:
    """Decides, rank after rank, which held traceback is shown in full."""

    def __init__(self) -> None:
        self.shown_in_full = False

    def one_line(self, rank: int, held: bytes) -> bytes | None:
        """The line to write instead of ``rank``'s traceback, or None to write it in full."""
        final = final_exception(held)
        if final is None:
            return None
        name, message = final
        if name in ALWAYS_FOLLOW_ON or (self.shown_in_full and name in FOLLOW_ON_AFTER_FIRST):
            return f"rank {rank}: {name}{' — ' + message if message else ''}\n".encode()
        self.shown_in_full = True
        return None
