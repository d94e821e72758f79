"""mpi4py's buffer specifications, parsed into arrays of base elements.

Forms: ``buf`` (anything with the buffer protocol), ``[buf, datatype]``, ``[buf, count]``,
``[buf, count, datatype]``, ``[buf, (count, displ), datatype]``, ``[buf, count, displ,
datatype]``; for the v-collectives ``[buf, counts]``, ``[buf, (counts, displs)]``,
``[buf, counts, datatype]``, ``[buf, (counts, displs), datatype]``, ``[buf, counts, displs,
datatype]``. A datatype is a `Datatype` or a typecode (``'d'``). ``MPI.IN_PLACE`` is handled
by each call; ``MPI.BOTTOM`` (absolute addresses) is refused. Counts and displacements are
in elements of the datatype; the parsed forms give them in elements of its numpy base dtype.
A datatype with gaps gives a packed array registered with the call's `Stage`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError
from . import layouts
from .constants import BOTTOM, IN_PLACE
from .datatypes import Datatype, datatype_of, from_typecode
from .exceptions import ERR_TYPE, mpi_exception, not_implemented
from .layouts import Layout
from .staging import Stage

_ndarray = np.ndarray


class BufferSpecError(ArgumentError, TypeError):
    """A buffer specification mpi4py would not accept; names the argument and the form."""


def _error(call: str, argument: str, value: Any, reason: str,
           rank: int | None) -> BaseException:
    from .exceptions import mpi_error
    return mpi_error(BufferSpecError(call, argument, value, reason, rank))


def _datatype(value: Any, call: str, argument: str, rank: int | None) -> Datatype:
    if isinstance(value, Datatype):
        if not value:
            raise _error(call, argument, value, "the datatype is null or freed", rank)
        if not value.committed:
            raise mpi_exception(ERR_TYPE, f"{call}: {argument}: the datatype {value!r} is not "
                                "committed (call its Commit() first)")
        return value
    if isinstance(value, str):
        return from_typecode(value, call)
    raise _error(call, argument, value, "expected a Datatype or a typecode string", rank)


def _array(buf: Any, call: str, argument: str, rank: int | None, writable: bool) -> np.ndarray:
    """``buf`` as a 1-D array viewing its memory (its own dtype, or bytes)."""
    if buf is BOTTOM:
        raise _error(call, argument, buf, "MPI.BOTTOM (absolute addresses) is not supported "
                     "by collops.MPI: pass the buffer itself", rank)
    if buf is IN_PLACE:
        raise _error(call, argument, buf, "MPI.IN_PLACE is not allowed here", rank)
    if type(buf) is np.ndarray:
        arr = buf
    elif buf is None:  # an empty message, as in mpi4py
        arr = np.empty(0, np.uint8)
    elif hasattr(buf, "__dlpack__") and not isinstance(buf, np.ndarray):
        arr = _from_dlpack(buf, call, argument, rank)
    elif hasattr(buf, "__cuda_array_interface__"):
        raise _error(call, argument, type(buf).__name__, "device (GPU) buffers are not "
                     "supported by collops.MPI", rank)
    else:
        try:
            arr = np.asarray(memoryview(buf))
        except (TypeError, ValueError, NotImplementedError):
            raise _error(call, argument, type(buf).__name__, "expected a buffer (an array, "
                         "bytes, bytearray, memoryview…) or a list [buf, count, displ, "
                         "datatype]", rank) from None
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        raise _error(call, argument, arr.shape, "the buffer is not contiguous", rank)
    if writable and not arr.flags.writeable:
        raise _error(call, argument, type(buf).__name__, "a receive buffer must be writeable",
                     rank)
    return arr.ravel(order="K")


class _DLTensor(ctypes.Structure):
    """DLPack's ``DLTensor`` (dlpack.h), the head of ``DLManagedTensor``."""

    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


#: DLPack type codes -> numpy kinds (int, uint, float, complex, bool)
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}
_KDL_CPU = 1


