"""Bad arguments raise `ArgumentError` naming the call, the argument, its value and the rank —
never a bare ValueError or TypeError from deep inside, never a wrong argument blamed."""

from __future__ import annotations

import numpy as np
import pytest

import collops
from collops import ArgumentError

pytestmark = pytest.mark.timeout(60)

P = 2

#: case -> (call on a communicator, the call named, the argument named, the value named)
BAD_CALLS = {
    "sendcounts not numbers": (lambda c: c.alltoallv(np.ones(4), "ab"),
                               "alltoallv", "sendcounts", "ab"),
    "split colour not a number": (lambda c: c.split("red"), "split", "color", "red"),
    "split key not a number": (lambda c: c.split(0, "first"), "split", "key", "first"),
    "timeout not a number": (lambda c: c.allreduce(np.ones(3), timeout="x"),
                             "allreduce", "timeout", "x"),
    "timeout negative": (lambda c: c.allreduce(np.ones(3), timeout=-1), "allreduce",
                         "timeout", -1),
    "timeout zero": (lambda c: c.bcast(np.ones(3), root=0, timeout=0), "bcast", "timeout", 0),
    "timeout negative, barrier": (lambda c: c.barrier(timeout=-1.5), "barrier", "timeout",
                                  -1.5),
    "timeout negative, non-blocking": (lambda c: c.iallreduce(np.ones(3), timeout=-1).wait(),
                                       "allreduce", "timeout", -1),
    "sendcounts past the end": (lambda c: c.alltoallv(np.ones(4), [3, 3]), "alltoallv",
                                "sendcounts", [3, 3]),
    "root a float": (lambda c: c.bcast(np.ones(3), root=0.0), "bcast", "root", 0.0),
    "root a float, reduce": (lambda c: c.reduce(np.ones(3), root=1.0), "reduce", "root", 1.0),
    "unknown collective": (lambda c: c.set_algorithm("allreducex", "ring"), "set_algorithm",
                           "collective", "allreducex"),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_a_bad_argument_is_an_argument_error_naming_it(case):
    call, name, argument, value = BAD_CALLS[case]

    def body(comm):
        try:
            call(comm)
        except Exception as exc:  # noqa: BLE001 - the type is what is checked
            error = exc
        else:
            return None
        # the check is local: the communicator still works afterwards
        total = comm.allreduce(np.array([1]), "sum")[0]
        return type(error).__name__, str(error), getattr(error, "argument", None), total
    for rank, got in enumerate(collops.spawn(body, P)):
        assert got is not None, f"{case}: rank {rank} raised nothing"
        kind, text, named, total = got
        assert kind == "ArgumentError" or kind in ("UnknownAlgorithm",), (kind, text)
        assert named == argument, text
        assert text.startswith(f"{name}: "), text
        assert f"argument {argument}={value!r} on rank {rank}" in text, text
        assert total == P


def test_an_unknown_collective_lists_the_collectives():
    def body(comm):
        with pytest.raises(ArgumentError) as info:
            comm.set_algorithm("allreducex", "ring")
        return str(info.value)
    text = collops.spawn(body, P)[0]
    assert "algorithm='ring'" not in text and "known: )" not in text, text
    assert "allreducex" in text and "not a collective" in text, text
    assert all(c in text for c in ("allreduce", "bcast", "alltoallv")), text


def test_a_float_root_asks_for_an_integer():
    def body(comm):
        with pytest.raises(ArgumentError) as info:
            comm.bcast(np.ones(3), root=0.0)
        return str(info.value)
    for text in collops.spawn(body, P):
        assert "integer" in text and "[0, " not in text, text


def test_sendcounts_past_the_end_blames_sendcounts_with_the_sizes():
    def body(comm):
        with pytest.raises(ArgumentError) as info:
            comm.alltoallv(np.ones(4), [3, 3])
        return str(info.value)
    for text in collops.spawn(body, P):
        assert "sdispls" not in text and "6" in text and "4" in text, text


@pytest.mark.parametrize("timeout", [None, 5, 2.5, np.float64(3.0), np.int64(4)])
def test_a_positive_timeout_or_none_is_accepted(timeout):
    def body(comm):
        return comm.allreduce(np.arange(3.0) + comm.rank, timeout=timeout)
    for got in collops.spawn(body, P):
        np.testing.assert_array_equal(got, np.sum([np.arange(3.0) + r for r in range(P)], axis=0))


@pytest.mark.parametrize("root", [1, np.int64(1), np.int32(1)])
def test_an_integer_root_of_any_integer_type_is_accepted(root):
    def body(comm):
        return comm.bcast(np.arange(3.0) + comm.rank, root=root)
    for got in collops.spawn(body, P):
        np.testing.assert_array_equal(got, np.arange(3.0) + 1)


@pytest.mark.parametrize("collective", ["bcast", "reduce", "gather", "scatter"])
def test_a_float_root_is_rejected_after_calls_with_that_root(collective):
    # the calls with root 0 prepare fast paths keyed by the root, and 0.0 == 0 as a key
    def body(comm):
        x = np.arange(2.0 * comm.size)
        for _ in range(3):
            getattr(comm, collective)(x, root=0)
        with pytest.raises(ArgumentError) as info:
            getattr(comm, collective)(x, root=0.0)
        return info.value.argument
    assert collops.spawn(body, P) == ["root"] * P
