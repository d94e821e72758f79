"""mpi4py's lowercase collectives on picklable Python objects, over collops' object forms."""

from __future__ import annotations

import pickle as _pickle
from typing import Any

from ..errors import CollopsError
from .exceptions import mpi_error, not_implemented
from .operators import SUM, Op, as_python_op


class ObjectCollectives:
    """The object collectives of `Comm` (``self._comm`` is the collops communicator)."""

    _comm: Any

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._comm, method)(*args)
        except CollopsError as exc:
            raise mpi_error(exc) from None

    def barrier(self) -> None:
        """Block until every rank has called barrier."""
        self._call("barrier")

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """The root's object, on every rank."""
        return self._call("bcast_object", obj, root)

    def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """Every rank's object in a list on the root; None elsewhere."""
        return self._call("gather_object", sendobj, root)  # type: ignore[no-any-return]

    def scatter(self, sendobj: Any, root: int = 0) -> Any:
        """Item ``rank`` of the root's sequence, on each rank."""
        return self._call("scatter_object", sendobj, root)

    def allgather(self, sendobj: Any) -> list[Any]:
        """Every rank's object in a list, on every rank."""
        return self._call("allgather_object", sendobj)  # type: ignore[no-any-return]

    def alltoall(self, sendobj: Any) -> list[Any]:
        """Item j of every rank's sequence to rank j; the items received, in rank order."""
        return self._call("alltoall_object", sendobj)  # type: ignore[no-any-return]

    def reduce(self, sendobj: Any, op: Op = SUM, root: int = 0) -> Any:
        """``op`` folded over the ranks' objects in rank order, on the root; None elsewhere."""
        return self._call("reduce_object", sendobj, as_python_op(op, "reduce"), root)

    def allreduce(self, sendobj: Any, op: Op = SUM) -> Any:
        """`reduce` with the result on every rank."""
        return self._call("allreduce_object", sendobj, as_python_op(op, "allreduce"))

    def scan(self, sendobj: Any, op: Op = SUM) -> Any:
        """``op`` folded over the objects of ranks 0 … this one."""
        return self._call("scan_object", sendobj, as_python_op(op, "scan"))

    def exscan(self, sendobj: Any, op: Op = SUM) -> Any:
        """``op`` folded over the objects of the ranks before this one (None on rank 0)."""
        return self._call("exscan_object", sendobj, as_python_op(op, "exscan"))


class Pickle:
    """mpi4py's ``MPI.pickle``: how objects become messages (the standard `pickle` at its
    highest protocol, as collops' object methods use it)."""

    PROTOCOL = _pickle.HIGHEST_PROTOCOL

    def __init__(self, dumps: Any = None, loads: Any = None, protocol: Any = None) -> None:
        """The standard pickler; another one (``dill``, ``cloudpickle``) is not supported."""
        if dumps is not None or loads is not None or protocol is not None:
            raise not_implemented("a custom pickler for object messages", "MPI.pickle")

    def dumps(self, obj: Any) -> bytes:
        """``obj`` as the bytes of an object message."""
        return _pickle.dumps(obj, self.PROTOCOL)

    def loads(self, data: Any) -> Any:
        """The object an object message's bytes hold (None for none)."""
        return None if len(data) == 0 else _pickle.loads(data)


pickle = Pickle()