def _from_dlpack(buf: Any, call: str, argument: str, rank: int | None) -> np.ndarray:
    """A host DLPack tensor's memory as an array (read from the capsule, as mpi4py does: the
    memory is the caller's, writeable, and stays alive while the array holds the capsule)."""
    capsule = buf.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    try:
        address = get(capsule, b"dltensor")
    except ValueError:
        raise _error(call, argument, type(buf).__name__, "not an unversioned DLPack tensor",
                     rank) from None
    tensor = _DLTensor.from_address(address)
    kind, bits = _DL_KINDS.get(tensor.code), tensor.bits
    if kind == "f" and tensor.lanes == 2:  # a complex as two lanes of its float
        kind, bits = "c", 2 * bits
    shape = [tensor.shape[i] for i in range(tensor.ndim)]
    count = int(np.prod(shape)) if shape else 1
    if tensor.device_type != _KDL_CPU or kind is None or tensor.lanes not in (1, 2):
        raise _error(call, argument, type(buf).__name__, "only host (CPU) DLPack tensors of "
                     "numbers are supported", rank)
    if tensor.strides and count > 1:
        expected = np.cumprod([1, *shape[:0:-1]])[::-1].tolist()
        if [tensor.strides[i] for i in range(tensor.ndim)] != expected:
            raise _error(call, argument, shape, "the buffer is not contiguous", rank)
    dtype = np.dtype("?" if kind == "b" else f"{kind}{bits // 8}")
    memory = (ctypes.c_char * (count * dtype.itemsize)).from_address(
        (tensor.data or 0) + tensor.byte_offset)
    memory._keep = capsule  # type: ignore[attr-defined]  # the capsule owns the memory
    return np.frombuffer(memory, dtype)  # type: ignore[call-overload, no-any-return]


def _typed(arr: np.ndarray, given: Datatype | None, call: str, argument: str,
           rank: int | None) -> tuple[np.ndarray, Datatype]:
    """``arr`` viewed as ``datatype``'s base dtype (its own dtype's type when None)."""
    if given is None:
        return arr, datatype_of(arr.dtype, call)
    datatype = given
    base = datatype.base
    assert base is not None
    if datatype.shift:
        raise _error(call, argument, datatype, "the datatype's elements are not on its base "
                     "type's boundaries (a Create_struct of absolute addresses): collops.MPI "
                     "takes such a type with MPI.BOTTOM in Alltoallw only", rank)
    if arr.dtype != base:
        if arr.nbytes % base.itemsize:
            raise _error(call, argument, arr.nbytes, f"the buffer's {arr.nbytes} bytes are not "
                         f"a whole number of {datatype.Get_name() or 'datatype'} elements", rank)
        arr = arr.view(np.uint8).view(base)
    return arr, datatype


