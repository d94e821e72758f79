"""mpi4py's ``MPI.Op``: the predefined operators over collops' own, and ``Op.Create``.

A user operator follows mpi4py's calling convention, ``function(inbuf, inoutbuf, datatype)``
storing ``inbuf ∘ inoutbuf`` into ``inoutbuf`` (``inbuf`` holding the lower ranks'
contribution); applied to Python objects (the lowercase methods) it is called as
``function(x, y, None)`` and returns the result, as in mpi4py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import ops as collops_ops
from ..runtime.objects import PYTHON_OPS
from .datatypes import datatype_of
from .exceptions import ERR_OP, mpi_exception
from .handles import Handle

UserFunction = Callable[[Any, Any, Any], Any]


class Op(Handle):
    """A reduction operator: a collops `~collops.ops.Op` for buffers, a callable for objects."""

    __slots__ = ("op", "python", "_name", "predefined", "freed", "function", "__weakref__")
    _name: str
    predefined: bool

    def __init__(self, op: Op | None = None) -> None:
        """A new handle of ``op`` (OP_NULL when None), as mpi4py's constructor."""
        self.op: collops_ops.Op | None = None if op is None else op.op
        self.python: Callable[[Any, Any], Any] | None = None if op is None else op.python
        self._name = "" if op is None else op._name
        self.predefined = False if op is None else op.predefined
        self.freed = False
        self.function: UserFunction | None = None if op is None else op.function

    def __repr__(self) -> str:
        return f"<collops.MPI.Op {self._name or 'user'}>"

    def __bool__(self) -> bool:
        return self.op is not None and not self.freed

    def _handle(self) -> Any:
        """What identifies the operator (None when null or freed): equal handles, equal ops."""
        return None if self.op is None or self.freed else self.op

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Op):
            return NotImplemented
        return self._handle() is other._handle()

    def __hash__(self) -> int:
        return id(self._handle())

    def __reduce__(self) -> Any:
        """Pickled as mpi4py's: a predefined handle is itself, a copy of one an equal handle,
        a user operator a new one of the same (picklable) function."""
        name = self._name.removeprefix("MPI_")
        if self.predefined and globals().get(name) is self:
            return name
        if self.predefined:
            return Op, (globals()[name],)
        if self.function is None:
            return Op, ()
        return Op.Create, (self.function, self.op is not None and self.op.commutative)

    def __call__(self, x: Any, y: Any) -> Any:
        """``x ∘ y`` for Python objects."""
        if not self:
            raise ValueError(f"Op.__call__: {self!r} is null")
        return self.for_objects("Op.__call__")(x, y)

    def for_objects(self, call: str) -> Callable[[Any, Any], Any]:
        """This operator as a function of two Python objects."""
        if self.python is None or self.freed:
            raise mpi_exception(ERR_OP, f"{call}: invalid operator {self!r}")
        return self.python

    def for_buffers(self, call: str) -> collops_ops.Op:
        """This operator as collops' array operator."""
        if self.op is None or self.freed:
            raise mpi_exception(ERR_OP, f"{call}: invalid operator {self!r}")
        return self.op

    @classmethod
    def Create(cls, function: UserFunction, commute: bool = False) -> Op:
        """A user operator from ``function(inbuf, inoutbuf, datatype)``."""
        new = cls()

        def combine(left: np.ndarray, right: np.ndarray) -> np.ndarray:
            inout = np.array(right, copy=True, order="C").reshape(-1)
            inbuf = np.ascontiguousarray(left).reshape(-1)
            function(memoryview(inbuf), memoryview(inout),  # type: ignore[arg-type]
                     datatype_of(inout.dtype, "Op"))
            return inout.reshape(np.shape(right))

        new.op = collops_ops.Op(combine, bool(commute), "user")
        new.python = lambda x, y: function(x, y, None)
        new.function = function
        return new

    def Free(self) -> None:
        """Free a user operator (predefined ones cannot be freed)."""
        if self.predefined:
            raise mpi_exception(ERR_OP, f"Op.Free: cannot free predefined {self._name}")
        self.freed = True
        self.op = None  # (so the fast paths' one check, ``op.op is not None``, sees it)

    def Is_commutative(self) -> bool:
        """Whether the operator is commutative."""
        return self.for_buffers("Is_commutative").commutative

    @property
    def is_commutative(self) -> bool:
        """`Is_commutative`."""
        return self.Is_commutative()

    @property
    def is_predefined(self) -> bool:
        """Whether this is a predefined operator."""
        return self.predefined

    def Reduce_local(self, inbuf: Any, inoutbuf: Any) -> None:
        """``inoutbuf = inbuf ∘ inoutbuf``, locally."""
        from .buffers import message
        from .staging import Stage
        stage = Stage()
        left = message(inbuf, "Reduce_local", "inbuf", None, False, 1, stage)[0]
        right = message(inoutbuf, "Reduce_local", "inoutbuf", None, True, 1, stage)[0]
        stage.pack()
        if left.size != right.size:  # mpi4py's own checks raise ValueError, before MPI
            raise ValueError(f"Reduce_local: mismatch in inbuf count {left.size} and inoutbuf "
                             f"count {right.size}")
        if left.dtype != right.dtype:
            raise ValueError(f"Reduce_local: mismatch in inbuf and inoutbuf datatypes "
                             f"({left.dtype} and {right.dtype})")
        op = self.for_buffers("Reduce_local")
        op.check(right.dtype, "Reduce_local")
        op.combine_into(right, left, right.copy())
        stage.unpack()


def _predefined(name: str) -> Op:
    new = Op()
    new.op = collops_ops.BUILTIN_OPS[name]
    new.python = PYTHON_OPS[name]
    new._name = f"MPI_{name}"
    new.predefined = True
    return new


SUM = _predefined("SUM")
PROD = _predefined("PROD")
MAX = _predefined("MAX")
MIN = _predefined("MIN")
LAND = _predefined("LAND")
LOR = _predefined("LOR")
LXOR = _predefined("LXOR")
BAND = _predefined("BAND")
BOR = _predefined("BOR")
BXOR = _predefined("BXOR")
MAXLOC = _predefined("MAXLOC")
MINLOC = _predefined("MINLOC")

REPLACE = Op()
REPLACE.op = collops_ops.Op(lambda a, b: np.array(b, copy=True), False, "REPLACE")
REPLACE.python = lambda x, y: y
REPLACE._name, REPLACE.predefined = "MPI_REPLACE", True
NO_OP = Op()
NO_OP.op = collops_ops.Op(lambda a, b: np.array(a, copy=True), False, "NO_OP")
NO_OP.python = lambda x, y: x
NO_OP._name, NO_OP.predefined = "MPI_NO_OP", True
OP_NULL = Op()
OP_NULL._name, OP_NULL.predefined = "MPI_OP_NULL", True


def as_op(op: Any, call: str) -> collops_ops.Op:
    """A facade `Op` (or a collops one, or a built-in's name) as collops' array operator."""
    if type(op) is Op:
        return op.for_buffers(call)
    if isinstance(op, Op):
        return op.for_buffers(call)
    return collops_ops.as_op(op, call)


def as_python_op(op: Any, call: str) -> Any:
    """A facade `Op` as a function of two objects (other operators pass through)."""
    if isinstance(op, Op):
        return op.for_objects(call)
    return op
