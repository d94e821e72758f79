"""Every facade collective (blocking, I…, …_init; IN_PLACE; displacements; user operators;
object methods; communicators) against numpy, on threads and on shared memory."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import collops

from .cases import CASES, run_cases

JOBS = [("inproc", 1), ("inproc", 2), ("inproc", 3), ("inproc", 4), ("shm", 2), ("shm", 3)]
_RESULTS: dict[tuple[str, int], list[Any]] = {}


def _job(transport: str, size: int) -> list[Any]:
    """Every case run once per job (a job per transport and size, shared by the tests)."""
    key = (transport, size)
    if key not in _RESULTS:
        _RESULTS[key] = collops.spawn(run_cases, size, transport=transport, timeout=60)
    return _RESULTS[key]


def _same(got: Any, expected: Any) -> bool:
    """Equal values, arrays compared element-wise (inside tuples, lists and dicts too)."""
    if got is None or expected is None:
        return got is expected
    if isinstance(got, np.ndarray) or isinstance(expected, np.ndarray):
        return np.array_equal(np.asarray(got), np.asarray(expected))
    if isinstance(got, (tuple, list)) and isinstance(expected, (tuple, list)):
        return len(got) == len(expected) and all(map(_same, got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(_same(got[k], expected[k]) for k in got)
    return bool(got == expected)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport,size", JOBS, ids=[f"{t}-{n}" for t, n in JOBS])
@pytest.mark.parametrize("name", sorted(CASES))
def test_facade_case_matches_numpy(name: str, transport: str, size: int) -> None:
    for rank, cases in enumerate(_job(transport, size)):
        result = cases[name]
        assert not isinstance(result, str), result
        for label, got, expected in result:
            assert _same(got, expected), f"rank {rank} {name} {label}: {got!r} != {expected!r}"
