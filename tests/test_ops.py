"""The reduction operators against numpy, their dtype checks and user-defined operators."""

from __future__ import annotations

import numpy as np
import pytest

from collops import ops
from collops.algorithms import COMMUTATIVE, make_spec
from collops.datatypes import pair_dtype, pairs
from collops.errors import UnsupportedOperation

RNG = np.random.default_rng(7)

SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64]
COMPLEX = [np.complex64, np.complex128]
INTEGERS = SIGNED + UNSIGNED


def sample(dtype: object, n: int = 64) -> np.ndarray:
    """Random values of ``dtype``, zeros included (they matter to the logical operators)."""
    dt = np.dtype(dtype)  # type: ignore[call-overload]
    if dt.kind == "b":
        return RNG.random(n) < 0.5
    if dt.kind == "c":
        return (RNG.integers(-3, 4, n) + 1j * RNG.integers(-3, 4, n)).astype(dt)
    if dt.kind == "f":
        return RNG.integers(-20, 21, n).astype(dt) / 4
    lo = 0 if dt.kind == "u" else -20
    return RNG.integers(lo, 21, n).astype(dt)


def numpy_logical(fn):
    """MPI's logical operators yield 0 or 1 in the operands' dtype."""
    return lambda a, b: fn(a != 0, b != 0).astype(a.dtype)


#: operator -> (numpy reference, dtypes MPI defines it on)
DEFINED = {
    ops.SUM: (np.add, INTEGERS + FLOATS + COMPLEX),
    ops.PROD: (np.multiply, INTEGERS + FLOATS + COMPLEX),
    ops.MIN: (np.minimum, INTEGERS + FLOATS),
    ops.MAX: (np.maximum, INTEGERS + FLOATS),
    ops.LAND: (numpy_logical(np.logical_and), INTEGERS + [np.bool_]),
    ops.LOR: (numpy_logical(np.logical_or), INTEGERS + [np.bool_]),
    ops.LXOR: (numpy_logical(np.logical_xor), INTEGERS + [np.bool_]),
    ops.BAND: (np.bitwise_and, INTEGERS),
    ops.BOR: (np.bitwise_or, INTEGERS),
    ops.BXOR: (np.bitwise_xor, INTEGERS),
}
OP_DTYPE = [(op, dt) for op, (_, dts) in DEFINED.items() for dt in dts]


@pytest.mark.parametrize(("op", "dtype"), OP_DTYPE,
                         ids=[f"{op.name}-{np.dtype(dt)}" for op, dt in OP_DTYPE])
def test_builtin_equals_numpy(op, dtype):
    left, right = sample(dtype), sample(dtype)
    reference, _ = DEFINED[op]
    want = reference(left, right)
    op.check(np.dtype(dtype))
    got = op(left, right)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
    out = left.copy()
    op.combine_into(out, out, right)  # in place, aliasing the left operand
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("op", [ops.MINLOC, ops.MAXLOC], ids=lambda o: o.name)
@pytest.mark.parametrize("value_dtype", [np.float64, np.float32, np.int32, np.int64])
def test_loc_ops_equal_numpy(op, value_dtype):
    n = 200
    values = RNG.integers(0, 5, (2, n)).astype(value_dtype)  # many ties
    indices = RNG.integers(0, 100, (2, n))
    left, right = pairs(values[0], indices[0]), pairs(values[1], indices[1])
    op.check(left.dtype)
    got = op(left, right)
    pick = np.argmin if op is ops.MINLOC else np.argmax
    for i in range(n):
        candidates = [(values[0, i], indices[0, i]), (values[1, i], indices[1, i])]
        best = candidates[pick([v for v, _ in candidates])]
        ties = [k for v, k in candidates if v == best[0]]
        assert got["value"][i] == best[0]
        assert got["index"][i] == min(ties)


@pytest.mark.parametrize("op", [ops.MINLOC, ops.MAXLOC], ids=lambda o: o.name)
def test_loc_tie_goes_to_lower_index_either_side(op):
    low_right = op(pairs([3.0], [9]), pairs([3.0], [2]))
    low_left = op(pairs([3.0], [2]), pairs([3.0], [9]))
    assert low_right["index"][0] == 2
    assert low_left["index"][0] == 2