def _parts(spec: Any, call: str, argument: str, rank: int | None, vector: bool = False
           ) -> tuple[Any, Any, Any, Datatype | None]:
    """``(buf, count, displ, datatype)`` of a spec (None where it does not say); in a
    v-collective's spec a list of counts is not a ``(count, displ)`` pair."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    n = len(spec)
    if n == 2:
        second = spec[1]
        if isinstance(second, (Datatype, str)):
            return spec[0], None, None, _datatype(second, call, argument, rank)
        if isinstance(second, (tuple, list)) and len(second) == 2 and not (
                vector and _is_counts(second)):
            return spec[0], second[0], second[1], None
        return spec[0], second, None, None
    if n == 3:
        middle = spec[1]
        if isinstance(middle, (tuple, list)) and len(middle) == 2 and not (
                vector and _is_counts(middle)):
            return spec[0], middle[0], middle[1], _datatype(spec[2], call, argument, rank)
        return spec[0], middle, None, _datatype(spec[2], call, argument, rank)
    if n == 4:
        return spec[0], spec[1], spec[2], _datatype(spec[3], call, argument, rank)
    raise _error(call, argument, f"a {type(spec).__name__} of {n} items", "a buffer "
                 "specification has 2 to 4 items: [buf, datatype], [buf, count, datatype], "
                 "[buf, (count, displ), datatype], [buf, count, displ, datatype]", rank)


def _is_counts(pair: Sequence[Any]) -> bool:
    """Whether a 2-item sequence is a list of two counts rather than ``(count(s), displ(s))``
    (a tuple whose first item is itself a sequence, or None, is the latter)."""
    return isinstance(pair, list) and all(isinstance(v, (int, np.integer)) for v in pair)


def _integer(value: Any, call: str, argument: str, rank: int | None) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if value < 0:
            raise _error(call, argument, value, "counts and displacements must not be "
                         "negative", rank)
        return int(value)
    raise _error(call, argument, value, "expected an integer count or displacement", rank)


def _fast_array(spec: Any) -> np.ndarray | None:
    """The array of the commonest specs — an ndarray, ``[ndarray, its own predefined
    type]`` — or None (then `message` parses the spec in full)."""
    if type(spec) is list and len(spec) == 2:
        arr, datatype = spec
        if type(arr) is np.ndarray and type(datatype) is Datatype and (
                datatype.exact is arr.dtype):
            return arr
        return None
    return spec if type(spec) is np.ndarray else None


def _elements(arr: np.ndarray, writable: bool) -> int:
    """`_specs.elements` in Python: ``arr``'s size if it is 1-D and C-contiguous (and
    writeable when asked), else -1."""
    if arr.ndim == 1 and arr.flags.c_contiguous and (arr.flags.writeable or not writable):
        return arr.size
    return -1


def _fast_vector(spec: Any, size: int, writable: bool
                 ) -> tuple[np.ndarray, Layout, np.ndarray] | None:
    """The array, remembered `Layout` and (for a receive, ``writable``) ``out`` array (its
    first `Layout.placed` elements) of a v-collective's commonest specs — ``[ndarray,
    (counts, displs), its own predefined type]``, ``[ndarray, counts, displs, type]`` and
    ``[ndarray, counts ndarray, type]`` — when their counts and displacements were checked
    before and still hold the same values, and the buffer (1-D, contiguous, writeable if
    ``writable``) holds every block; else None (then `vector` parses the spec in full)."""
    if type(spec) is not list and type(spec) is not tuple:
        return None
    n = len(spec)
    if n == 3:
        buf, middle, datatype = spec
        if type(middle) is tuple and len(middle) == 2:
            counts, displs = middle
        elif type(middle) is _ndarray:
            counts, displs = middle, None
        else:
            return None
    elif n == 4:
        buf, counts, displs, datatype = spec
    else:
        return None
    if type(buf) is not _ndarray or type(datatype) is not Datatype or (
            datatype.exact is not buf.dtype):
        return None
    layout = layouts.find(counts, displs, size, 1)
    if layout is None or _elements(buf, writable) < layout.end:
        return None
    n = layout.placed
    return buf, layout, buf if not writable or buf.size == n else buf[:n]


def _alltoallv_args(sendspec: Any, recvspec: Any, size: int
                    ) -> tuple[np.ndarray, Any, Any, Any, Any, np.ndarray] | None:
    """What collops' ``alltoallv`` takes (``x, sendcounts, sdispls, recvcounts``, then
    ``rdispls`` and ``out``) for two specs of `_fast_vector`'s forms, or None."""
    sent = _fast_vector(sendspec, size, False)
    received = None if sent is None else _fast_vector(recvspec, size, True)
    if received is None:
        return None
    assert sent is not None
    slayout, rlayout = sent[1], received[1]
    return (sent[0], slayout.counts, slayout.displs, rlayout.counts, rlayout.placed_displs,
            received[2])


def _allgatherv_args(sendspec: Any, recvspec: Any, size: int
                     ) -> tuple[np.ndarray, Any, Any, np.ndarray] | None:
    """What collops' ``allgatherv`` takes (``x, counts``, then ``displs`` and ``out``) for a
    plain send array (`_fast_array`'s forms, 1-D) and a receive spec of `_fast_vector`'s
    forms, or None."""
    x = _fast_array(sendspec)
    if x is None or _elements(x, False) < 0:
        return None
    found = _fast_vector(recvspec, size, True)
    if found is None:
        return None
    return x, found[1].counts, found[1].placed_displs, found[2]


