"""mpi4py's predefined datatypes over numpy dtypes, and derived types over one of them.

A `Datatype` is a numpy base dtype and the positions of an element's base elements
(`typemaps.TypeMap`): a predefined type is one base element, ``Create_contiguous(n)`` of it
``n`` in a row — *dense* types, whose buffers are used in place as arrays of the base dtype.
Types with gaps (``Create_vector``, ``Create_indexed``, ``Create_indexed_block``,
``Create_subarray``, their ``h`` forms, ``Create_struct`` of one base type,
``Create_resized``) are moved through a packed copy (`staging`). Every count the facade hands
collops is in base elements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..datatypes import pair_dtype
from . import typemaps
from .exceptions import ERR_TYPE, mpi_exception, not_implemented
from .handles import Handle
from .typemaps import ORDER_C, TypeMap

#: position arrays a type keeps for the (count, first) it was used with last
_POSITIONS_KEPT = 8


class Datatype(Handle):
    """An MPI datatype: ``base`` numpy dtype and the type map of one element (`TypeMap`)."""

    __slots__ = ("base", "multiplier", "_name", "predefined", "committed", "freed", "exact",
                 "tmap", "gaps", "_positions", "shift", "_identity", "__weakref__")
    base: np.dtype | None
    #: ``base`` when one element is one base element (and the type is usable), else None:
    #: the one comparison the fast path of ``[array, datatype]`` makes
    exact: np.dtype | None
    #: base elements in one element of the type (its size)
    multiplier: int
    _name: str
    predefined: bool
    committed: bool
    freed: bool
    tmap: TypeMap
    #: whether the type's elements are not a dense run (`typemaps.is_dense`): staged
    gaps: bool
    #: what every handle of this type shares (its copies are equal to it); None when null
    _identity: object | None
    #: bytes every element's data lies past its base-element positions (0 but for a
    #: `Create_struct` of absolute addresses not on base-element boundaries: used with
    #: ``MPI.BOTTOM`` only)
    shift: int

    def __init__(self, datatype: Datatype | None = None) -> None:
        """A new handle of ``datatype`` (DATATYPE_NULL when None), as mpi4py's constructor."""
        self._set(None if datatype is None else datatype.base,
                  typemaps.dense(1) if datatype is None else datatype.tmap,
                  "" if datatype is None else datatype._name,
                  False if datatype is None else datatype.predefined)
        self.committed = True if datatype is None else datatype.committed
        self.shift = 0 if datatype is None else datatype.shift
        self._identity = None if datatype is None else datatype._identity

    def _set(self, base: np.dtype | None, tmap: TypeMap, name: str, predefined: bool) -> None:
        self.base, self.tmap, self._name, self.predefined = base, tmap, name, predefined
        self.multiplier = int(tmap.offsets.size)
        self.gaps = not typemaps.is_dense(tmap)
        self.freed = False
        self.exact = base if self.multiplier == 1 and not self.gaps else None
        self._positions: dict[tuple[int, int], np.ndarray] = {}
        self.shift = 0

    @classmethod
    def _make(cls, base: np.dtype | None, tmap: TypeMap, name: str,
              predefined: bool) -> Datatype:
        new = cls()
        new._set(base, tmap, name, predefined)
        new._identity = object()
        new.committed = predefined
        if not predefined:  # the fast path takes committed types only (`Commit`)
            new.exact = None
        return new

    def __repr__(self) -> str:
        return f"<collops.MPI.Datatype {self._name or 'derived'}>"

    def __bool__(self) -> bool:
        return self.base is not None and not self.freed

    def _handle(self) -> Any:
        """What identifies the type (None when null): every copy of a handle shares it."""
        return self._identity if self.base is not None else None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        return self._identity is other._identity or (self.predefined and other.predefined
                                                     and self._name == other._name)

    def __hash__(self) -> int:
        return hash(self._name) if self.predefined else id(self._identity)

    def _checked(self, call: str) -> np.dtype:
        if self.base is None or self.freed:
            raise mpi_exception(ERR_TYPE, f"{call}: invalid datatype {self!r}")
        return self.base

    def positions(self, count: int, first: int) -> np.ndarray:
        """Where ``count`` elements from element ``first`` of a buffer have their base
        elements (`typemaps.positions`), kept for the next call with the same arguments."""
        key = (count, first)
        found = self._positions.get(key)
        if found is None:
            if len(self._positions) >= _POSITIONS_KEPT:
                self._positions.clear()
            found = self._positions[key] = typemaps.positions(self.tmap, count, first)
        return found

    def Get_size(self) -> int:
        """Bytes of data in one element of this type."""
        return self._checked("Get_size").itemsize * self.multiplier

    def Get_extent(self) -> tuple[int, int]:
        """``(lb, extent)`` in bytes."""
        itemsize = self._checked("Get_extent").itemsize
        return self.tmap.lower * itemsize + self.shift, self.tmap.span * itemsize

    def Get_true_extent(self) -> tuple[int, int]:
        """``(true_lb, true_extent)``: the bytes the data itself spans."""
        itemsize = self._checked("Get_true_extent").itemsize
        offsets = self.tmap.offsets
        if not offsets.size:
            return 0, 0
        low = int(offsets.min())
        return low * itemsize + self.shift, (int(offsets.max()) + 1 - low) * itemsize

    @property
    def size(self) -> int:
        """`Get_size`."""
        return self.Get_size()

    @property
    def extent(self) -> int:
        """The extent in bytes."""
        return self.Get_extent()[1]

    @property
    def lb(self) -> int:
        """The lower bound in bytes."""
        return self.Get_extent()[0]

    @property
    def ub(self) -> int:
        """The upper bound in bytes (lb + extent)."""
        lb, extent = self.Get_extent()
        return lb + extent

    @property
    def true_lb(self) -> int:
        """The true lower bound in bytes."""
        return self.Get_true_extent()[0]

    @property
    def true_extent(self) -> int:
        """The true extent in bytes."""
        return self.Get_true_extent()[1]

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
        return base.char if self.exact is not None else ""

    def tocode(self) -> str:
        """`typechar`."""
        return self.typechar

    @classmethod
    def fromcode(cls, code: str) -> Datatype:
        """The predefined type of a typecode (``'d'`` → DOUBLE)."""
        return from_typecode(code, "Datatype.fromcode")

    def Commit(self) -> Datatype:
        """Make the type usable in communication (a derived type must be committed)."""
        base = self._checked("Commit")
        self.committed = True
        self.exact = base if self.multiplier == 1 and not self.gaps else None
        return self

    def Free(self) -> None:
        """Free a derived type (predefined ones cannot be freed)."""
        if self.predefined:
            raise mpi_exception(ERR_TYPE, f"Free: cannot free predefined {self._name}")
        self.freed = True
        self.exact = None

    def Dup(self) -> Datatype:
        """A new type with the same type map (committed if this one is)."""
        self._checked("Dup")
        new = Datatype._make(self.base, self.tmap, self._name, False)
        new.shift = self.shift
        return new.Commit() if self.committed else new

    Create_dup = Dup

    # -- constructors ----------------------------------------------------------------------
    def _derived(self, call: str, build: Any, *args: Any) -> Datatype:
        base = self._checked(call)
        new = Datatype._make(base, build(self.tmap, *args, call), "", False)
        new.shift = self.shift  # its copies are whole elements apart
        return new

    def _elements(self, nbytes: Any, call: str, what: str) -> int:
        return typemaps.elements(nbytes, self._checked(call).itemsize, call, what)

    def Create_contiguous(self, count: int) -> Datatype:
        """``count`` elements of this type, one after another."""
        return self._derived("Create_contiguous", typemaps.contiguous, count)

    def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """``count`` blocks of ``blocklength`` elements, ``stride`` elements apart."""
        stride = typemaps._integer(stride, "Create_vector", "stride") * self.tmap.span
        return self._derived("Create_vector", typemaps.vector, count, blocklength, stride)

    def Create_hvector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """`Create_vector` with the stride in bytes."""
        stride = self._elements(stride, "Create_hvector", "stride")
        return self._derived("Create_hvector", typemaps.vector, count, blocklength, stride)

    def Create_indexed(self, blocklengths: Sequence[int],
                       displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklengths`` elements at ``displacements`` (in elements)."""
        span = self.tmap.span
        starts = [typemaps._integer(d, "Create_indexed", "displacements") * span
                  for d in displacements]
        return self._derived("Create_indexed", typemaps.indexed, blocklengths, starts)

    def Create_hindexed(self, blocklengths: Sequence[int],
                        displacements: Sequence[int]) -> Datatype:
        """`Create_indexed` with displacements in bytes."""
        starts = [self._elements(d, "Create_hindexed", "displacement") for d in displacements]
        return self._derived("Create_hindexed", typemaps.indexed, blocklengths, starts)

    def Create_indexed_block(self, blocklength: int,
                             displacements: Sequence[int]) -> Datatype:
        """Blocks of ``blocklength`` elements at ``displacements`` (in elements)."""
        return self.Create_indexed([blocklength] * len(displacements), displacements)

    def Create_hindexed_block(self, blocklength: int,
                              displacements: Sequence[int]) -> Datatype:
        """`Create_indexed_block` with displacements in bytes."""
        return self.Create_hindexed([blocklength] * len(displacements), displacements)

    def Create_subarray(self, sizes: Sequence[int], subsizes: Sequence[int],
                        starts: Sequence[int], order: int = ORDER_C) -> Datatype:
        """The block ``subsizes`` at ``starts`` of an array of ``sizes`` of this type."""
        return self._derived("Create_subarray", typemaps.subarray, sizes, subsizes, starts,
                             order)

    def Create_resized(self, lb: int, extent: int) -> Datatype:
        """The same data with lower bound ``lb`` and extent ``extent`` (bytes)."""
        lower = self._elements(lb, "Create_resized", "lower bound")
        span = self._elements(extent, "Create_resized", "extent")
        return self._derived("Create_resized", typemaps.resized, lower, span)

    @classmethod
    def Create_struct(cls, blocklengths: Sequence[int], displacements: Sequence[int],
                      datatypes: Sequence[Datatype]) -> Datatype:
        """Blocks of ``blocklengths`` elements of ``datatypes`` at byte ``displacements``
        (every type of one base dtype: collops moves one dtype per message)."""
        call = "Create_struct"
        bases = {t._checked(call) for t in datatypes}
        if len(bases) > 1:
            raise not_implemented("a struct of several base types", f"Datatype.{call}")
        if not (len(blocklengths) == len(displacements) == len(datatypes)) or not bases:
            raise mpi_exception(ERR_TYPE, f"{call}: needs one block length, displacement "
                                "and datatype per block, at least one")
        base = bases.pop()
        copies, shifts = [], set()
        for length, displacement, t in zip(blocklengths, displacements, datatypes,
                                           strict=True):
            # absolute addresses (``Get_address``, for ``MPI.BOTTOM``) need not fall on
            # base-element boundaries: what is over one is the type's `shift`
            at = typemaps._integer(displacement, call, "displacement") + t.shift
            shifts.add(at % base.itemsize)
            start = typemaps.elements(at - at % base.itemsize, base.itemsize, call,
                                      "displacement")
            copies.append((t.tmap, typemaps._ranges([start], typemaps._counts(
                [length], call, "blocklengths"), t.tmap.span)))
        if len(shifts) > 1:
            raise not_implemented("a struct whose blocks lie at different byte offsets from "
                                  "base-element boundaries", f"Datatype.{call}")
        new = Datatype._make(base, typemaps.laid_out(copies), "", False)
        new.shift = shifts.pop()
        return new

    def __getattr__(self, name: str) -> Any:
        if name.startswith("Create_") or name in ("Pack", "Unpack", "Pack_size",
                                                    "Get_envelope", "Get_contents"):
            raise not_implemented("this datatype constructor or query", f"Datatype.{name}")
        raise AttributeError(name)


PREDEFINED: dict[str, Datatype] = {}
_BY_DTYPE: dict[np.dtype, Datatype] = {}


def _define(name: str, dtype: Any) -> Datatype:
    datatype = Datatype._make(None if dtype is None else np.dtype(dtype), typemaps.dense(1),
                              f"MPI_{name}", True)
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
