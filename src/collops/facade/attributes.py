"""MPI's attribute caching on communicators (``Create_keyval``, ``Set_attr``, ``Get_attr``,
``Delete_attr``, ``Free_keyval``), as mpi4py has it.

A key value carries a ``copy_fn`` (None or False: `Dup` does not copy the attribute; True:
the new communicator gets the same value; a function ``copy_fn(comm, keyval, value)``: its
result, unless it returns NotImplemented) and a ``delete_fn(comm, keyval, value)``, called
when the value is replaced, deleted, or its communicator freed. Attributes belong to the
communicator, not the handle: every handle of one communicator sees the same ones. All of it
is local to the rank.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from typing import Any

from .constants import KEYVAL_INVALID, TAG_UB
from .exceptions import ERR_ARG, mpi_exception

#: the predefined key of the upper bound of tags
TAG_UB_KEY = 0


@dataclass
class _Keyval:
    copy_fn: Any
    delete_fn: Any
    freed: bool = False


_KEYVALS: dict[int, _Keyval] = {}
_NEXT_KEYVAL = itertools.count(1)
#: collops communicator -> {keyval: value}
_ATTRIBUTES: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()


def _keyval(keyval: int, call: str) -> _Keyval:
    found = _KEYVALS.get(keyval)
    if found is None:
        raise mpi_exception(ERR_ARG, f"{call}: {keyval} is not a key value of "
                            "Create_keyval")
    return found


class Attributes:
    """The attribute methods of `Comm` (``self._comm`` is the collops communicator)."""

    _comm: Any

    @classmethod
    def Create_keyval(cls, copy_fn: Any = None, delete_fn: Any = None,
                      nopython: bool = False) -> int:
        """A new attribute key (``nopython`` is accepted: every value is a Python object
        here)."""
        keyval = next(_NEXT_KEYVAL)
        _KEYVALS[keyval] = _Keyval(None if copy_fn is False else copy_fn,
                                   None if delete_fn is True else delete_fn)
        return keyval

    @classmethod
    def Free_keyval(cls, keyval: int) -> int:
        """Free a key (attributes set with it stay until deleted); KEYVAL_INVALID."""
        _keyval(keyval, "Free_keyval").freed = True
        return KEYVAL_INVALID

    def _attributes(self) -> dict[int, Any]:
        comm = self._comm
        comm.rank  # noqa: B018  (a null or freed handle raises ERR_COMM here)
        found = _ATTRIBUTES.get(comm)
        if found is None:
            found = _ATTRIBUTES[comm] = {}
        return found

    def Get_attr(self, keyval: int) -> Any:
        """The value of attribute ``keyval`` (None when not set; TAG_UB's for TAG_UB)."""
        if keyval == TAG_UB_KEY:
            return TAG_UB
        return self._attributes().get(keyval)

    def Set_attr(self, keyval: int, attrval: Any) -> None:
        """Set attribute ``keyval`` (a value it replaces goes to the key's ``delete_fn``)."""
        key = _keyval(keyval, "Set_attr")
        if key.freed:
            raise mpi_exception(ERR_ARG, f"Set_attr: key value {keyval} was freed")
        attributes = self._attributes()
        if keyval in attributes:
            self._deleted(keyval, attributes.pop(keyval))
        attributes[keyval] = attrval

    def Delete_attr(self, keyval: int) -> None:
        """Delete attribute ``keyval`` (its value goes to the key's ``delete_fn``)."""
        _keyval(keyval, "Delete_attr")
        attributes = self._attributes()
        if keyval not in attributes:
            raise mpi_exception(ERR_ARG, f"Delete_attr: no attribute {keyval} is set")
        self._deleted(keyval, attributes.pop(keyval))

    def _deleted(self, keyval: int, value: Any) -> None:
        delete_fn = _KEYVALS[keyval].delete_fn
        if delete_fn is not None:
            delete_fn(self, keyval, value)

    def _copy_attributes(self, new: Attributes) -> None:
        """Give ``new`` (a `Dup` of this communicator) the attributes their keys copy."""
        mine = _ATTRIBUTES.get(self._comm)
        if not mine:
            return
        copied = new._attributes()
        for keyval, value in mine.items():
            copy_fn = _KEYVALS[keyval].copy_fn
            if copy_fn is None:
                continue
            got = value if copy_fn is True else copy_fn(self, keyval, value)
            if got is not NotImplemented:
                copied[keyval] = got

    def _free_attributes(self) -> None:
        """Delete every attribute (the communicator is being freed)."""
        attributes = _ATTRIBUTES.pop(self._comm, None) or {}
        for keyval, value in attributes.items():
            self._deleted(keyval, value)