def _plain_pair(sendspec: Any, recvspec: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The arrays of two specs of `_fast_array`'s forms, both 1-D and C-contiguous and the
    second writeable (what the regular collectives' fast paths pass collops), or None."""
    x, out = _fast_array(sendspec), _fast_array(recvspec)
    if x is None or out is None or _elements(x, False) < 0 or _elements(out, True) < 0:
        return None
    return x, out


def _agrees(elements: Any) -> bool:
    """Whether a compiled `elements` (which reads numpy's array head) gives numpy's answers."""
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    probes: list[np.ndarray] = [np.zeros(3), np.zeros((2, 2)), np.zeros(6)[::2],
                                np.zeros(0, np.int32), np.zeros(4, np.uint8)[1:], frozen]
    return all(elements(a, w) == _elements(a, w) for a in probes for w in (False, True))


if layouts._specs is not None:
    layouts._specs.configure(np.ndarray, Datatype, layouts._memo, layouts.Layout)

#: the compiled checks (`_specs`), when built and in agreement with numpy; else None
compiled = layouts._specs if layouts._specs is not None and _agrees(
    layouts._specs.elements) else None
if compiled is None:  # pragma: no cover - a build without a C compiler
    fast_array, elements, fast_vector = _fast_array, _elements, _fast_vector
    alltoallv_args, allgatherv_args = _alltoallv_args, _allgatherv_args
    plain_pair = _plain_pair
else:
    fast_array, elements = layouts._specs.array, layouts._specs.elements
    fast_vector, alltoallv_args = layouts._specs.fast_vector, layouts._specs.alltoallv_args
    allgatherv_args = layouts._specs.allgatherv_args
    plain_pair = layouts._specs.plain_pair


def message(spec: Any, call: str, argument: str, rank: int | None,
            writable: bool, blocks: int = 1, stage: Stage | None = None
            ) -> tuple[np.ndarray, Datatype]:
    """A spec's data as a 1-D array of base elements, and its type. For a collective's buffer
    of ``blocks`` blocks (one per rank: gather's receive, scatter's send, …) a spec's count is
    per block, as in mpi4py; without one the buffer must split into ``blocks`` equal blocks.
    A datatype with gaps gives a packed array of ``stage`` (`Stage.add`)."""
    if type(spec) is np.ndarray and spec.ndim == 1 and spec.flags.c_contiguous and (
            spec.flags.writeable or not writable):
        return spec, datatype_of(spec.dtype, call)
    buf, count, displ, given = _parts(spec, call, argument, rank)
    arr, datatype = _typed(_array(buf, call, argument, rank, writable), given, call,
                           argument, rank)
    if count is None and displ is None and datatype.multiplier == 1 and blocks == 1 and (
            not datatype.gaps):
        return arr, datatype
    step = datatype.tmap.span
    first = 0 if displ is None else _integer(displ, call, argument, rank)
    if count is None:
        entries = (arr.size - first * step) // step if step else 0
        if blocks > 1 and entries % blocks:
            raise _error(call, argument, entries, f"cannot infer the count: {entries} entries "
                         f"do not split into {blocks} blocks", rank)
        n = entries // blocks * blocks
    else:
        n = _integer(count, call, argument, rank) * blocks
    if datatype.gaps:
        return _staged(arr, n, first, datatype, stage, call, argument, rank, writable), datatype
    start = first * step
    stop = start + n * step
    if stop > arr.size:
        raise _error(call, argument, (n, displ), f"count {n} from displacement {displ or 0} "
                     f"goes beyond the buffer's {arr.size // step} elements", rank)
    return arr[start:stop], datatype


def _staged(arr: np.ndarray, count: int, first: int, datatype: Datatype, stage: Stage | None,
            call: str, argument: str, rank: int | None, writable: bool,
            blocks: list[tuple[int, int]] | None = None) -> np.ndarray:
    """The packed array of ``count`` elements of a gapped ``datatype`` from element
    ``first`` of ``arr`` (or of each ``(count, first)`` of ``blocks``), added to ``stage``."""
    if stage is None:
        raise not_implemented("a datatype with gaps in this buffer argument", call)
    parts = [datatype.positions(n, at) for n, at in blocks or [(count, first)]]
    positions = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if positions.size and (int(positions.min()) < 0 or int(positions.max()) >= arr.size):
        raise _error(call, argument, (count, first), f"the datatype's elements reach "
                     f"[{int(positions.min())}, {int(positions.max())}], beyond the buffer's "
                     f"{arr.size} base elements", rank)
    return stage.add(arr, positions, writable)


def vector(spec: Any, size: int, call: str, argument: str, rank: int | None,
           writable: bool, stage: Stage | None = None
           ) -> tuple[np.ndarray, list[int], list[int], Datatype]:
    """A v-collective's spec: the whole buffer (base elements), each rank's count and
    displacement in base elements, and the type. Counts default to equal blocks, displacements
    to the counts' prefix sums. A datatype with gaps gives a packed array of ``stage`` holding
    the blocks back to back."""
    buf, counts, displs, given = _parts(spec, call, argument, rank, vector=True)
    arr, datatype = _typed(_array(buf, call, argument, rank, writable), given, call,
                           argument, rank)
    step = datatype.tmap.span
    counts_of, displs_of = counts, displs  # the caller's objects, which the memo keys on
    if not datatype.gaps:
        layout = layouts.find(counts_of, displs_of, size, step)
        if layout is not None and layout.end <= arr.size:
            return arr, layout.counts, layout.displs, datatype
    if counts is None:
        if not step or (arr.size // step) % size:
            raise _error(call, argument, arr.size // max(step, 1), f"no counts given and the "
                         f"buffer's {arr.size // max(step, 1)} elements do not split equally "
                         f"over {size} ranks", rank)
        counts = [arr.size // step // size] * size
    elif isinstance(counts, (int, np.integer)):
        counts = [int(counts)] * size
    counts = integers(counts, size, call, argument, rank)
    if displs is None:
        displs = [sum(counts[:r]) for r in range(size)]
    elif isinstance(displs, (int, np.integer)):  # a stride: block r at r * displs
        displs = [int(displs) * r for r in range(size)]
    displs = integers(displs, size, call, argument, rank)
    per = datatype.multiplier
    if datatype.gaps:
        packed = _staged(arr, 0, 0, datatype, stage, call, argument, rank, writable,
                         list(zip(counts, displs, strict=True)))
        return packed, [c * per for c in counts], [sum(counts[:r]) * per
                                                   for r in range(size)], datatype
    for r in range(size):
        if (displs[r] + counts[r]) * step > arr.size:
            raise _error(call, argument, (counts[r], displs[r]), f"rank {r}'s block "
                         f"[{displs[r]}:{displs[r] + counts[r]}] goes beyond the buffer's "
                         f"{arr.size // step} elements", rank)
    counts, displs = [c * step for c in counts], [d * step for d in displs]
    layouts.remember(counts_of, displs_of, size, step, counts, displs)
    return arr, counts, displs, datatype


def integers(values: Any, size: int, call: str, argument: str, rank: int | None) -> list[int]:
    """``size`` non-negative integers (counts or displacements, one per rank), checked."""
    try:
        items = list(values)
    except TypeError:
        raise _error(call, argument, values, "expected a sequence of counts or displacements",
                     rank) from None
    if len(items) != size:
        raise _error(call, argument, values, f"needs one entry per rank ({size})", rank)
    return [_integer(v, call, argument, rank) for v in items]


def is_contiguous_blocks(counts: Sequence[int], displs: Sequence[int]) -> bool:
    """Whether blocks at ``displs`` follow one another in rank order from offset 0."""
    at = 0
    for c, d in zip(counts, displs, strict=True):
        if d != at:
            return False
        at += c
    return True
