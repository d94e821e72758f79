"""A stream reader never copies a chunk whose offset and length lie outside the writer's
block in its receive buffer (`_stream.c`'s ``read_from`` and `PyPlan`'s): a corrupt header,
or a writer whose lengths differ, is `CollectiveMismatch` on the reader, and the bytes after
its block are untouched."""

from __future__ import annotations

import os

import numpy as np
import pytest

import collops
from collops import config
from collops.shm import stream_protocol
from collops.shm.stream_protocol import H_NBYTES

pytestmark = pytest.mark.timeout(120)

ROWS = 40000  # 320 KB of float64 per rank: several stream chunks, beyond a direct slot
SENTINEL = -7.0


def _corrupting_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 writes through `PyPlan`, and each chunk header it writes claims 64 bytes more
    than the chunk holds."""
    os.environ["COLLOPS_COMPILED"] = "0"
    config.reload_settings()
    write_one = stream_protocol.PyPlan._write_one

    def corrupt(self, state, send, recv, word, fingerprint):  # type: ignore[no-untyped-def]
        c = int(self.cursor[self.size])
        wrote = write_one(self, state, send, recv, word, fingerprint)
        if wrote:
            self.words[self.my_headers + 8 * (c % self.nchunks) + H_NBYTES] += 64
        return wrote

    monkeypatch.setattr(stream_protocol.PyPlan, "_write_one", corrupt)


@pytest.mark.parametrize("reader_compiled", ["1", "0"])
def test_a_chunk_outside_the_block_is_a_mismatch_not_a_write(reader_compiled, monkeypatch):
    monkeypatch.setenv("COLLOPS_COMPILED", reader_compiled)

    def body(comm):
        x = np.full(ROWS, float(comm.rank))
        if comm.rank == 0:
            with pytest.MonkeyPatch.context() as patch:
                _corrupting_writer(patch)
                try:
                    comm.gather(x, root=1, algorithm="shm_stream", timeout=15)
                except collops.CollopsError as exc:  # its root gave up: any error will do
                    return type(exc).__name__
                return None
        room = np.full(2 * ROWS + 1000, SENTINEL)
        try:
            comm.gather(x, root=1, out=room[: 2 * ROWS], algorithm="shm_stream", timeout=15)
        except collops.CollectiveMismatch as exc:
            assert np.all(room[2 * ROWS:] == SENTINEL), "a chunk was written past the block"
            return str(exc)
        return "no error"

    said = collops.spawn(body, 2, transport="shm", timeout=100)
    assert "outside its block" in said[1], said
