"""The public way to add an algorithm: the `algorithm` decorator.

A user's algorithm is a schedule builder ``builder(rank, spec, params) -> Schedule`` — the
same contract as collops' own — registered under a new name for one or more collectives.
From then on it is an algorithm like the built-in ones: ``algorithm=`` on any call,
``set_algorithm``, the tuning table, ``explain``, ``collops algorithms``, the endpoints'
geometries, the simulator and the cost model (when it gives a ``cost``). The decorator checks
what it is given and says what is wrong, naming the argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable

from ..errors import ArgumentError
from .registry import (
    Algorithm,
    Builder,
    CostFn,
    Param,
    Restriction,
    add_algorithm,
    check_name_free,
)
from .spec import COLLECTIVES

CALL = "collops.algorithm"


def algorithm(
    collectives: str | Iterable[str],
    name: str,
    description: str,
    *,
    restrictions: Iterable[Restriction] = (),
    params: Iterable[Param] = (),
    cost: CostFn | None = None,
    in_place: bool = False,
) -> Callable[[Builder], Builder]:
    """Decorator: register a schedule builder as algorithm ``name`` of ``collectives``."""
    names = (collectives,) if isinstance(collectives, str) else tuple(collectives)
    if not names:
        raise ArgumentError(CALL, "collectives", collectives, "name at least one collective")
    for c in names:
        if c not in COLLECTIVES:
            raise ArgumentError(CALL, "collectives", c,
                                f"not a collective (one of {', '.join(COLLECTIVES)})")
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError(CALL, "name", name, "must be a Python identifier (e.g. 'my_ring')")
    if not isinstance(description, str) or not description.strip():
        raise ArgumentError(CALL, "description", description, "must be a non-empty sentence")
    restrictions = tuple(restrictions)
    params = tuple(params)
    for r in restrictions:
        if not isinstance(r, Restriction):
            raise ArgumentError(CALL, "restrictions", r,
                                "each must be a collops.Restriction(name, description, check)")
    for p in params:
        if not isinstance(p, Param):
            raise ArgumentError(CALL, "params", p,
                                "each must be a collops.Param(name, default, description)")
    if cost is not None and not callable(cost):
        raise ArgumentError(CALL, "cost", cost, "must be a function (spec, model) -> seconds")

    def decorate(builder: Builder) -> Builder:
        if not callable(builder):
            raise ArgumentError(CALL, "builder", builder, "must be a function")
        _check_signature(builder)
        origin = inspect.getsourcefile(builder) or getattr(builder, "__module__", "?")
        for c in names:  # all free before any is added
            check_name_free(c, name, CALL)
        for c in names:
            add_algorithm(Algorithm(c, name, description.strip(), builder, restrictions, params,
                                    cost, in_place=in_place, origin=origin), CALL)
        return builder

    return decorate


def _check_signature(builder: Builder) -> None:
    """A builder takes ``(rank, spec, params)``."""
    try:
        inspect.signature(builder).bind(0, None, {})
    except TypeError as exc:
        raise ArgumentError(CALL, "builder", getattr(builder, "__name__", builder),
                            f"must take (rank, spec, params): {exc}") from exc
    except ValueError:  # no signature to inspect (a builtin): trust it
        pass
