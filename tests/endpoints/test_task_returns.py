"""Endpoints over threads when a task returns: an active message that needs the departed task
fails with `PeerFailed` instead of waiting for it, and the header receives every member keeps
posted do not turn a task's normal end into an error for the others (`tests/endpoints/
test_docs.py` runs a program whose tasks end at different moments)."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import PeerFailed
from collops.endpoints import Client, Xfer

pytestmark = pytest.mark.timeout(60)


def test_an_active_message_to_a_task_that_returned_fails():
    def task(comm):
        client = Client("gone", comm)
        client.create_contexts(1)
        geometry = client.geometry()
        if client.task == 1:
            return None
        root = client.contexts[0].endpoint
        root.register_dispatch("ambroadcast", 3, lambda data, info: None)
        try:  # posting fails at once if task 1 has already ended, waiting if not
            geometry.post(Xfer("ambroadcast", None, np.arange(4), 3), via=root).wait(timeout=10)
        except PeerFailed as exc:
            return exc.failed_rank, str(exc)
        return None
    got = collops.spawn(task, 2, timeout=30)
    assert got[0] is not None, "the broadcast completed without task 1"
    assert got[0][0] == 1 and "exited" in got[0][1], got[0]
