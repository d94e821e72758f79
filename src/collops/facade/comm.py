"""mpi4py's ``Comm`` and ``Intracomm`` over a collops communicator.

A facade communicator is a thin handle: ``_comm`` is the collops `~collops.Comm` it runs on.
`COMM_WORLD` finds its communicator on first use (`collops.init`: the ``collops run`` job, or
a world of one); `wrap` makes a handle of any collops communicator (a thread of
`collops.spawn`, say). What collops cannot do raises `NotImplementedError` naming it, on the
rank that calls it, before anything is sent — so every rank making the same call gets the
same error at once and none is left waiting.
"""

from __future__ import annotations

import functools
import os
import sys
import zlib
from typing import Any

from ..errors import CollopsError
from .attributes import Attributes
from .collectives import Collectives
from .constants import COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, COMM_TYPE_SHARED, UNDEFINED
from .environment import ERRORS_RETURN, INFO_NULL, Info
from .exceptions import ERR_COMM, mpi_error, mpi_exception, not_implemented
from .group import Group
from .handles import Handle
from .objects import ObjectCollectives
from .pointtopoint import PointToPoint
from .requests import Request


class _Freed:
    """Stands in for the collops communicator of a freed (or null) handle."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __getattr__(self, name: str) -> Any:
        raise mpi_exception(ERR_COMM, f"{name}: the communicator is {self.what}")


#: MPI-4's info key naming a hardware level, and the one level collops knows (the node)
HW_RESOURCE_TYPE = "mpi_hw_resource_type"
SHARED_MEMORY = "mpi_shared_memory"


def _split_kind(comm: Any, split_type: int, info: Any) -> Any:
    """collops' split kind for an MPI split type: ``"shared"`` (the node) for
    COMM_TYPE_SHARED; for COMM_TYPE_HW_GUIDED when ``info`` asks for ``mpi_shared_memory``
    (any other level, or none: COMM_NULL, as MPI-4 says); for COMM_TYPE_HW_UNGUIDED when the
    node is a strictly smaller level than ``comm`` (its members span nodes), else COMM_NULL.
    Every rank decides alike from what every rank knows. Any other value goes on to collops,
    which names it."""
    if split_type == UNDEFINED:
        return None
    if split_type == COMM_TYPE_SHARED:
        return "shared"
    if split_type == COMM_TYPE_HW_GUIDED:
        asked = info.get(HW_RESOURCE_TYPE) if isinstance(info, dict) else None
        return "shared" if asked == SHARED_MEMORY else None
    if split_type == COMM_TYPE_HW_UNGUIDED:
        return "shared" if comm.nodes_spanned > 1 else None
    return split_type


class Comm(Collectives, ObjectCollectives, PointToPoint, Attributes, Handle):
    """A communicator handle: collectives, point-to-point and management."""

    def __init__(self, comm: Any = None) -> None:
        """A handle of a collops communicator, or a copy of another handle (COMM_NULL's
        when None)."""
        if isinstance(comm, Comm):
            comm = comm._comm
        elif comm is not None and not hasattr(comm, "rank"):  # a communicator-like object
            raise TypeError(f"Comm() takes a communicator, not {type(comm).__name__}")
        self._comm = _Freed("null") if comm is None else comm
        self._name = ""
        self._buffer: Any = None

    def __bool__(self) -> bool:
        return not isinstance(self._comm, _Freed)

    def _handle(self) -> Any:
        """What identifies the communicator (None when null or freed)."""
        return None if isinstance(self._comm, _Freed) else self._comm

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Comm):
            return NotImplemented
        if not self and not other:  # null handles are all COMM_NULL
            return True
        return self._comm is other._comm

    def __hash__(self) -> int:
        return id(self._comm)

    def __repr__(self) -> str:
        return f"<collops.MPI.{type(self).__name__} {self._name or self._comm!r}>"

    def __reduce__(self) -> Any:
        """Pickled as mpi4py's: COMM_NULL, COMM_SELF and COMM_WORLD are themselves, copies of
        them equal handles; any other communicator cannot be pickled."""
        for name in ("COMM_NULL", "COMM_SELF", "COMM_WORLD"):
            predefined = globals()[name]
            if self is predefined:
                return name
            if self == predefined:
                return Intracomm, (predefined,)
        raise ValueError(f"cannot pickle {self!r}: a communicator belongs to its job")

    @property
    def collops_comm(self) -> Any:
        """The collops communicator under this handle."""
        return self._comm

    # -- who is here -----------------------------------------------------------------------
    def Get_rank(self) -> int:
        """This process's rank."""
        return self._comm.rank  # type: ignore[no-any-return]

    def Get_size(self) -> int:
        """Number of ranks."""
        return self._comm.size  # type: ignore[no-any-return]

    @property
    def rank(self) -> int:
        """`Get_rank`."""
        return self._comm.rank  # type: ignore[no-any-return]

    @property
    def size(self) -> int:
        """`Get_size`."""
        return self._comm.size  # type: ignore[no-any-return]

    def Get_group(self) -> Group:
        """The group of this communicator's ranks."""
        return Group(self._comm.group, self._comm)

    @property
    def group(self) -> Group:
        """`Get_group`."""
        return self.Get_group()

    def Get_name(self) -> str:
        """The communicator's name."""
        if not self:
            return "MPI_COMM_NULL"
        return self._name or str(getattr(self._comm, "name", ""))

    def Set_name(self, name: str) -> None:
        """Name the communicator."""
        self._name = str(name)

    @property
    def name(self) -> str:
        """`Get_name`."""
        return self.Get_name()

    @name.setter
    def name(self, value: str) -> None:
        self.Set_name(value)

    def Is_inter(self) -> bool:
        """False: collops has intracommunicators only."""
        return False

    def Is_intra(self) -> bool:
        """True."""
        return True

    @property
    def is_inter(self) -> bool:
        """`Is_inter`."""
        return False

    @property
    def is_intra(self) -> bool:
        """`Is_intra`."""
        return True

    def Get_topology(self) -> int:
        """UNDEFINED: no process topology."""
        return UNDEFINED

    @property
    def topology(self) -> int:
        """`Get_topology`."""
        return UNDEFINED

    def Get_info(self) -> Any:
        """The hints in use (none: collops takes its settings from `collops.settings`)."""
        return Info()

    def Set_info(self, info: Any) -> None:
        """Accepted and ignored."""

    @property
    def info(self) -> Any:
        """`Get_info`."""
        return self.Get_info()

    @info.setter
    def info(self, value: Any) -> None:
        self.Set_info(value)

    def Attach_buffer(self, buf: Any) -> None:
        """Accepted and kept for `Detach_buffer`: buffered sends are ordinary sends here."""
        self._buffer = buf

    def Detach_buffer(self) -> Any:
        """The buffer `Attach_buffer` was given (None if none)."""
        buf, self._buffer = self._buffer, None
        return buf

    def Flush_buffer(self) -> None:
        """Nothing to flush: buffered sends are ordinary sends here."""

    def Iflush_buffer(self) -> Request:
        """`Flush_buffer`, complete at once."""
        return Request()

    @classmethod
    def Get_parent(cls) -> Intercomm:
        """A null intercommunicator: no process here was spawned."""
        return Intercomm()

    def Get_errhandler(self) -> Any:
        """The error handler: errors are raised as exceptions (ERRORS_RETURN)."""
        return ERRORS_RETURN

    def Set_errhandler(self, errhandler: Any) -> None:
        """Accepted; errors are always raised as `MPI.Exception` subclasses."""

    def Compare(self, comm: Comm) -> int:
        """IDENT (same communicator), CONGRUENT (same ranks in order), SIMILAR or UNEQUAL."""
        return self._do("compare", "Compare", comm._comm)  # type: ignore[no-any-return]

    # -- new communicators -----------------------------------------------------------------
    def _wrapped(self, comm: Any) -> Intracomm:
        return COMM_NULL if comm is None else Intracomm(comm)

    def Dup(self, info: Any = None) -> Intracomm:
        """The same ranks with a new message space."""
        try:
            new = self._wrapped(self._comm.dup())
        except CollopsError as exc:
            raise mpi_error(exc) from None
        self._copy_attributes(new)
        return new

    Clone = Dup

    def Dup_with_info(self, info: Any) -> Intracomm:
        """`Dup` (hints are ignored)."""
        return self.Dup()

    def Idup(self, info: Any = None) -> tuple[Intracomm, Request]:
        """Non-blocking Dup: the new handle (usable once the request completes) and the
        request."""
        new = Intracomm()

        def finish(value: Any) -> Any:
            new._comm = value
            self._copy_attributes(new)
            return value
        return new, Request(self._do("idup", "Idup"), finish)

    def Idup_with_info(self, info: Any) -> tuple[Intracomm, Request]:
        """`Idup` (hints are ignored)."""
        return self.Idup()

    def Split(self, color: int = 0, key: int = 0) -> Intracomm:
        """Ranks of equal ``color`` form a communicator ordered by ``key`` (COMM_NULL for
        ``color=UNDEFINED``)."""
        try:
            return self._wrapped(self._comm.split(None if color == UNDEFINED else color, key))
        except CollopsError as exc:
            raise mpi_error(exc) from None

    def Split_type(self, split_type: int, key: int = 0, info: Any = None) -> Intracomm:
        """Ranks that share memory together (MPI-4's split types over the one hardware level
        collops knows, the node: `_split_kind`); COMM_NULL for ``split_type=UNDEFINED``."""
        comm = self._wrapped(self._do("split_type", "Split_type",
                                      _split_kind(self._comm, split_type, info), key))
        if split_type == COMM_TYPE_HW_UNGUIDED and comm and isinstance(info, Info) \
                and info is not INFO_NULL:
            info.Set(HW_RESOURCE_TYPE, SHARED_MEMORY)  # the level it split at, as MPI-4 says
        return comm

    def Create(self, group: Group) -> Intracomm:
        """A communicator of ``group``'s members (collective over this communicator; COMM_NULL
        on the others)."""
        return self._wrapped(self._do("create", "Create", group.group))

    def Create_group(self, group: Group, tag: int = 0) -> Intracomm:
        """A communicator of ``group``'s members (collective over the group only)."""
        return self._wrapped(self._do("create_group", "Create_group", group.group, tag))

    def Free(self) -> None:
        """Free the communicator (collective); the handle becomes null."""
        if self is COMM_WORLD or self is COMM_SELF:
            raise mpi_exception(ERR_COMM, "Free: cannot free a predefined communicator")
        self._free_attributes()
        self._do("free", "Free")
        self._comm = _Freed("freed")

    def Disconnect(self) -> None:
        """`Free`."""
        self.Free()

    def Abort(self, errorcode: int = 0) -> None:
        """End the whole job at once with ``errorcode`` (collops run ends every rank)."""
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(errorcode) or 1)


