"""How a collective of `collops.MPI` becomes a call: the planned call (`Call`: the collops
method, its arguments, a ``before`` step, the gapped buffers' `Stage`), and the ``I…`` and
``…_init`` methods made from a blocking one (`forms`): its fast path (plain arrays straight to
collops' non-blocking or persistent call, `MISSED` when the call is not its simple case), else
its plan run by the communicator's ``_run`` in the form's mode. A non-blocking form with a
fast path is compiled from source with the blocking method's parameters
(`nonblocking_source`), since binding ``*args, **kwargs`` per call costs more than the fast
path adds.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

from ..errors import CollopsError
from .exceptions import mpi_error
from .requests import Prequest, Request, compiled_method, new_request
from .staging import Stage

BLOCKING, NONBLOCKING, PERSISTENT = 0, 1, 2


class Call(NamedTuple):
    """A planned collective: ``comm.<name>(*args, **kwargs)``, ``before()`` run first; the
    buffers of gapped datatypes packed before it and written back after it (``stage``)."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    before: Callable[[], None] | None = None
    stage: Stage | None = None


Plan = Callable[..., Call]


def staged(plan: Callable[..., Call]) -> Callable[..., Call]:
    """A plan given a `Stage` for its gapped buffers, which the planned call then carries."""
    @functools.wraps(plan)
    def planned(self: Any, *args: Any, **kwargs: Any) -> Call:
        stage = Stage()
        found = plan(self, *args, stage=stage, **kwargs)
        return found._replace(stage=stage) if stage else found
    return planned


def forms(blocking: Callable[..., Any], plan: Plan, fast: Callable[..., Any] | None = None,
           started: bool = False) -> tuple[Callable[..., Request], Callable[..., Prequest]]:
    """The ``I…`` and ``…_init`` methods of a blocking collective: its parameters (bound as
    it binds them) started by ``fast(self, method, *arguments)`` when it takes them (the
    blocking method's own fast path: plain arrays, a layout checked once, calling collops'
    non-blocking or persistent ``method``; `MISSED` if not), else planned by ``plan(self,
    *arguments, call=name)``, run non-blocking or persistent. With ``started`` (a v-collective
    `_specs.Starter` knows), the ``I…`` method is that compiled one over the Python one."""
    name = blocking.__name__
    signature = inspect.signature(blocking)
    own = name.lower()
    methods = {NONBLOCKING: "i" + own, PERSISTENT: own + "_init"}

    def form(mode: int, call: str, doc: str, returns: str) -> Callable[..., Any]:
        if mode == NONBLOCKING and fast is not None:
            generated = nonblocking_source(signature, call, methods[mode], fast, plan)
            if generated is not None:
                generated.__doc__ = doc
                generated.__signature__ = signature.replace(  # type: ignore[attr-defined]
                    return_annotation=returns)
                return compiled_method(own, methods[mode], generated) if started else generated

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if fast is not None:
                try:
                    started = fast(self, getattr(self._comm, methods[mode]), *args, **kwargs)
                except CollopsError as exc:
                    raise mpi_error(exc) from None
                if started is not MISSED:
                    return wrapped(started, mode)
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            return self._run(plan(*bound.args, call=call), mode)
        method.__name__ = method.__qualname__ = call
        method.__doc__ = doc
        method.__signature__ = signature.replace(  # type: ignore[attr-defined]
            return_annotation=returns)
        return method

    return (form(NONBLOCKING, "I" + name[0].lower() + name[1:], f"Non-blocking {name}.",
                 "Request"),
            form(PERSISTENT, name + "_init", f"Persistent {name}.", "Prequest"))


#: what a fast path returns when the call is not its simple case


MISSED = object()


def nonblocking_source(signature: inspect.Signature, call: str, own: str,
                        fast: Callable[..., Any], plan: Plan) -> Callable[..., Any] | None:
    """The ``I…`` method of a blocking collective with a fast path, compiled from source with
    the blocking method's parameters (as `runtime.variants` makes collops' own): binding
    ``*args, **kwargs`` per call costs more than the whole fast path adds. None for a
    signature with other than plain parameters (the generic form takes it)."""
    params = list(signature.parameters.values())[1:]
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        return None
    names = [p.name for p in params]
    listed = ", ".join(n if p.default is p.empty else f"{n}=_defaults[{n!r}]"
                       for n, p in zip(names, params, strict=True))
    args = "".join(f", {n}" for n in names)  # (none for Ibarrier)
    source = (f"def {call}(self{', ' + listed if listed else ''}):\n"
              f"    try:\n"
              f"        started = _fast(self, self._comm.{own}{args})\n"
              f"    except _CollopsError as exc:\n"
              f"        raise _mpi_error(exc) from None\n"
              f"    if started is not _MISSED:\n"
              f"        return _Request(started)\n"
              f"    return self._run(_plan(self{args}, call={call!r}), {NONBLOCKING})\n")
    scope: dict[str, Any] = {"_defaults": {p.name: p.default for p in params}, "_fast": fast,
                             "_plan": plan, "_CollopsError": CollopsError,
                             "_mpi_error": mpi_error, "_MISSED": MISSED, "_Request": new_request}
    exec(source, scope)  # the source is made above from the signature alone
    method: Callable[..., Any] = scope[call]
    method.__qualname__ = call
    return method


def wrapped(started: Any, mode: int) -> Any:
    """A collops request (``mode`` non-blocking) or persistent request as the facade's."""
    if mode == NONBLOCKING:
        return Request(started, None)

    def start() -> Any:
        started.start()
        return started
    return Prequest(start, None)
