"""mpi4py's uppercase collectives (buffers) over collops' own, blocking, ``I…`` and ``…_init``.

Each collective is planned once per call (`forms.Call`: the collops method, its arguments, a
``before`` step copying an in-place buffer where collops needs a separate one) and run in
one of three modes by `Collectives._run`; the v-collectives hand their displacements to
collops (``displs``/``rdispls``), which places the blocks itself. The ``I…`` and
``…_init`` methods are made from the blocking ones (`forms.forms`). The commonest forms
(plain 1-D numpy arrays, a usable operator) skip the planning: their fast paths call
collops directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CollopsError
from ..runtime.arguments import rows_spanned
from .alltoallw import alltoallw_call
from .buffers import (
    allgatherv_args,
    alltoallv_args,
    elements,
    fast_array,
    fast_vector,
    integers,
    is_contiguous_blocks,
    message,
    plain_pair,
    vector,
)
from .constants import IN_PLACE
from .exceptions import mpi_error
from .forms import BLOCKING, MISSED, NONBLOCKING, Call, forms, staged
from .operators import SUM, Op, as_op
from .requests import Prequest, Request, new_request
from .staging import Stage

_ndarray = np.ndarray


def _in_place(buf: Any) -> bool:
    """Whether a buffer argument means MPI_IN_PLACE (``IN_PLACE`` or None, as in mpi4py)."""
    return buf is IN_PLACE or buf is None


def _copier(dst: np.ndarray, src: np.ndarray) -> Callable[[], None]:
    def copy() -> None:
        dst[...] = src
    return copy


def _displaced(arr: np.ndarray, counts: list[int], displs: list[int],
               name: str = "displs") -> dict[str, Any]:
    """The ``out`` and displacements keywords of a v-collective receiving blocks of
    ``counts`` at ``displs`` of ``arr`` (collops places them; back to back: no
    displacements, the call's commonest and fastest form)."""
    if is_contiguous_blocks(counts, displs):
        return {"out": arr[:sum(counts)]}
    return {"out": arr[:rows_spanned(displs, counts)], name: displs}


class Collectives:
    """The buffer collectives of `Comm` (``self._comm`` is the collops communicator)."""

    _comm: Any

    def _run(self, call: Call, mode: int) -> Any:
        comm = self._comm
        stage = call.stage
        before = call.before if not stage else stage.before(call.before)
        try:
            if mode == BLOCKING:
                if before is not None:
                    before()
                getattr(comm, call.name)(*call.args, **call.kwargs)
                if stage:
                    stage.unpack()
                return None
            finish = None if not stage else stage.finisher()
            if mode == NONBLOCKING:
                if before is not None:
                    before()
                return Request(getattr(comm, "i" + call.name)(*call.args, **call.kwargs),
                               finish)
            persistent = getattr(comm, call.name + "_init")(*call.args, **call.kwargs)

            def start() -> Any:
                if before is not None:
                    before()
                persistent.start()
                return persistent
            return Prequest(start, finish)
        except CollopsError as exc:
            raise mpi_error(exc) from None

    def _recv(self, buf: Any, call: str, stage: Stage, blocks: int = 1) -> np.ndarray:
        return message(buf, call, "recvbuf", self._comm.rank, True, blocks, stage)[0]

    def _send(self, buf: Any, call: str, stage: Stage, blocks: int = 1) -> np.ndarray:
        return message(buf, call, "sendbuf", self._comm.rank, False, blocks, stage)[0]

    # -- barrier and broadcast -------------------------------------------------------------
    def Barrier(self) -> None:
        """Block until every rank has called Barrier."""
        try:
            self._comm.barrier()
        except CollopsError as exc:
            raise mpi_error(exc) from None

    @staged
    def _bcast(self, buf: Any, root: int, call: str, *, stage: Stage) -> Call:
        arr = message(buf, call, "buf", self._comm.rank, self._comm.rank != root, 1,
                      stage)[0]
        return Call("bcast", (arr, root), {"out": arr})

    def _fast_bcast(self, method: Callable[..., Any], buf: Any, root: int = 0) -> Any:
        """Bcast started by collops' ``method`` when ``buf`` is a plain array (in place on
        every rank, as MPI's); else `MISSED`."""
        arr = buf if type(buf) is _ndarray else fast_array(buf)
        if arr is None:
            return MISSED
        return method(arr, root, out=arr)

    def Bcast(self, buf: Any, root: int = 0) -> None:
        """The root's ``buf`` into every rank's ``buf``."""
        arr = buf if type(buf) is _ndarray else fast_array(buf)
        if arr is not None:
            try:
                self._comm.bcast(arr, root, out=arr)
                return
            except CollopsError as exc:
                raise mpi_error(exc) from None
        self._run(self._bcast(buf, root, "Bcast"), BLOCKING)

    # -- reductions --------------------------------------------------------------------------
    @staged
    def _reduction(self, name: str, sendbuf: Any, recvbuf: Any, op: Any, call: str,
                   root: int | None = None, *, stage: Stage) -> Call:
        out = self._recv(recvbuf, call, stage)
        x = out if _in_place(sendbuf) else self._send(sendbuf, call, stage)
        args = (x, as_op(op, call)) if root is None else (x, as_op(op, call), root)
        return Call(name, args, {"out": out})

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """The reduction of every rank's ``sendbuf`` into every ``recvbuf``."""
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if x is not None and out is not None and type(op) is Op and op.op is not None:
            try:
                self._comm.allreduce(x, op.op, out=out)
                return
            except CollopsError as exc:
                raise mpi_error(exc) from None
        self._run(self._reduction("allreduce", sendbuf, recvbuf, op, "Allreduce"), BLOCKING)

    @staged
    def _reduce(self, sendbuf: Any, recvbuf: Any, op: Any, root: int, call: str, *,
                stage: Stage) -> Call:
        if self._comm.rank == root:
            return self._reduction("reduce", sendbuf, recvbuf, op, call, root)
        return Call("reduce", (self._send(sendbuf, call, stage), as_op(op, call), root), {})

    def _fast_allreduce(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                        op: Op = SUM) -> Any:
        """Iallreduce started by collops' ``method`` when both buffers are plain arrays and
        ``op`` a predefined operator (as `Allreduce` runs them); else `MISSED`."""
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if x is None or out is None or type(op) is not Op or op.op is None:
            return MISSED
        return method(x, op.op, out=out)

    def _fast_reduce(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                     op: Op = SUM, root: int = 0) -> Any:
        """Ireduce started by collops' ``method`` as `Reduce` runs it; else `MISSED`."""
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if x is None or (out is None and recvbuf is not None) or type(op) is not Op \
                or op.op is None:  # (a null or freed operator: the general path says so)
            return MISSED
        return method(x, op.op, root, out=out if self._comm.rank == root else None)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> None:
        """The reduction of every rank's ``sendbuf`` into the root's ``recvbuf``."""
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if x is not None and (out is not None or recvbuf is None) and type(op) is Op \
                and op.op is not None:
            try:
                self._comm.reduce(x, op.op, root, out=out if self._comm.rank == root else None)
                return
            except CollopsError as exc:
                raise mpi_error(exc) from None
        self._run(self._reduce(sendbuf, recvbuf, op, root, "Reduce"), BLOCKING)

    @staged
    def _scan(self, name: str, sendbuf: Any, recvbuf: Any, op: Any, call: str, *,
              stage: Stage) -> Call:
        out = self._recv(recvbuf, call, stage)
        x = out.copy() if _in_place(sendbuf) else self._send(sendbuf, call, stage)
        before = _copier(x, out) if _in_place(sendbuf) else None
        return Call(name, (x, as_op(op, call)), {"out": out}, before)

    def _fast_paired(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                     op: Op = SUM) -> Any:
        """A reduction of one send and one receive buffer (`Scan`, `Exscan`,
        `Reduce_scatter_block`) started by collops' ``method`` when both buffers are plain
        (1-D) and ``op`` a usable facade operator (not null nor freed); else `MISSED`."""
        pair = plain_pair(sendbuf, recvbuf)
        if pair is None or type(op) is not Op or op.op is None:
            return MISSED
        return method(pair[0], op.op, out=pair[1])

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Inclusive prefix reduction into ``recvbuf``."""
        try:
            if self._fast_paired(self._comm.scan, sendbuf, recvbuf, op) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._scan("scan", sendbuf, recvbuf, op, "Scan"), BLOCKING)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Exclusive prefix reduction into ``recvbuf`` (rank 0's is left as it is)."""
        try:
            if self._fast_paired(self._comm.exscan, sendbuf, recvbuf, op) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._scan("exscan", sendbuf, recvbuf, op, "Exscan"), BLOCKING)

    @staged
    def _reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any, call: str, *,
                              stage: Stage) -> Call:
        size = self._comm.size
        if _in_place(sendbuf):
            full = self._recv(recvbuf, call, stage, size)
            x = full.copy()
            return Call("reduce_scatter_block", (x, as_op(op, call)),
                         {"out": full[:full.size // size]}, _copier(x, full))
        return Call("reduce_scatter_block",
                     (self._send(sendbuf, call, stage, size), as_op(op, call)),
                     {"out": self._recv(recvbuf, call, stage)})

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        """Block ``rank`` of the reduction of every rank's ``sendbuf``, into ``recvbuf``."""
        try:
            if self._fast_paired(self._comm.reduce_scatter_block, sendbuf,
                                               recvbuf, op) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._reduce_scatter_block(sendbuf, recvbuf, op, "Reduce_scatter_block"),
                  BLOCKING)

    @staged
    def _reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any,
                        call: str, *, stage: Stage) -> Call:
        comm = self._comm
        full, datatype = message(recvbuf, call, "recvbuf", comm.rank, True, 1, stage)
        if recvcounts is None:  # every rank's receive count, as mpi4py gathers them
            counts = [int(c) for c in comm.allgather_object(full.size)]
        else:
            counts = [c * datatype.multiplier
                      for c in integers(recvcounts, comm.size, call, "recvcounts", comm.rank)]
        if _in_place(sendbuf):
            x = full[:sum(counts)].copy()
            before: Callable[[], None] | None = _copier(x, full[:sum(counts)])
        else:
            x, before = self._send(sendbuf, call, stage), None
        return Call("reduce_scatter", (x, as_op(op, call), counts),
                     {"out": full[:counts[comm.rank]]}, before)

    def _fast_reduce_scatter(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                             recvcounts: Any = None, op: Op = SUM) -> Any:
        """Reduce_scatter started by collops' ``method`` when both buffers are plain (1-D),
        the counts a list or tuple (collops checks them) and this rank's block all of
        ``recvbuf``, and ``op`` a usable facade operator; else `MISSED` (counts not given are
        gathered by the general path)."""
        pair = plain_pair(sendbuf, recvbuf)
        counts_type = type(recvcounts)
        if pair is None or (counts_type is not list and counts_type is not tuple) \
                or type(op) is not Op or op.op is None:
            return MISSED
        out = pair[1]
        try:
            if recvcounts[self._comm.rank] != out.size:
                return MISSED
        except IndexError:  # too few counts: the general path says so
            return MISSED
        return method(pair[0], op.op, recvcounts, out=out)

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                       op: Op = SUM) -> None:
        """Block ``rank`` (``recvcounts`` elements each) of the reduction, into ``recvbuf``."""
        try:
            if self._fast_reduce_scatter(self._comm.reduce_scatter, sendbuf, recvbuf,
                                         recvcounts, op) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._reduce_scatter(sendbuf, recvbuf, recvcounts, op, "Reduce_scatter"),
                  BLOCKING)

    # -- gather, scatter, allgather, alltoall -------------------------------------------------
    @staged
    def _gather(self, sendbuf: Any, recvbuf: Any, root: int, call: str, *,
                stage: Stage) -> Call:
        comm = self._comm
        if comm.rank != root:
            return Call("gather", (self._send(sendbuf, call, stage), root), {})
        full = self._recv(recvbuf, call, stage, comm.size)
        n = full.size // comm.size
        x = full[comm.rank * n:(comm.rank + 1) * n] if _in_place(sendbuf) else \
            self._send(sendbuf, call, stage)
        return Call("gather", (x, root), {"out": full})

    def _fast_gather(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                     root: int = 0) -> Any:
        """Gather started by collops' ``method`` when its buffers are plain (the root's
        ``sendbuf`` not `IN_PLACE`); else `MISSED`."""
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        if x is None or elements(x, False) < 0:
            return MISSED
        if self._comm.rank != root:
            return method(x, root)
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if out is None or elements(out, True) < 0:
            return MISSED
        return method(x, root, out=out)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Every rank's ``sendbuf``, in rank order, into the root's ``recvbuf``."""
        try:
            if self._fast_gather(self._comm.gather, sendbuf, recvbuf, root) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._gather(sendbuf, recvbuf, root, "Gather"), BLOCKING)

    @staged
    def _gatherv(self, sendbuf: Any, recvbuf: Any, root: int, call: str, *,
                 stage: Stage) -> Call:
        comm = self._comm
        if comm.rank != root:
            return Call("gatherv", (self._send(sendbuf, call, stage), root, None), {})
        arr, counts, displs, _ = vector(recvbuf, comm.size, call, "recvbuf", comm.rank, True,
                                        stage)
        me = comm.rank
        x = arr[displs[me]:displs[me] + counts[me]] if _in_place(sendbuf) else \
            self._send(sendbuf, call, stage)
        return Call("gatherv", (x, root, None), _displaced(arr, counts, displs))

    def _fast_gatherv(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                      root: int = 0) -> Any:
        """Gatherv started by collops' ``method`` when its buffers are plain (a layout
        checked once); else `MISSED`."""
        comm = self._comm
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        if x is None or elements(x, False) < 0:  # counts are of a 1-D buffer's items
            return MISSED
        if comm.rank != root:
            return method(x, root, None)
        found = fast_vector(recvbuf, comm.size, True)
        if found is None:
            return MISSED
        return method(x, root, found[1].counts, displs=found[1].placed_displs,
                      out=found[2])

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Gather with per-rank counts and displacements at the root."""
        try:
            if self._fast_gatherv(self._comm.gatherv, sendbuf, recvbuf, root) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._gatherv(sendbuf, recvbuf, root, "Gatherv"), BLOCKING)

    @staged
    def _scatter(self, sendbuf: Any, recvbuf: Any, root: int, call: str, *,
                 stage: Stage) -> Call:
        comm = self._comm
        if comm.rank != root:
            return Call("scatter", (None, root), {"out": self._recv(recvbuf, call, stage)})
        x = self._send(sendbuf, call, stage, comm.size)
        out = np.empty(x.size // comm.size, x.dtype) if _in_place(recvbuf) else \
            self._recv(recvbuf, call, stage)
        return Call("scatter", (x, root), {"out": out})

    def _fast_scatter(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                      root: int = 0) -> Any:
        """Scatter started by collops' ``method`` when its buffers are plain arrays (the
        root's ``recvbuf`` not `IN_PLACE`); else `MISSED`."""
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if out is None or elements(out, True) < 0:
            return MISSED
        if self._comm.rank != root:
            return method(None, root, out=out)
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        if x is None or elements(x, False) < 0:
            return MISSED
        return method(x, root, out=out)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Block ``rank`` of the root's ``sendbuf`` into each rank's ``recvbuf``."""
        try:
            if self._fast_scatter(self._comm.scatter, sendbuf, recvbuf, root) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._scatter(sendbuf, recvbuf, root, "Scatter"), BLOCKING)

    @staged
    def _scatterv(self, sendbuf: Any, recvbuf: Any, root: int, call: str, *,
                  stage: Stage) -> Call:
        comm = self._comm
        if comm.rank != root:
            return Call("scatterv", (None, None, root),
                         {"out": self._recv(recvbuf, call, stage)})
        arr, counts, displs, _ = vector(sendbuf, comm.size, call, "sendbuf", comm.rank, False,
                                        stage)
        me = comm.rank
        out = np.empty(counts[me], arr.dtype) if _in_place(recvbuf) else \
            self._recv(recvbuf, call, stage)[:counts[me]]
        if is_contiguous_blocks(counts, displs):
            return Call("scatterv", (arr[:sum(counts)], counts, root), {"out": out})
        return Call("scatterv", (arr, counts, root), {"out": out, "displs": displs})

    def _fast_scatterv(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any,
                      root: int = 0) -> Any:
        """Scatterv started by collops' ``method`` when its buffers are plain (a layout
        checked once); else `MISSED`."""
        comm = self._comm
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if out is None or elements(out, True) < 0:
            return MISSED
        if comm.rank != root:
            return method(None, None, root, out=out)
        found = fast_vector(sendbuf, comm.size, False)
        if found is None:
            return MISSED
        arr, layout, _ = found
        count = layout.counts[comm.rank]
        mine = out if out.size == count else out[:count]
        if layout.contiguous:
            n = layout.total
            return method(arr if arr.size == n else arr[:n], layout.counts, root, out=mine)
        return method(arr, layout.counts, root, displs=layout.displs, out=mine)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        """Scatter with per-rank counts and displacements at the root."""
        try:
            if self._fast_scatterv(self._comm.scatterv, sendbuf, recvbuf, root) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._scatterv(sendbuf, recvbuf, root, "Scatterv"), BLOCKING)

    @staged
    def _allgather(self, sendbuf: Any, recvbuf: Any, call: str, *, stage: Stage) -> Call:
        comm = self._comm
        full = self._recv(recvbuf, call, stage, comm.size)
        n = full.size // comm.size
        x = full[comm.rank * n:(comm.rank + 1) * n] if _in_place(sendbuf) else \
            self._send(sendbuf, call, stage)
        return Call("allgather", (x,), {"out": full})

    def _fast_allgather(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any) -> Any:
        """Allgather started by collops' ``method`` as `Allgather` runs it; else `MISSED`."""
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        return MISSED if x is None or out is None else method(x, out=out)

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        """Every rank's ``sendbuf``, in rank order, into every ``recvbuf``."""
        x = sendbuf if type(sendbuf) is _ndarray else fast_array(sendbuf)
        out = recvbuf if type(recvbuf) is _ndarray else fast_array(recvbuf)
        if x is not None and out is not None:
            try:
                self._comm.allgather(x, out=out)
                return
            except CollopsError as exc:
                raise mpi_error(exc) from None
        self._run(self._allgather(sendbuf, recvbuf, "Allgather"), BLOCKING)

    @staged
    def _allgatherv(self, sendbuf: Any, recvbuf: Any, call: str, *, stage: Stage) -> Call:
        comm = self._comm
        arr, counts, displs, _ = vector(recvbuf, comm.size, call, "recvbuf", comm.rank, True,
                                        stage)
        me = comm.rank
        x = arr[displs[me]:displs[me] + counts[me]] if _in_place(sendbuf) else \
            self._send(sendbuf, call, stage)
        return Call("allgatherv", (x, counts), _displaced(arr, counts, displs))

    def _fast_allgatherv(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any) -> Any:
        """Allgatherv started by collops' ``method`` when its buffers are plain (a layout checked
        once); else `MISSED`."""
        a = allgatherv_args(sendbuf, recvbuf, self._comm.size)
        return MISSED if a is None else method(a[0], a[1], displs=a[2], out=a[3])

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Allgather with per-rank counts and displacements."""
        comm = self._comm
        a = allgatherv_args(sendbuf, recvbuf, comm.size)  # the fast branch, as `Allreduce`'s
        if a is not None:
            try:
                comm.allgatherv(a[0], a[1], displs=a[2], out=a[3])
                return
            except CollopsError as exc:
                raise mpi_error(exc) from None
        self._run(self._allgatherv(sendbuf, recvbuf, "Allgatherv"), BLOCKING)

    @staged
    def _alltoall(self, sendbuf: Any, recvbuf: Any, call: str, *, stage: Stage) -> Call:
        out = self._recv(recvbuf, call, stage, self._comm.size)
        if _in_place(sendbuf):
            x = out.copy()
            return Call("alltoall", (x,), {"out": out}, _copier(x, out))
        return Call("alltoall", (self._send(sendbuf, call, stage, self._comm.size),), {"out": out})

    def _fast_alltoall(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any) -> Any:
        """Alltoall started by collops' ``method`` when both buffers are plain; else
        `MISSED`."""
        pair = plain_pair(sendbuf, recvbuf)
        return MISSED if pair is None else method(pair[0], out=pair[1])

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        """Block j of every rank's ``sendbuf`` to rank j's ``recvbuf``, in rank order."""
        try:
            if self._fast_alltoall(self._comm.alltoall, sendbuf, recvbuf) is not MISSED:
                return
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._run(self._alltoall(sendbuf, recvbuf, "Alltoall"), BLOCKING)

    @staged
    def _alltoallv(self, sendbuf: Any, recvbuf: Any, call: str, *, stage: Stage) -> Call:
        comm = self._comm
        rarr, rcounts, rdispls, _ = vector(recvbuf, comm.size, call, "recvbuf", comm.rank,
                                           True, stage)
        if _in_place(sendbuf):  # collops copies a send buffer that overlaps the result
            sarr, scounts, sdispls = rarr, rcounts, rdispls
        else:
            sarr, scounts, sdispls, _ = vector(sendbuf, comm.size, call, "sendbuf", comm.rank,
                                               False, stage)
        received = _displaced(rarr, rcounts, rdispls, "rdispls")
        return Call("alltoallv", (sarr, scounts, sdispls, rcounts), received)

    def _fast_alltoallv(self, method: Callable[..., Any], sendbuf: Any, recvbuf: Any) -> Any:
        """Alltoallv started by collops' ``method`` when its buffers are plain (layouts
        checked once); else `MISSED`."""
        a = alltoallv_args(sendbuf, recvbuf, self._comm.size)
        return MISSED if a is None else method(a[0], a[1], a[2], a[3], rdispls=a[4], out=a[5])

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        """Alltoall with per-rank counts and displacements on both sides."""
        comm = self._comm
        a = alltoallv_args(sendbuf, recvbuf, comm.size)  # the fast branch, as `Allreduce`'s
        if a is not None:
            try:
                comm.alltoallv(a[0], a[1], a[2], a[3], rdispls=a[4], out=a[5])
                return
            except CollopsError as exc:
                raise mpi_error(exc) from None
        self._run(self._alltoallv(sendbuf, recvbuf, "Alltoallv"), BLOCKING)

    @staged
    def _alltoallw(self, sendbuf: Any, recvbuf: Any, call: str, *, stage: Stage) -> Call:
        comm = self._comm
        sent, scounts, rcounts, out = alltoallw_call(sendbuf, recvbuf, _in_place(sendbuf),
                                                     comm.size, call, comm.rank, stage)
        return Call("alltoallv", (sent, scounts, None, rcounts), {"out": out})

    def Alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        """Alltoall with a count, byte displacement and datatype per peer on both sides
        (`facade.alltoallw`: the blocks moved as bytes)."""
        self._run(self._alltoallw(sendbuf, recvbuf, "Alltoallw"), BLOCKING)

    # -- the non-blocking and persistent forms, generated from the blocking ones --------------
    Ibarrier, Barrier_init = forms(Barrier, lambda self, call: Call("barrier", (), {}),
                                    lambda self, method: method())
    Ibcast, Bcast_init = forms(Bcast, _bcast, _fast_bcast)
    Iallreduce, Allreduce_init = forms(
        Allreduce, lambda self, s, r, op, call: self._reduction("allreduce", s, r, op, call),
        _fast_allreduce)
    Ireduce, Reduce_init = forms(Reduce, _reduce, _fast_reduce)
    Iscan, Scan_init = forms(Scan, lambda self, s, r, op, call: self._scan("scan", s, r, op,
                                                                            call), _fast_paired)
    Iexscan, Exscan_init = forms(
        Exscan, lambda self, s, r, op, call: self._scan("exscan", s, r, op, call), _fast_paired)
    Ireduce_scatter_block, Reduce_scatter_block_init = forms(
        Reduce_scatter_block, _reduce_scatter_block, _fast_paired)
    _, Reduce_scatter_init = forms(Reduce_scatter, _reduce_scatter, _fast_reduce_scatter)

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                        op: Op = SUM) -> Request:
        """Non-blocking Reduce_scatter. Its fast path is written here rather than generated
        (`forms.forms`): the per-rank count check leaves no room under 0.5 µs for the generated
        method's extra call."""
        pair = plain_pair(sendbuf, recvbuf)
        if pair is not None and type(op) is Op and op.op is not None and (
                type(recvcounts) is list or type(recvcounts) is tuple):
            comm, out = self._comm, pair[1]
            try:
                if recvcounts[comm.rank] == out.size:
                    return new_request(comm.ireduce_scatter(pair[0], op.op, recvcounts,
                                                            out=out))
            except IndexError:  # too few counts: the general path says so
                pass
            except CollopsError as exc:
                raise mpi_error(exc) from None
        return self._run(self._reduce_scatter(sendbuf, recvbuf, recvcounts, op,
                                              "Ireduce_scatter"), NONBLOCKING)
    Igather, Gather_init = forms(Gather, _gather, _fast_gather)
    Igatherv, Gatherv_init = forms(Gatherv, _gatherv, _fast_gatherv, started=True)
    Iscatter, Scatter_init = forms(Scatter, _scatter, _fast_scatter)
    Iscatterv, Scatterv_init = forms(Scatterv, _scatterv, _fast_scatterv, started=True)
    Iallgather, Allgather_init = forms(Allgather, _allgather, _fast_allgather)
    Iallgatherv, Allgatherv_init = forms(Allgatherv, _allgatherv, _fast_allgatherv,
                                          started=True)
    Ialltoall, Alltoall_init = forms(Alltoall, _alltoall, _fast_alltoall)
    Ialltoallv, Alltoallv_init = forms(Alltoallv, _alltoallv, _fast_alltoallv, started=True)
    Ialltoallw, Alltoallw_init = forms(Alltoallw, _alltoallw)