def test_minloc_over_many_contributions_matches_numpy_argmin():
    values = RNG.integers(0, 4, (9, 30)).astype(np.float64)
    contributions = [pairs(values[r], np.full(30, r)) for r in range(9)]
    total = contributions[0]
    for c in contributions[1:]:
        total = ops.MINLOC(total, c)
    np.testing.assert_array_equal(total["value"], values.min(axis=0))
    np.testing.assert_array_equal(total["index"], values.argmin(axis=0))  # first = lowest rank


UNDEFINED = [
    (ops.BAND, np.float64), (ops.BOR, np.float32), (ops.BXOR, np.complex128),
    (ops.MAX, np.complex128), (ops.MIN, np.complex64), (ops.SUM, np.bool_),
    (ops.PROD, np.bool_), (ops.LAND, np.float64), (ops.MINLOC, np.int32),
    (ops.MAXLOC, np.float64), (ops.SUM, pair_dtype(np.float64)),
    (ops.MINLOC, pair_dtype(np.complex128)),
]


@pytest.mark.parametrize(("op", "dtype"), UNDEFINED,
                         ids=[f"{op.name}-{np.dtype(dt)}" for op, dt in UNDEFINED])
def test_undefined_combination_raises_naming_op_and_dtype(op, dtype):
    dt = np.dtype(dtype)
    with pytest.raises(UnsupportedOperation) as info:
        op.check(dt, "allreduce", rank=3)
    message = str(info.value)
    assert op.name in message
    assert str(dt) in message
    assert "allreduce" in message and "rank 3" in message


def test_user_op_commutative_flag_reaches_the_restriction():
    def concat_digits(a, b):
        return a * 10 + b

    ordered = ops.Op(concat_digits, commutative=False, name="DIGITS")
    free = ops.Op(np.add, commutative=True, name="ADD")
    assert ordered(np.array([1]), np.array([2]))[0] == 12
    assert ordered(np.array([2]), np.array([1]))[0] == 21
    assert not make_spec("allreduce", 4, np.int64, count=1, op=ordered).commutative
    assert not COMMUTATIVE.check(make_spec("allreduce", 4, np.int64, count=1, op=ordered))
    assert COMMUTATIVE.check(make_spec("allreduce", 4, np.int64, count=1, op=free))


def test_user_op_without_kinds_accepts_any_dtype_and_combines_in_place():
    last = ops.Op(lambda a, b: np.where(b != 0, b, a), commutative=False, name="LAST")
    last.check(np.dtype(np.complex64))
    out = np.array([1, 2, 0, 4])
    last.combine_into(out, out, np.array([0, 7, 0, 9]))
    np.testing.assert_array_equal(out, [1, 7, 0, 9])
    out = np.array([0, 7, 0, 9])
    last.combine_into(out, np.array([1, 2, 0, 4]), out)  # aliasing the right operand
    np.testing.assert_array_equal(out, [1, 7, 0, 9])


def test_as_op_resolves_names_and_rejects_unknown():
    assert ops.as_op("sum") is ops.SUM
    assert ops.as_op("MaxLoc") is ops.MAXLOC
    assert ops.as_op(None) is ops.SUM
    with pytest.raises(UnsupportedOperation, match="median"):
        ops.as_op("median")


@pytest.mark.parametrize(("op", "dtype", "compiled"), [
    ("SUM", np.float64, True), ("BXOR", np.uint8, True), ("MAX", np.int32, True),
    ("BAND", np.float32, False),  # bitwise on floats: not an MPI pair, never compiled
    ("SUM", np.complex128, False), ("LAND", np.int32, False), ("SUM", ">f8", False),
])
def test_the_compiled_fold_is_chosen_in_ops_where_it_exists(op, dtype, compiled):
    kernel = ops.compiled_kernel(ops.as_op(op), np.dtype(dtype))
    assert (kernel is not None) == compiled
    assert ops.compiled_kernel(ops.Op(np.add), np.dtype(np.float64)) is None  # user-defined
