"""The non-blocking (``i…``) and persistent (``…_init``) forms of the collectives, generated.

Every collective is written once, as a phase generator of `Comm` (``_reduction``,
``_gatherv``, …); `PHASES` says which one runs each collective and with which fixed
arguments. `nonblocking` and `persistent` turn a blocking method into its two other forms:
a method with the blocking method's very signature (so `help`, `inspect.signature` and
type checkers show the real parameters) whose body passes its arguments by name to the
phase generator and wraps it in a `Request` or a `PersistentRequest`. A non-blocking form
listed in `FAST_STARTS` first offers its call to `FastPaths._fast_start`, which begins a
single-phase call of a prepared signature from its `PreparedCall` without the generator.

The methods are compiled from source, as `dataclasses` does, rather than written as
``*args, **kwargs`` wrappers: binding arguments with `inspect.Signature.bind` would cost a
non-blocking call several microseconds.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec

import numpy as np

from ..errors import ArgumentError
from .persistent import PersistentRequest
from .request import Request
from .vector_calls import vector_key

#: a barrier's fast start's ``x`` (as `Comm.barrier` passes it)
_TOKEN = np.empty(0, np.uint8)

Args = ParamSpec("Args")


def _scatterv_counts(comm: Any, call: str, counts: Any, root: int) -> Any:
    """A scatterv's ``counts``, required at the root (checked before anything is sent) and
    ignored elsewhere."""
    if comm.rank == root and counts is None:
        raise ArgumentError(call, "counts", None, "required at the root", comm.rank)
    return counts if comm.rank == root else 0


@dataclass(frozen=True)
class Variant:
    """How a collective runs as a phase generator of `Comm`."""

    #: the generator method's name
    method: str
    #: its arguments that the collective fixes (the rest are the blocking call's, by name)
    fixed: dict[str, Any] = field(default_factory=dict)
    #: run first as ``first = prologue(comm, call, first, *others)`` where the names are those
    #: of its parameters after ``call``: a check the generator does not make
    prologue: Callable[..., Any] | None = None


_ROOTLESS = {"root": None}
_EQUAL = {"counts": None, "vector": False}

#: collective -> the phase generator that runs it
PHASES: dict[str, Variant] = {
    "barrier": Variant("_barrier"),
    "bcast": Variant("_bcast"),
    "scatter": Variant("_scatter"),
    "scatterv": Variant("_scatterv", {"call": "scatterv"}, _scatterv_counts),
    "gather": Variant("_gatherv", {"call": "gather", **_EQUAL, "displs": None}),
    "gatherv": Variant("_gatherv", {"call": "gatherv", "vector": True}),
    "allgather": Variant("_gatherv", {"call": "allgather", **_ROOTLESS, **_EQUAL,
                                      "displs": None}),
    "allgatherv": Variant("_gatherv", {"call": "allgatherv", **_ROOTLESS, "vector": True}),
    "alltoall": Variant("_alltoallv", {"call": "alltoall", "sendcounts": None, "sdispls": None,
                                       "recvcounts": None, "rdispls": None,
                                       "vector": False}),
    "alltoallv": Variant("_alltoallv", {"call": "alltoallv", "vector": True}),
    "reduce": Variant("_reduction", {"collective": "reduce", "counts": None}),
    "allreduce": Variant("_reduction", {"collective": "allreduce", **_ROOTLESS,
                                        "counts": None}),
    "reduce_scatter": Variant("_reduction", {"collective": "reduce_scatter", **_ROOTLESS}),
    "reduce_scatter_block": Variant("_reduction", {"collective": "reduce_scatter_block",
                                                   **_ROOTLESS, "counts": None}),
    "scan": Variant("_reduction", {"collective": "scan", **_ROOTLESS, "counts": None}),
    "exscan": Variant("_reduction", {"collective": "exscan", **_ROOTLESS, "counts": None}),
}


def _parameter_list(signature: inspect.Signature) -> str:
    """``signature``'s parameters as the text of a ``def`` (defaults read from ``_defaults``)."""
    parts: list[str] = []
    keyword_only = False
    for p in signature.parameters.values():
        if p.kind is p.POSITIONAL_ONLY or p.kind is p.VAR_POSITIONAL:
            raise TypeError(f"unsupported parameter {p} in a collective's signature")
        if p.kind is p.KEYWORD_ONLY and not keyword_only:
            parts.append("*")
            keyword_only = True
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        elif p.default is p.empty:
            parts.append(p.name)
        else:
            parts.append(f"{p.name}=_defaults[{p.name!r}]")
    return ", ".join(parts)


