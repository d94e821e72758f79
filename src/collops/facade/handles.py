"""mpi4py's integer handles: ``obj.handle`` (and ``toint``, ``py2f``) and
``Class.fromhandle(n)`` (``fromint``, ``f2py``), for every handle class of ``collops.MPI``.

There is no C MPI library under collops.MPI, so a handle is only a number standing for a
live object of this process: the identity of what the object is a handle of (its
``_handle()``, the same for every copy, None for a null handle, whose number is 0). Reading
``handle`` remembers the object under its number (weakly: the number goes with the last
object holding it, as an MPI handle goes when freed, and may then be reused);
``fromhandle`` gives a new handle of the same object, as the class's copy constructor does.
A number that stands for nothing live raises ``MPI.Exception`` (``ERR_ARG``).
"""

from __future__ import annotations

import weakref
from typing import Any

from .exceptions import ERR_ARG, mpi_exception

#: handle number -> a live facade object holding it
_LIVE: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


class Handle:
    """The integer-handle methods; a subclass says what identifies it (`_handle`) and is
    weakly referable."""

    __slots__ = ()

    def _handle(self) -> Any:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    @property
    def handle(self) -> int:
        """This handle as a number (0 for a null handle)."""
        key = self._handle()
        if key is None:
            return 0
        number = id(key)
        _LIVE[number] = self
        return number

    def toint(self) -> int:
        """`handle`."""
        return self.handle

    def py2f(self) -> int:
        """`handle` (there is no Fortran here: the same number)."""
        return self.handle

    @classmethod
    def fromhandle(cls, handle: int) -> Any:
        """A new handle of the object ``handle`` stands for (a null one for 0)."""
        number = int(handle)
        if number == 0:
            return cls()
        found = _LIVE.get(number)
        if found is None:
            raise mpi_exception(ERR_ARG, f"{cls.__name__}.fromhandle: {number} is not the "
                                "handle of a live object of this process")
        return cls(found)  # type: ignore[call-arg]

    @classmethod
    def fromint(cls, value: int) -> Any:
        """`fromhandle`."""
        return cls.fromhandle(value)

    @classmethod
    def f2py(cls, value: int) -> Any:
        """`fromhandle`."""
        return cls.fromhandle(value)