#: mpi4py's communicator methods (4.1) of the parts of MPI collops does not implement: each
#: raises NotImplementedError naming the part when it is looked up (`_refusal`). Named one by
#: one, not by a ``__getattr__``: a class with one takes CPython's slow attribute lookup for
#: every method and attribute, which cost every facade call ~0.05 µs.
_UNSUPPORTED: list[tuple[tuple[str, ...], str]] = [
    (("Create_intercomm", "Accept", "Connect", "Spawn", "Spawn_multiple", "Join", "Merge"),
     "intercommunicators and dynamic processes"),
    (("Create_cart", "Create_graph", "Create_dist_graph", "Create_dist_graph_adjacent",
      "Cart_map", "Graph_map", "neighbors", "neighbor_allgather", "neighbor_alltoall",
      *(f"{prefix}_{name}{suffix}" for prefix in ("Neighbor", "Ineighbor")
        for name in ("allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw")
        for suffix in ("", "_init") if not (prefix == "Ineighbor" and suffix))),
     "process topologies"),
]


def _refusal(name: str, what: str) -> property:
    """A communicator attribute that raises NotImplementedError naming ``what`` when read."""
    def refuse(self: Comm) -> Any:
        raise not_implemented(what, f"Comm.{name}")
    return property(refuse, doc=f"Not implemented by collops: {what}.")


