"""The compiled fast path of ``shm_direct`` (``collops.shm._direct``) against numpy and Python.

`make test` builds the extension with the machine's C compiler, so it must be there; its
reductions must give numpy's bits (NaN, signed zeros and integer wrap-around included); and
the collectives must give the same results with it and with the pure Python runner
(``COLLOPS_COMPILED=0``), which is what a machine without a compiler runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import collops
from collops import config, ops
from collops.shm import direct as shm_direct
from tests.support.contract import check_reports, run_contract
from tests.support.failures import assert_survivors_name_the_dead, record_peer_failed
from tests.support.runners import compiled_runners

#: tests of the compiled route: it is on for them whatever the environment says
pytestmark = pytest.mark.usefixtures("compiled_on")

DTYPES = list(ops.COMPILED_DTYPES)
UFUNCS = {"SUM": np.add, "PROD": np.multiply, "MIN": np.minimum, "MAX": np.maximum,
          "BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}


def test_the_compiled_fast_path_is_built():
    assert shm_direct._direct is not None, (
        "collops.shm._direct was not built: `make test` compiles it with the machine's "
        "C compiler")


def _op_dtype_pairs():
    for name in ops.COMPILED_OPS:
        for dt in DTYPES:
            if not (name.startswith("B") and dt.kind == "f"):
                yield name, dt


@pytest.mark.parametrize("name,dtype", list(_op_dtype_pairs()),
                         ids=lambda v: str(v))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_compiled_reductions_give_numpys_bits(name, dtype, data):
    assert shm_direct._direct is not None
    n = data.draw(st.integers(1, 200))  # past the vector loops' widths, tails included
    if dtype.kind == "f":
        elements = st.sampled_from([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -2.25]) | st.floats(
            width=dtype.itemsize * 8)
    else:
        elements = st.integers(int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    a = data.draw(hnp.arrays(dtype, n, elements=elements))
    b = data.draw(hnp.arrays(dtype, n, elements=elements))
    with np.errstate(all="ignore"):
        expected = UFUNCS[name](a, b)
    out = a.copy()
    kernel = ops.compiled_kernel(ops.as_op(name), dtype)  # the choice `ops` makes
    assert kernel is not None
    op_code, dtype_code = kernel
    shm_direct._direct.fold_into(out, b, dtype_code, op_code)
    assert _same_bits(out, expected), (name, dtype, a, b, out, expected)
    fresh = np.empty_like(a)  # the three-operand kernel, and the one entry every fold takes
    shm_direct._direct.combine_into(fresh, a, b, dtype_code, op_code)
    assert _same_bits(fresh, expected), (name, dtype, a, b, fresh, expected)
    fresh[...] = 0
    ops.as_op(name).combine_into(fresh, a, b)
    assert _same_bits(fresh, expected), (name, dtype, a, b, fresh, expected)


def test_every_fold_takes_the_compiled_kernel_where_it_applies(monkeypatch):
    calls = []
    kernel = shm_direct._direct.combine_into

    def counted(*args):
        kernel(*args)
        calls.append(args)  # only the folds it did

    monkeypatch.setattr(ops, "_kernel", counted)
    a, b = np.arange(1000.0), np.arange(1000.0)[::-1].copy()
    out = np.empty(1000)
    ops.SUM.combine_into(out, a, b)
    ops.SUM.combine_into(out, out, b)  # in place: out is the left operand
    assert len(calls) == 2 and np.array_equal(out, a + 2 * b)
    # where the kernel cannot (strided, overlapping, no kernel for the operator or dtype):
    # numpy, with the same result
    for args, expected in (((out[::2], a[::2], b[::2]), a[::2] + b[::2]),
                           ((out[1:], a[1:], out[:-1]), None)):
        before = args[2].copy()
        ops.SUM.combine_into(*args)
        if expected is None:
            expected = a[1:] + before
        assert np.array_equal(args[0], expected)
    ops.LAND.combine_into(out, a, b)
    ops.SUM.combine_into(out.astype(np.complex128), a.astype(np.complex128), b + 0j)
    assert len(calls) == 2
    with compiled_runners(False):
        ops.SUM.combine_into(out, a, b)
    assert len(calls) == 2


def _same_bits(got: np.ndarray, expected: np.ndarray) -> bool:
    """Equal bit for bit (signed zeros included), except that any NaN matches any NaN:
    which operand's payload a NaN result carries is up to the hardware, in numpy too."""
    if got.dtype.kind != "f":
        return got.tobytes() == expected.tobytes()
    nan = np.isnan(expected)
    return bool(np.array_equal(np.isnan(got), nan)
                and got[~nan].tobytes() == expected[~nan].tobytes())


def test_fold_into_refuses_unknown_codes_and_ragged_buffers():
    assert shm_direct._direct is not None
    with pytest.raises(ValueError):
        shm_direct._direct.fold_into(np.zeros(2), np.zeros(2), 99, 0)
    with pytest.raises(ValueError):
        shm_direct._direct.fold_into(np.zeros(2), np.zeros(3), 9, 0)


HALF_SUM = collops.Op(lambda a, b: (a + b) / 2, commutative=True)


def _runner_kinds(comm):
    """Run direct calls four times (then bound, if compiled); name each call's runner."""
    x = np.arange(6.0) + comm.rank
    calls = {"allreduce max": ("allreduce", lambda: comm.allreduce(x, "max")),
             "allgather": ("allgather", lambda: comm.allgather(x)),
             "allreduce user op": ("allreduce", lambda: comm.allreduce(x, HALF_SUM))}
    kinds = {}
    for name, (collective, call) in calls.items():
        comm.set_algorithm(collective, None)  # forgets what earlier calls prepared and bound
        for _ in range(4):
            call()
        assert comm.last_algorithm == shm_direct.NAME
        # only a compiled runner runs a whole call once it is bound to the signature
        kinds[name] = "compiled" if collective in comm.bound_calls() else "python"
    return kinds


