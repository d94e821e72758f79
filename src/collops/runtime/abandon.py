"""A call a rank gave up: its peers are told, so they raise instead of waiting for it.

A non-rooted call (or a rooted one at a non-root) whose arguments only this rank sees are
wrong (its ``out``, its dtype, its ``timeout``, an algorithm it names) raises before taking
its call number or before its first phase starts, and its peers would wait for it. So the
call takes its number anyway (`abandon_call`: the communicator stays in step) and the
transport hears that this rank gave it up
(`Transport.give_up`): the threads transport fails its peers' receives of that call from this
rank with `PeerFailed` naming it, the ``shm`` transport leaves a word for the call in the
communicator's direct area that its peers meet as `CollectiveMismatch`, the ``mpi``
transport the same word on its node's board and a marker message to every other rank; the
ranks that raise so give the call up in turn, so ranks that wait for them are told too.

A rooted call whose root gave up: its peers are told in the call's own first phase.

Only a bcast's or scatter's root sees its data, so a mistake there (no array, a dtype collops
cannot move, a wrong ``out``, counts that do not fit ``x``) is visible to it alone, and the
other ranks would wait for data that never comes. So the root takes the call's number anyway
and sends, in place of the envelope (or the scatterv's dtype-and-counts message), one marked
*abandoned* that carries its error's text; it then raises its error, and every other rank
raises `CollectiveMismatch` quoting it. The call ends on every rank, so the communicator's
next call matches everywhere.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import ArgumentError, CollectiveMismatch, CollopsError
from ..transport.tags import make_tag_base

#: the first byte of an abandoned envelope's header (a real one holds 0 or 1: inline or not)
ABANDONED = 0xAB
#: an abandoned header: the mark, 0, the text's length, 0 (the data bytes: none), the text
_HEAD = struct.Struct("<B B H Q")
#: the words of a scatterv's dtype-and-counts message: an abandoned one has -1 dimensions
_META_NDIM = 2


def _fit(text: str, room: int) -> bytes:
    raw = text.encode()
    return raw if len(raw) <= room else raw[: room - 3].decode(errors="ignore").encode() + b"..."


def abandoned_header(text: str, nbytes: int) -> np.ndarray:
    """The first ``nbytes`` bytes of an envelope (or of each block of one) that says the root
    gave up, raising ``text``."""
    head = np.zeros(nbytes, np.uint8)
    raw = _fit(text, nbytes - _HEAD.size)
    _HEAD.pack_into(head, 0, ABANDONED, 0, len(raw), 0)  # type: ignore[arg-type]
    head[_HEAD.size: _HEAD.size + len(raw)] = np.frombuffer(raw, np.uint8)
    return head


def raise_if_abandoned_header(header: bytes) -> None:
    """Raise `CollectiveMismatch` quoting the root's error if ``header`` is abandoned."""
    if header[0] == ABANDONED:
        _, _, length, _ = _HEAD.unpack_from(header, 0)
        raise _mismatch(header[_HEAD.size: _HEAD.size + length])


def abandoned_meta(text: str, words: int) -> np.ndarray:
    """A scatterv's dtype-and-counts message of ``words`` int64 that says the root gave up."""
    meta = np.zeros(words, np.int64)
    meta[_META_NDIM] = -1
    raw = _fit(text, (words - _META_NDIM - 2) * 8)
    meta[_META_NDIM + 1] = len(raw)
    meta[_META_NDIM + 2:].view(np.uint8)[: len(raw)] = np.frombuffer(raw, np.uint8)
    return meta


def raise_if_abandoned_meta(meta: np.ndarray) -> None:
    """Raise `CollectiveMismatch` quoting the root's error if ``meta`` is abandoned."""
    if meta[_META_NDIM] < 0:
        length = int(meta[_META_NDIM + 1])
        raise _mismatch(meta[_META_NDIM + 2:].view(np.uint8)[:length].tobytes())


def _mismatch(raw: bytes) -> CollectiveMismatch:
    return CollectiveMismatch(f"the root gave up the call, raising: "
                              f"{raw.decode(errors='replace')}")


class _GivingUp:
    """The root's first phase of an abandoned call: whatever becomes of it, the root's own
    error is the one it raises."""

    __slots__ = ("inner", "error", "deadline")

    def __init__(self, inner: Any, error: ArgumentError) -> None:
        self.inner, self.error, self.deadline = inner, error, inner.deadline

    def poll(self) -> bool:
        """Advance the phase; True once done (its own failure raises the root's error)."""
        try:
            return bool(self.inner.poll())
        except CollopsError:
            raise self.error from None

    def timeout_error(self) -> ArgumentError:
        """The root's error (its peers never came to be told)."""
        return self.error


def give_up(error: ArgumentError, start: Callable[[], Any]) -> Generator[Any, None, Any]:
    """The phases of a call whose root raised ``error``: its first phase, ``start()``ed with
    the abandoned envelope or message, runs; then ``error`` is raised."""
    try:
        first_phase = start()
    except Exception:  # noqa: BLE001 - a checking run (`persistent.check_call`) stops here
        raise error from None
    yield _GivingUp(first_phase, error)
    raise error


@contextmanager
def giving_up(comm: Any) -> Iterator[None]:
    """The local checks of a collective that has not taken its number yet (a communicator's
    `split`): an `ArgumentError` among them gives the call up (`abandon_call`) before it is
    raised, so the peers already in the call are told."""
    try:
        yield
    except ArgumentError as exc:
        abandon_call(comm, exc)
        raise


def abandon_call(comm: Any, error: CollopsError, taken: int | None = None) -> None:
    """Tell the transport this rank gave up the call of number ``taken`` on ``comm`` after
    ``error``; None: the call raised before taking a number, and takes the next one now."""
    seq = comm._reserve() if taken is None else taken
    comm.transport.give_up(make_tag_base(comm.context, seq, 0), error)
