"""A communicator of one rank on shared memory: its bcast and scatter root runs the compiled
root path (it has no reader to wait for), never the slow hand-over to Python."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import config


def alone(comm):
    from collops.shm import direct

    handed_over = []
    real = direct._finish_slowly

    def counting(*args, **kwargs):
        handed_over.append(args[0].spec.collective)
        return real(*args, **kwargs)

    direct._finish_slowly = counting
    try:
        x = np.arange(64, dtype=np.float64)
        got = []
        for i in range(5):
            got.append(comm.bcast(x + i, 0, out=np.empty(64)).tolist())
            got.append(comm.scatter(x + i, 0, out=np.empty(64)).tolist())
            got.append(comm.bcast_object({"i": i}))
    finally:
        direct._finish_slowly = real
    return got, handed_over, comm.last_algorithm


@pytest.fixture
def built_in_table(monkeypatch):
    """The built-in selection table only (no user tuning file), here and in spawned ranks."""
    monkeypatch.setenv("COLLOPS_TUNING_FILE", "")
    config.reload_settings()
    yield
    monkeypatch.undo()
    config.reload_settings()


@pytest.mark.timeout(120)
def test_a_lone_root_bcasts_and_scatters_without_handing_over(built_in_table):
    [(got, handed_over, algorithm)] = collops.spawn(alone, 1, transport="shm", timeout=100)
    x = np.arange(64, dtype=np.float64)
    assert got == [v for i in range(5) for v in ((x + i).tolist(), (x + i).tolist(), {"i": i})]
    assert algorithm == "shm_direct"
    assert handed_over == []