def _generate(blocking: Callable[..., Any], name: str, body: str, returns: str,
              doc: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """A method ``name`` with ``blocking``'s signature (returning ``returns``) whose body is
    ``body``: there ``args`` is the call's arguments, by name, as Python source."""
    signature = inspect.signature(blocking)
    args = ", ".join(f"{n}={n}" for n in list(signature.parameters)[1:])
    source = f"def {name}({_parameter_list(signature)}):\n    {body.format(args=args)}\n"
    scope = {"_defaults": {p.name: p.default for p in signature.parameters.values()},
             **namespace}
    exec(source, scope)  # the source is made above from the signature alone
    method: Callable[..., Any] = scope[name]
    method.__annotations__ = {**blocking.__annotations__, "return": returns}
    method.__doc__ = doc
    method.__module__ = blocking.__module__
    method.__qualname__ = blocking.__qualname__.rsplit(".", 1)[0] + "." + name
    return method


def _prologue(variant: Variant, call: str) -> str:
    """The source line running ``variant``'s prologue (empty without one)."""
    if variant.prologue is None:
        return ""
    names = list(inspect.signature(variant.prologue).parameters)[2:]
    return f"{names[0]} = _prologue(self, {call!r}, {', '.join(names)}); "


def _fixed(variant: Variant) -> str:
    """``variant``'s fixed arguments as keyword-argument source."""
    return "".join(f"{k}={v!r}, " for k, v in variant.fixed.items())


def _reduce_scatter_key(op: Any, counts: Any) -> Any:
    """A reduce_scatter's ``op`` argument to its prepared call's key (as `Comm.reduce_scatter`
    makes it), or None (counts not given, or not integers: the general path says so)."""
    if counts is None:
        return None
    key = vector_key(counts)
    return None if key is None else (op, key[0])


def _gatherv_key(comm: Any, root: Any, counts: Any, displs: Any, algorithm: Any) -> Any:
    """A gatherv's ``counts`` and ``displs`` to its prepared call's key (as `Comm.gatherv`
    makes it; the root's displacements only), or None: a root given no counts learns them,
    and an algorithm other than the headed one (`vector_gatherv`) is asked for (the general
    path)."""
    if (counts is None and comm.rank == root) or algorithm not in (None, "shm_direct"):
        return None
    return vector_key(counts, displs if comm.rank == root else None)


#: collective -> its non-blocking form's arguments to `FastPaths._fast_start` (``x, op or
#: counts key, root, out``, as Python source over the call's parameters), the blocking form's
#: to `FastPaths._fast`: the calls whose one phase starts from the blocking form's
#: `PreparedCall`; a call of two steps — a bcast's, scatter's or scatterv's envelope and
#: its data phase (`envelope_start`), a gatherv's headers and its stream — takes the second
#: from the same start (`FastPaths._fast_start`)
FAST_STARTS: dict[str, str] = {
    "barrier": "_TOKEN, None, 0, None",
    "allreduce": "x, op, 0, out",
    "reduce": "x, op, root, out",
    "scan": "x, op, 0, out",
    "exscan": "x, op, 0, out",
    "reduce_scatter_block": "x, op, 0, out",
    "allgather": "x, None, 0, out",
    "gather": "x, None, root, out",
    "alltoall": "x, None, 0, out",
    "allgatherv": "x, None if counts is None else _key(counts, displs), 0, out",
    "alltoallv": "x, None if recvcounts is None else _key(sendcounts, sdispls, recvcounts, "
                 "rdispls), 0, out",
    "reduce_scatter": "x, _rs_key(op, counts), 0, out",
    "gatherv": "x, _gv_key(self, root, counts, displs, algorithm), root, out",
    "bcast": "x, None, root, out",
    "scatter": "x, None, root, out",
    "scatterv": "x, _key(counts, displs) if self.rank == root else (), root, out",
}


def nonblocking(blocking: Callable[Args, Any]) -> Callable[Args, Request]:
    """The non-blocking form of a blocking collective method: same parameters, a `Request`
    (begun from the blocking form's prepared call where `FAST_STARTS` lists it)."""
    name = blocking.__name__
    variant = PHASES[name]
    general = f"return _Request(self, self.{variant.method}({_fixed(variant)}{{args}}))"
    fast = FAST_STARTS.get(name)
    if fast is None:
        body = f"{_prologue(variant, 'i' + name)}{general}"
    else:  # its arguments are checked by the fast start or, when it declines, as before
        body = (f"if not params:\n        _r = self._fast_start({name!r}, {fast}, algorithm, "
                f"timeout)\n        if _r is not None:\n            return _r\n    "
                f"{_prologue(variant, 'i' + name)}{general}")
    return _generate(blocking, "i" + name, body, "Request", f"Non-blocking `{name}`.",
                     {"_Request": Request, "_prologue": variant.prologue, "_key": vector_key,
                      "_rs_key": _reduce_scatter_key, "_gv_key": _gatherv_key,
                      "_TOKEN": _TOKEN})


def persistent(blocking: Callable[Args, Any]) -> Callable[Args, PersistentRequest]:
    """The persistent form (MPI-4 ``MPI_Allreduce_init``, …) of a blocking collective method:
    same parameters, a `PersistentRequest` whose `~PersistentRequest.start` runs the call."""
    name = blocking.__name__
    variant = PHASES[name]
    call = name + "_init"
    body = (f"{_prologue(variant, call)}"
            f"return _Persistent(self, {call!r}, {variant.method!r}, "
            f"dict({_fixed(variant)}{{args}}))")
    return _generate(blocking, call, body, "PersistentRequest",
                     f"Persistent `{name}`: a request whose every `start` runs the call again "
                     "on the same buffers.",
                     {"_Persistent": PersistentRequest, "_prologue": variant.prologue})
