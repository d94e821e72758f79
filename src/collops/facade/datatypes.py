"""mpi4py's predefined datatypes over numpy dtypes, and contiguous derived types.

A `Datatype` is a numpy base dtype times a multiplier: a predefined type has multiplier 1,
``Create_contiguous(n)`` multiplies it by ``n``. Buffers are moved as arrays of the base
dtype, so every count the facade hands collops is in base elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..datatypes import pair_dtype
from .exceptions import ERR_TYPE, mpi_exception, not_implemented


class Datatype:
    """An MPI datatype: ``base`` numpy dtype times ``multiplier`` elements."""

    __slots__ = ("base", "multiplier", "_name", "predefined", "committed", "freed", "exact")
    base: np.dtype | None
    #: ``base`` when one element is one base element (and the type is usable), else None:
    #: the one comparison the fast path of ``[array, datatype]`` makes
    exact: np.dtype | None
    multiplier: int
    _name: str
    predefined: bool

    def __init__(self, datatype: Datatype | None = None) -> None:
        """A new handle of ``datatype`` (DATATYPE_NULL when None), as mpi4py's constructor."""
        self.base: np.dtype | None = None if datatype is None else datatype.base
        self.multiplier = 1 if datatype is None else datatype.multiplier
        self._name = "" if datatype is None else datatype._name
        self.predefined = False if datatype is None else datatype.predefined
        self.committed = True
        self.freed = False
        self.exact = self.base if self.multiplier == 1 else None

    @classmethod
    def _make(cls, base: np.dtype | None, multiplier: int, name: str,
              predefined: bool) -> Datatype:
        new = cls()
        new.base, new.multiplier, new._name, new.predefined = base, multiplier, name, predefined
        new.exact = base if multiplier == 1 else None
        return new

    def __repr__(self) -> str:
        return f"<collops.MPI.Datatype {self._name or 'derived'}>"

    def __bool__(self) -> bool:
        return self.base is not None and not self.freed

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        return self is other or (self.predefined and other.predefined
                                 and self._name == other._name)

    def __hash__(self) -> int:
        return hash(self._name) if self.predefined else id(self)

    def _checked(self, call: str) -> np.dtype:
        if self.base is None or self.freed:
            raise mpi_exception(ERR_TYPE, f"{call}: invalid datatype {self!r}")
        return self.base

    def Get_size(self) -> int:
        """Bytes of data in one element of this type."""
        return self._checked("Get_size").itemsize * self.multiplier

    def Get_extent(self) -> tuple[int, int]:
        """``(lb, extent)``: contiguous types have lower bound 0 and extent = size."""
        return 0, self.Get_size()

    Get_true_extent = Get_extent

    @property
    def size(self) -> int:
        """`Get_size`."""
        return self.Get_size()

    @property
    def extent(self) -> int:
        """The extent in bytes."""
        return self.Get_size()

    @property
    def lb(self) -> int:
        """The lower bound (0)."""
        return 0

    @property
    def ub(self) -> int:
        """The upper bound (= the extent)."""
        return self.Get_size()

    @property
    def is_predefined(self) -> bool:
        """Whether this is a predefined type."""
        return self.predefined

    @property
    def name(self) -> str:
        """`Get_name`."""
        return self._name

    def Get_name(self) -> str:
        """The type's name (``MPI_DOUBLE``…; empty for derived types unless set)."""
        return self._name

    def Set_name(self, name: str) -> None:
        """Name the type."""
        self._name = str(name)

    @property
    def typechar(self) -> str:
        """The buffer-protocol character of the base dtype (``'d'`` for DOUBLE)."""
        base = self._checked("typechar")
        return base.char if self.multiplier == 1 else ""

    def tocode(self) -> str:
        """`typechar`."""
        return self.typechar

    @classmethod
    def fromcode(cls, code: str) -> Datatype:
        """The predefined type of a typecode (``'d'`` → DOUBLE)."""
        return from_typecode(code, "Datatype.fromcode")

    def Commit(self) -> Datatype:
        """Make the type usable (every type here is)."""
        self._checked("Commit")
        self.committed = True
        return self

    def Free(self) -> None:
        """Free a derived type (predefined ones cannot be freed)."""
        if self.predefined:
            raise mpi_exception(ERR_TYPE, f"Free: cannot free predefined {self._name}")
        self.freed = True
        self.exact = None

    def Dup(self) -> Datatype:
        """A new handle of the same type."""
        self._checked("Dup")
        return Datatype._make(self.base, self.multiplier, self._name, False)

    def Create_contiguous(self, count: int) -> Datatype:
        """``count`` elements of this type, one after another."""
        base = self._checked("Create_contiguous")
        if int(count) < 0:
            raise mpi_exception(ERR_TYPE, f"Create_contiguous: count {count} is negative")
        return Datatype._make(base, self.multiplier * int(count), "", False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("Create_") or name in ("Pack", "Unpack", "Pack_size",
                                                    "Get_envelope", "Get_contents"):
            raise not_implemented("derived datatypes other than contiguous", f"Datatype.{name}")
        raise AttributeError(name)


PREDEFINED: dict[str, Datatype] = {}
_BY_DTYPE: dict[np.dtype, Datatype] = {}


def _define(name: str, dtype: Any) -> Datatype:
    datatype = Datatype._make(None if dtype is None else np.dtype(dtype), 1, f"MPI_{name}",
                              True)
    PREDEFINED[name] = datatype
    if datatype.base is not None:
        _BY_DTYPE.setdefault(datatype.base, datatype)
    return datatype


_TABLE: list[tuple[str, Any]] = [
    ("DOUBLE", np.float64), ("FLOAT", np.float32), ("LONG_DOUBLE", np.longdouble),
    ("INT", np.intc), ("LONG", np.int_), ("LONG_LONG", np.longlong), ("SHORT", np.short),
    ("SIGNED_CHAR", np.byte), ("UNSIGNED_CHAR", np.ubyte), ("UNSIGNED_SHORT", np.ushort),
    ("UNSIGNED", np.uintc), ("UNSIGNED_LONG", np.uint), ("UNSIGNED_LONG_LONG", np.ulonglong),
    ("C_BOOL", np.bool_), ("C_FLOAT_COMPLEX", np.complex64),
    ("C_DOUBLE_COMPLEX", np.complex128), ("C_LONG_DOUBLE_COMPLEX", np.clongdouble),
    ("BYTE", np.ubyte), ("CHAR", np.byte), ("PACKED", np.ubyte), ("WCHAR", np.uint32),
    ("INT8_T", np.int8), ("INT16_T", np.int16), ("INT32_T", np.int32), ("INT64_T", np.int64),
    ("UINT8_T", np.uint8), ("UINT16_T", np.uint16), ("UINT32_T", np.uint32),
    ("UINT64_T", np.uint64), ("AINT", np.int64), ("OFFSET", np.int64), ("COUNT", np.int64),
    ("SIGNED_SHORT", np.short), ("SIGNED_INT", np.intc), ("SIGNED_LONG", np.int_),
    ("SIGNED_LONG_LONG", np.longlong), ("UNSIGNED_INT", np.uintc),
    ("CXX_BOOL", np.bool_), ("BOOL", np.bool_), ("CXX_FLOAT_COMPLEX", np.complex64),
    ("CXX_DOUBLE_COMPLEX", np.complex128), ("CXX_LONG_DOUBLE_COMPLEX", np.clongdouble),
    ("C_COMPLEX", np.complex64), ("COMPLEX", np.complex64), ("DOUBLE_COMPLEX", np.complex128),
    ("F_FLOAT", np.float32), ("F_DOUBLE", np.float64), ("F_FLOAT_COMPLEX", np.complex64),
    ("F_DOUBLE_COMPLEX", np.complex128), ("F_BOOL", np.int32), ("F_INT", np.int32),
    ("REAL", np.float32), ("DOUBLE_PRECISION", np.float64), ("INTEGER", np.int32),
    ("LOGICAL", np.int32), ("CHARACTER", np.byte), ("REAL4", np.float32), ("REAL8", np.float64),
    ("INTEGER1", np.int8), ("INTEGER2", np.int16), ("INTEGER4", np.int32),
    ("INTEGER8", np.int64), ("COMPLEX8", np.complex64), ("COMPLEX16", np.complex128),
    ("SHORT_INT", pair_dtype(np.short, np.intc)), ("INT_INT", pair_dtype(np.intc, np.intc)),
    ("LONG_INT", pair_dtype(np.int_, np.intc)), ("FLOAT_INT", pair_dtype(np.float32, np.intc)),
    ("DOUBLE_INT", pair_dtype(np.float64, np.intc)),
    ("LONG_DOUBLE_INT", pair_dtype(np.longdouble, np.intc)),
    ("DATATYPE_NULL", None),
]
#: predefined names collops has no numpy dtype for: handles whose use raises ERR_TYPE
_WITHOUT_DTYPE = ("LOGICAL1", "LOGICAL2", "LOGICAL4", "LOGICAL8", "LOGICAL16", "INTEGER16",
                  "REAL2", "REAL16", "COMPLEX4", "COMPLEX32", "BFLOAT16_T", "C_FLOAT16",
                  "F_FLOAT16", "UB", "LB")
_TABLE += [(name, None) for name in _WITHOUT_DTYPE]
for _name, _dtype in _TABLE:
    _define(_name, _dtype)
PREDEFINED["TWOINT"] = PREDEFINED["INT_INT"]
DATATYPE_NULL = PREDEFINED["DATATYPE_NULL"]

#: buffer-protocol format characters numpy spells otherwise
_FORMATS = {"Zf": "F", "Zd": "D", "Zg": "G"}


def datatype_of(dtype: np.dtype, call: str = "datatype") -> Datatype:
    """The predefined type of a numpy dtype (DOUBLE for float64, …)."""
    found = _BY_DTYPE.get(dtype)
    if found is None:
        raise mpi_exception(ERR_TYPE, f"{call}: no MPI datatype for numpy dtype {dtype}")
    return found


def from_typecode(code: str, call: str = "datatype") -> Datatype:
    """The predefined type of a typecode or buffer format (``'d'``, ``'i'``, ``'Zd'``, …)."""
    try:
        dtype = np.dtype(_FORMATS.get(code, code))
    except TypeError:
        raise mpi_exception(ERR_TYPE, f"{call}: unknown typecode {code!r}") from None
    return datatype_of(dtype, call)
