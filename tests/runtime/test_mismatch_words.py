"""A mismatch names, in words, each field in which the ranks' calls differ (``op: sum vs
max``, ``dtype: float64 vs >f8``, ``count: 8 vs 16``, ``root: 0 vs 1``, ``collective:
allreduce vs bcast``), on threads and over shared memory, through schedules and natives."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import CollopsError
from collops.algorithms import fingerprint as fp
from collops.ops import MAX, SUM


def _allreduce(comm, algorithm, n=8, op="sum", dtype=np.float64):
    return comm.allreduce(np.ones(n, dtype), op=op, algorithm=algorithm, timeout=10)


#: kind -> (what rank 1 calls differently, the words some rank's mismatch must hold)
KINDS = {
    "op": (lambda c, a: _allreduce(c, a, op="max"), ("op: sum vs max", "op: max vs sum")),
    "dtype": (lambda c, a: _allreduce(c, a, dtype=np.dtype(">f8")),
              ("dtype: float64 vs >f8", "dtype: >f8 vs float64")),
    "count": (lambda c, a: _allreduce(c, a, n=16), ("count: 8 vs 16", "count: 16 vs 8")),
    "collective": (lambda c, a: c.bcast(np.ones(8), root=0, timeout=10),
                   ("collective: allreduce vs bcast", "collective: bcast vs allreduce")),
}
#: (transport, algorithm asked for: None for selection's choice)
PATHS = [("inproc", None), ("inproc", "ring"), ("shm", None), ("shm", "ring"),
         ("shm", "shm_direct"), ("shm", "shm_stream")]
CASES = [pytest.param(t, a, k, id=f"{t}-{a}-{k}") for t, a in PATHS for k in KINDS]


def _body(comm, kind, algorithm):
    try:
        if comm.rank == 1:
            KINDS[kind][0](comm, algorithm)
        else:
            _allreduce(comm, algorithm)
    except CollopsError as exc:
        return type(exc).__name__, str(exc)
    return None, "completed"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("transport", "algorithm", "kind"), CASES)
def test_a_mismatch_names_the_fields_that_differ(transport, algorithm, kind):
    got = collops.spawn(_body, 2, kind, algorithm, transport=transport, timeout=60)
    assert all(name is not None for name, _ in got), got
    named = [text for name, text in got if name == "CollectiveMismatch"]
    assert named, got
    assert all(any(words in text for words in KINDS[kind][1]) for text in named), got


def _root_body(comm):
    try:
        comm.reduce(np.ones(4), root=comm.rank, timeout=10)
    except CollopsError as exc:
        return str(exc)
    return "completed"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_a_root_disagreement_says_root_in_words(transport):
    for text in collops.spawn(_root_body, 2, transport=transport, timeout=60):
        assert "root: 0 vs 1" in text or "root: 1 vs 0" in text, text


def test_a_fingerprint_made_elsewhere_is_decoded_field_by_field():
    # as a peer process's fingerprint is: not remembered here, decoded from its packed fields
    mine = fp.fingerprint("allreduce", "ring", 0, np.dtype("<f8"), (8, (), "SUM"), SUM)
    theirs = fp.fingerprint("allreduce", "ring", 0, np.dtype(">i4"), (16, (), "MAX"), MAX)
    fp._known.clear()
    assert fp.describe(theirs) == "allreduce[ring] op=max dtype=>i4 count=16"
    assert fp.differences(mine, theirs) == "op: sum vs max; dtype: float64 vs >i4; count: 8 vs 16"
    envelope = fp.fingerprint("bcast", "binomial", 3, np.dtype("u1"), "envelope")
    fp._known.clear()
    assert fp.describe(envelope).startswith("bcast[binomial] root=3 (its envelope")
    assert fp.differences(mine, envelope) == "collective: allreduce vs bcast"


def test_equal_calls_have_equal_fingerprints_and_different_ones_differ():
    # the packing is exact for small counts and the built-in dtypes: no two differ by a hash
    seen = {}
    for count in (0, 1, 8, (1 << 21) - 1, 1 << 21, 1 << 40):
        for dtype in ("f8", ">f8", "i4", "u1", "c16"):
            for op in (None, SUM, MAX):
                key = (count, dtype, op and op.name)
                f = fp.fingerprint("allreduce", "ring", 0, np.dtype(dtype),
                                   (count, (), op and op.name), op)
                assert f == fp.fingerprint("allreduce", "ring", 0, np.dtype(dtype),
                                           (count, (), op and op.name), op)
                assert f not in seen, (key, seen.get(f))
                seen[f] = key


def test_a_given_up_call_still_says_what_it_called():
    """The word a rank leaves for a call it gave up after seeing a mismatch carries its own
    call, so a peer that meets that word instead of the call says how the calls differed;
    it is never any call's own fingerprint."""
    mine = fp.fingerprint("allreduce", "ring", 0, np.dtype(np.float64), 8, SUM)
    theirs = fp.fingerprint("allreduce", "ring", 0, np.dtype(np.float64), 8, MAX)
    left = fp.given_up(theirs)
    assert fp.is_given_up(left) and not fp.is_given_up(theirs)
    assert left not in (theirs, mine, fp.GIVEN_UP)
    assert "op: sum vs max" in fp.mismatch(mine, left, "rank 1")
    assert "gave the call up" in fp.mismatch(theirs, left, "rank 1")  # same call: see its error
    assert "gave the call up" in fp.mismatch(mine, fp.given_up(), "rank 1")
    assert fp.differences(mine, left) == "op: sum vs max"
