"""Reduction operators: the MPI built-ins and user-defined ones.

An operator combines two arrays element by element, ``left ∘ right``, where ``left`` holds the
contribution of the lower ranks. Non-commutative operators are applied in rank order, as MPI
specifies, so ``reduce`` with a non-commutative ``Op`` gives ``x0 ∘ x1 ∘ … ∘ x(p−1)``.
Each built-in states the dtype kinds MPI defines it on; using it on another kind raises
`UnsupportedOperation`.

Every reduction folds through `Op.combine_into`: with the compiled kernels (numpy's arithmetic
in C, vectorised) for the operators and dtypes `compiled_kernel` names, once the component
that carries them offers them (`use_compiled_kernels`: ``collops.shm._direct``), else with
the operator's numpy function — the one fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .datatypes import is_pair_dtype
from .errors import UnsupportedOperation

ArrayFn = Callable[[np.ndarray, np.ndarray], np.ndarray]

INTEGER = frozenset("iu")
NUMERIC = frozenset("iufc")
ORDERED = frozenset("iuf")
LOGICAL = frozenset("iub")
PAIR = frozenset("V")


@dataclass(frozen=True, eq=False)
class Op:
    """A reduction operator: ``fn(left, right)`` returns ``left ∘ right`` element-wise."""

    fn: ArrayFn
    commutative: bool = True
    name: str = "user"
    kinds: frozenset[str] | None = None
    ufunc: np.ufunc | None = field(default=None, repr=False)

    def check(self, dtype: np.dtype, call: str = "reduce", rank: int | None = None) -> None:
        """Raise `UnsupportedOperation` unless the operator is defined on ``dtype``."""
        if self.kinds is None:
            return
        ok = dtype.kind in self.kinds
        if dtype.kind == "V":
            ok = ok and is_pair_dtype(dtype) and dtype["value"].kind in ORDERED
        if not ok:
            raise UnsupportedOperation(
                call, "op", self.name, f"not defined for dtype {dtype} (MPI defines it on "
                f"{describe_kinds(self.kinds)})", rank,
            )

    def combine_into(self, out: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
        """Store ``left ∘ right`` into ``out`` (which may alias either operand): the compiled
        kernel where there is one, else the operator's numpy function."""
        if _kernel is not None and out is not right and _kernel_on():
            codes = compiled_kernel(self, out.dtype)
            if codes is not None and left.dtype == out.dtype == right.dtype \
                    and left.shape == out.shape == right.shape:
                try:
                    _kernel(out, left, right, codes[1], codes[0])
                    return
                except (ValueError, BufferError, TypeError):
                    pass  # not contiguous, or overlapping: numpy copes
        if self.ufunc is not None:
            self.ufunc(left, right, out=out)
        else:
            out[...] = self.fn(left, right)

    def __call__(self, left: Any, right: Any) -> np.ndarray:
        """``left ∘ right`` as a new array."""
        return np.asarray(self.fn(np.asarray(left), np.asarray(right)))

    def __repr__(self) -> str:
        return f"Op({self.name})"


#: the compiled kernel, ``kernel(out, left, right, dtype_code, op_code)``, once offered
#: (`use_compiled_kernels`), and whether it is in use (the settings may turn it off)
_kernel: Callable[[np.ndarray, np.ndarray, np.ndarray, int, int], None] | None = None
_kernel_on: Callable[[], bool] = bool


def use_compiled_kernels(kernel: Callable[[np.ndarray, np.ndarray, np.ndarray, int, int], None],
                         enabled: Callable[[], bool]) -> None:
    """Fold with ``kernel`` (``out = left ∘ right`` by the codes of `compiled_kernel`; ``out``
    may be ``left``, nothing else may overlap) whenever ``enabled()`` says so."""
    global _kernel, _kernel_on
    _kernel, _kernel_on = kernel, enabled


#: the operators and dtypes the compiled kernels implement (``fold``/``combine`` in
#: ``shm/_direct_fold.c``, the arithmetic of numpy's ufuncs) and their codes there; the others fold
#: with numpy
COMPILED_OPS = {"SUM": 0, "PROD": 1, "MIN": 2, "MAX": 3, "BAND": 4, "BOR": 5, "BXOR": 6}
COMPILED_DTYPES = {np.dtype(t): i for i, t in enumerate(
    (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
     np.float32, np.float64))}


def compiled_kernel(op: Op | None, dtype: np.dtype) -> tuple[int, int] | None:
    """The (operator, dtype) codes of the compiled fold of ``op`` on ``dtype``, or None where
    the fold is the operator's numpy function (`Op.combine_into`)."""
    if op is None or op.name not in COMPILED_OPS or dtype not in COMPILED_DTYPES or (
            op.name.startswith("B") and dtype.kind == "f") or not dtype.isnative:
        return None
    return COMPILED_OPS[op.name], COMPILED_DTYPES[dtype]


def describe_kinds(kinds: frozenset[str]) -> str:
    """Human words for a set of numpy dtype kinds."""
    words = {"i": "signed integers", "u": "unsigned integers", "f": "floats",
             "c": "complex", "b": "bool", "V": "(value, index) pairs"}
    return ", ".join(words[k] for k in "iufcbV" if k in kinds)


def _logical(fn: np.ufunc) -> ArrayFn:
    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(a, b).astype(a.dtype)
    return apply


def _loc(better: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> ArrayFn:
    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        av, bv = a["value"], b["value"]
        take_b = better(bv, av) | ((bv == av) & (b["index"] < a["index"]))
        return np.where(take_b, b, a)
    return apply


SUM = Op(np.add, True, "SUM", NUMERIC, np.add)
PROD = Op(np.multiply, True, "PROD", NUMERIC, np.multiply)
MIN = Op(np.minimum, True, "MIN", ORDERED, np.minimum)
MAX = Op(np.maximum, True, "MAX", ORDERED, np.maximum)
LAND = Op(_logical(np.logical_and), True, "LAND", LOGICAL)
LOR = Op(_logical(np.logical_or), True, "LOR", LOGICAL)
LXOR = Op(_logical(np.logical_xor), True, "LXOR", LOGICAL)
BAND = Op(np.bitwise_and, True, "BAND", LOGICAL, np.bitwise_and)
BOR = Op(np.bitwise_or, True, "BOR", LOGICAL, np.bitwise_or)
BXOR = Op(np.bitwise_xor, True, "BXOR", LOGICAL, np.bitwise_xor)
MINLOC = Op(_loc(np.less), True, "MINLOC", PAIR)
MAXLOC = Op(_loc(np.greater), True, "MAXLOC", PAIR)

BUILTIN_OPS: dict[str, Op] = {
    op.name: op
    for op in (SUM, PROD, MIN, MAX, LAND, LOR, LXOR, BAND, BOR, BXOR, MINLOC, MAXLOC)
}


def as_op(op: Op | str | None, call: str = "reduce", rank: int | None = None) -> Op:
    """Resolve an operator given as an `Op` or a built-in's name (``"sum"``, ``"MAX"``…)."""
    if op is None:
        return SUM
    if isinstance(op, Op):
        return op
    if isinstance(op, str) and op.upper() in BUILTIN_OPS:
        return BUILTIN_OPS[op.upper()]
    raise UnsupportedOperation(call, "op", op, "not an Op nor a built-in operator name", rank)