for _names, _what in _UNSUPPORTED:
    for _name in _names:
        setattr(Comm, _name, _refusal(_name, _what))


class Intracomm(Comm):
    """An intracommunicator (every communicator collops has)."""

    @classmethod
    def Create_from_group(cls, group: Group, stringtag: str = "org.mpi4py", info: Any = None,
                          errhandler: Any = None) -> Intracomm:
        """A communicator of ``group``'s members, collective over them only (MPI-4's, without
        a session: made over the communicator the group came from, ``COMM_WORLD`` for a group
        of no communicator's; ``stringtag`` tells concurrent calls apart, as `Create_group`'s
        tag does)."""
        tag = zlib.crc32(str(stringtag).encode()) & 0x3FFFFFFF
        base = COMM_WORLD if group.origin is None else Intracomm(group.origin)
        return base._wrapped(base._do("create_group", "Create_from_group", group.group, tag))


class Intercomm(Comm):
    """An intercommunicator: collops has none, so only the null one exists (``Intercomm()``,
    what `Comm.Get_parent` gives where no process was spawned). Making one of a communicator
    raises NotImplementedError, as do the methods only intercommunicators have."""

    def __init__(self, comm: Any = None) -> None:
        """The null intercommunicator (``comm`` None or a null handle)."""
        if comm is not None and not (isinstance(comm, Comm) and not comm):
            raise not_implemented("intercommunicators", "Intercomm")
        super().__init__(None)


for _name in ("Get_remote_group", "Get_remote_size", "remote_group", "remote_size"):
    setattr(Intercomm, _name, _refusal(_name, "intercommunicators"))


def wrap(comm: Any) -> Intracomm:
    """A facade handle of a collops communicator (e.g. the ``comm`` a `collops.spawn`
    function receives)."""
    return Intracomm(comm)


class _WorldComm(Intracomm):
    """COMM_WORLD: `collops.init`'s communicator, found at first use (then an attribute of
    the handle, as any communicator's)."""

    @functools.cached_property
    def _comm(self) -> Any:  # type: ignore[override]
        from ..runtime.world import init
        return init()


class _SelfComm(Intracomm):
    """COMM_SELF: a world of one, made at first use."""

    @functools.cached_property
    def _comm(self) -> Any:  # type: ignore[override]
        from ..runtime.comm import Comm as CollopsComm
        from ..transport.inproc import Fabric
        return CollopsComm(Fabric(1).endpoint(0), name="self")


COMM_NULL = Intracomm()
COMM_WORLD = _WorldComm.__new__(_WorldComm)
COMM_WORLD._name = "MPI_COMM_WORLD"
COMM_SELF = _SelfComm.__new__(_SelfComm)
COMM_SELF._name = "MPI_COMM_SELF"