@pytest.fixture
def pure_python():
    """Settings with the compiled runner switched off (children fork with them)."""
    with compiled_runners(False):
        yield


@pytest.mark.timeout(60)
def test_prepared_direct_calls_run_compiled_unless_the_operator_is_pythons():
    assert collops.spawn(_runner_kinds, 2, transport="shm", timeout=50)[0] == {
        "allreduce max": "compiled", "allgather": "compiled", "allreduce user op": "python"}


@pytest.mark.timeout(60)
def test_collops_compiled_0_runs_the_python_runner(pure_python):
    assert not config.settings.compiled
    assert set(collops.spawn(_runner_kinds, 2, transport="shm", timeout=50)[0].values()) == {
        "python"}


@pytest.mark.timeout(120)
def test_the_python_runner_keeps_the_contract_too(pure_python):
    p, seed = 3, 7

    def keep(collective, name):
        return name == shm_direct.NAME

    per_rank = collops.spawn(run_contract, p, seed, keep, transport="shm", timeout=100)
    check_reports(per_rank, "shm", p, seed, keep)


def _special_values(comm, op):
    """MIN/MAX/SUM of NaN, signed zeros and infinities, folded in rank order."""
    base = np.array([0.0, -0.0, np.nan, 1.0, -np.inf, 5.0, -0.0, np.nan])
    x = np.roll(base, comm.rank) * (1 if comm.rank % 2 else -1)
    return [comm.allreduce(x, op) for _ in range(3)], x


@pytest.mark.timeout(60)
@pytest.mark.parametrize("op", ["min", "max", "sum", "prod"])
@pytest.mark.parametrize("p", [2, 3])
def test_special_float_values_fold_like_numpy_in_rank_order(op, p):
    per_rank = collops.spawn(_special_values, p, op, transport="shm", timeout=50)
    inputs = [x for _, x in per_rank]
    ufunc = {"min": np.minimum, "max": np.maximum, "sum": np.add, "prod": np.multiply}[op]
    expected = inputs[0].copy()
    with np.errstate(all="ignore"):
        for x in inputs[1:]:
            expected = ufunc(expected, x)
    for results, _ in per_rank:
        for got in results:
            assert _same_bits(got, expected), (op, got, expected)


def _late_on_the_prepared_path(comm, how):
    """Warm a call up, then make rank 1 late (0.3 s) or time the call out (2 s late)."""
    import time

    x = np.arange(4.0) + comm.rank
    for _ in range(3):
        comm.allreduce(x)
    if comm.rank == 1:
        time.sleep(0.3 if how == "late" else 2.0)
        if how == "times out":
            return "slept"
    try:
        got = comm.allreduce(x, timeout=0.8 if how == "times out" else None)
    except collops.CollectiveTimeout as exc:
        return "timeout: " + str(exc)
    return got.tolist()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("compiled", [True, False])
def test_a_late_peer_on_the_prepared_path_is_waited_for(compiled):
    with compiled_runners(compiled):
        got = collops.spawn(_late_on_the_prepared_path, 2, "late", transport="shm", timeout=50)
    assert got[0] == got[1] == (np.arange(4.0) * 2 + 1).tolist()


@pytest.mark.timeout(60)
def test_a_prepared_call_times_out_naming_the_missing_rank():
    got = collops.spawn(_late_on_the_prepared_path, 2, "times out", transport="shm", timeout=50)
    assert got[0].startswith("timeout: ") and "allreduce[shm_direct]" in got[0], got[0]
    assert "[1]" in got[0], got[0]


def _dies_before_a_prepared_call(comm, folder):
    import os

    x = np.arange(4.0)
    for _ in range(3):
        comm.allreduce(x)
    if comm.rank == 1:
        os._exit(3)
    record_peer_failed(folder, comm.rank, lambda: comm.allreduce(x))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("compiled", [True, False])
def test_a_peer_dying_before_a_prepared_call_is_named_within_2_s(compiled, tmp_path):
    with compiled_runners(compiled):
        assert_survivors_name_the_dead(_dies_before_a_prepared_call, tmp_path)


def _varying_envelopes(comm):
    """Broadcasts and scatters whose envelopes hold fewer and more bytes in turn: with the
    length prefix only the bytes in use are copied, so stale bytes must never show."""
    got = []
    for i, n in enumerate([100, 1, 0, 90, 3, 100, 7] * 2):
        x = np.arange(n, dtype=np.float64) + 1000 * i if comm.rank == 0 else None
        got.append(comm.bcast(x, 0).tolist())
        rows = np.arange(comm.size * n, dtype=np.int32).reshape(comm.size, n) + i
        got.append(comm.scatter(rows if comm.rank == 0 else None, 0).tolist())
    return got


@pytest.mark.timeout(60)
@pytest.mark.parametrize("p", [2, 3])
def test_envelopes_copy_only_their_bytes_in_use(p):
    per_rank = collops.spawn(_varying_envelopes, p, transport="shm", timeout=50)
    for rank, got in enumerate(per_rank):
        for i, n in enumerate([100, 1, 0, 90, 3, 100, 7] * 2):
            assert got[2 * i] == (np.arange(n, dtype=np.float64) + 1000 * i).tolist()
            rows = np.arange(p * n, dtype=np.int32).reshape(p, n) + i
            assert got[2 * i + 1] == rows[rank: rank + 1].tolist()
