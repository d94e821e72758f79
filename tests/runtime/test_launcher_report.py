"""`collops run` on failure: the first failing rank's traceback in full, every follow-on error
(`PeerFailed`, a `CollectiveMismatch` after it, `KeyboardInterrupt`) one line per rank; the
ranks' ordinary output still forwarded."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from collops.runtime.launcher import launch_program
from collops.runtime.launcher_report import TracebackReport, final_exception

pytestmark = pytest.mark.timeout(90)

RAISES = """
import sys, time
import numpy as np
import collops
comm = collops.init()
for i in range(3):
    comm.allgather(np.ones(4) * comm.rank)
print(f"rank {comm.rank} before", flush=True)
print(f"rank {comm.rank} note on stderr", file=sys.stderr, flush=True)
if comm.rank == 1:
    time.sleep(0.3)
    raise RuntimeError("rank one gives up")
comm.allgather(np.ones(4), algorithm=ALGORITHM, timeout=30)
"""


@pytest.mark.parametrize("algorithm", ["ring", "shm_direct"])
def test_a_raising_rank_is_shown_in_full_and_the_others_in_one_line(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], algorithm: str) -> None:
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(RAISES).replace("ALGORITHM", repr(algorithm)))
    assert launch_program(4, [str(program)]) == 1
    captured = capfd.readouterr()
    out, err = captured.out, captured.err
    assert sorted(out.splitlines()) == [f"rank {r} before" for r in range(4)]
    for r in range(4):
        assert f"rank {r} note on stderr" in err, err
    assert err.count("Traceback (most recent call last):") == 1, err
    assert "RuntimeError: rank one gives up" in err
    for r in (0, 2, 3):
        line = next((x for x in err.splitlines() if x.startswith(f"rank {r}: ")), "")
        assert re.fullmatch(rf"rank {r}: PeerFailed — rank 1 died in allgather \(call 3, "
                            r".*\).*", line), err


def test_the_one_line_names_the_error_and_its_message() -> None:
    tb = (b"Traceback (most recent call last):\n  File \"p.py\", line 3, in <module>\n"
          b"    comm.allgather(x)\n    ^^^^^^^^^^^^^^^^^\n"
          b"collops.errors.PeerFailed: rank 1 died in allgather (call 3, step 2 of ring): "
          b"RuntimeError: gone\n")
    assert final_exception(tb) == ("PeerFailed", "rank 1 died in allgather (call 3, step 2 of "
                                                 "ring): RuntimeError: gone")
    mismatch = tb.replace(b"collops.errors.PeerFailed", b"collops.errors.CollectiveMismatch")
    report = TracebackReport()
    assert report.one_line(2, tb) == (b"rank 2: PeerFailed \xe2\x80\x94 rank 1 died in "
                                      b"allgather (call 3, step 2 of ring): RuntimeError: gone\n")
    assert report.one_line(0, mismatch) is None  # the first failure shown: in full
    assert report.one_line(3, mismatch).startswith(b"rank 3: CollectiveMismatch \xe2\x80\x94")
    assert report.one_line(1, b"Traceback (most recent call last):\nKeyboardInterrupt\n") == (
        b"rank 1: KeyboardInterrupt\n")
    assert report.one_line(1, b"no traceback here\n") is None
