"""A mistake only a bcast's or scatter's root can see (no array, a dtype collops cannot move,
a wrong ``out``, counts that do not fit) ends the call on every rank: the root raises its
`ArgumentError`, every other rank a `CollectiveMismatch` quoting it — never a wait — and the
communicator's next call works, on threads and over shared memory, by schedules and natives.
"""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import CollopsError
from collops.runtime.abandon import (
    abandoned_header,
    abandoned_meta,
    raise_if_abandoned_header,
    raise_if_abandoned_meta,
)

P = 3
#: case -> (the root's call, the others' call)
CASES = {
    "bcast x None": (lambda c, a: c.bcast(None, root=0, algorithm=a, timeout=20),
                     lambda c, a: c.bcast(None, root=0, algorithm=a, timeout=20)),
    "bcast object dtype": (lambda c, a: c.bcast(np.array([None] * 3), algorithm=a, timeout=20),
                           lambda c, a: c.bcast(None, algorithm=a, timeout=20)),
    "bcast out": (lambda c, a: c.bcast(np.ones(5), out=np.empty(4), algorithm=a, timeout=20),
                  lambda c, a: c.bcast(None, algorithm=a, timeout=20)),
    "scatter not divisible": (
        lambda c, a: c.scatter(np.ones(4), algorithm=a, timeout=20),
        lambda c, a: c.scatter(None, algorithm=a, timeout=20)),
    "scatterv counts": (
        lambda c, a: c.scatterv(np.ones(6), [1, 1, 1], algorithm=a, timeout=20),
        lambda c, a: c.scatterv(None, None, algorithm=a, timeout=20)),
    "scatterv x None": (
        lambda c, a: c.scatterv(None, [1, 1, 1], algorithm=a, timeout=20),
        lambda c, a: c.scatterv(None, None, algorithm=a, timeout=20)),
}
#: (transport, algorithm asked for: None for selection's choice)
PATHS = [("inproc", None), ("inproc", "linear"), ("shm", None), ("shm", "binomial"),
         ("shm", "shm_direct")]


def _body(comm, case, algorithm):
    root_call, other_call = CASES[case]
    try:
        (root_call if comm.rank == 0 else other_call)(comm, algorithm)
        seen = "completed"
    except CollopsError as exc:
        seen = f"{type(exc).__name__}: {exc}"
    after = comm.allreduce(np.array([comm.rank + 1.0]), timeout=20)[0]
    return seen, float(after)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize(("transport", "algorithm"), PATHS, ids=[f"{t}-{a}" for t, a in PATHS])
def test_the_root_s_mistake_ends_the_call_on_every_rank(transport, algorithm, case):
    got = collops.spawn(_body, P, case, algorithm, transport=transport, timeout=60)
    root_error = got[0][0]
    assert root_error.startswith("ArgumentError: ") and "on rank 0" in root_error, got
    quoted = root_error.removeprefix("ArgumentError: ")[:40]
    for seen, _ in got[1:]:
        assert seen.startswith("CollectiveMismatch: the root gave up the call, raising: "), got
        assert quoted in seen, got
    assert [after for _, after in got] == [P * (P + 1) / 2] * P  # the communicator works on


def test_an_abandoned_envelope_or_message_quotes_the_root_s_error():
    text = "bcast: argument out=(3,) on rank 0: must be a writeable contiguous array " * 3
    with pytest.raises(collops.CollectiveMismatch, match="raising: bcast: argument out=") as a:
        raise_if_abandoned_header(abandoned_header(text, 128).tobytes())
    assert str(a.value).endswith("...") and len(str(a.value)) < 200
    with pytest.raises(collops.CollectiveMismatch, match="raising: bcast: argument out=") as b:
        raise_if_abandoned_meta(abandoned_meta(text, 11 + 2))
    assert str(b.value).endswith("...")


def _each_its_own_root(comm, calls):
    seen = []
    for _ in range(calls):
        try:
            comm.scatter(np.arange(comm.size * 1.0), comm.rank, timeout=3)
            seen.append("completed")
        except CollopsError as exc:
            seen.append(type(exc).__name__)
    return seen


@pytest.mark.timeout(60)
def test_root_disagreements_in_a_row_are_each_a_mismatch_over_shm():
    # every rank its own root, as a root's mistake told to the others would be on every rank
    for seen in collops.spawn(_each_its_own_root, 2, 5, transport="shm", timeout=50):
        assert seen == ["CollectiveMismatch"] * 5, seen
