"""mpi4py's ``Status``, ``Request`` and ``Prequest`` over collops' requests.

A facade `Request` holds a collops request (anything with ``test``/``wait``) and, for a
receive into a buffer with displacements, a step run once it completes (`finish`). Once
complete a non-persistent request becomes null (false), as mpi4py's does; waiting on a null
request returns at once with an empty status.
"""

from __future__ import annotations

import inspect
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CollopsError
from .constants import ANY_SOURCE, ANY_TAG, UNDEFINED
from .datatypes import PREDEFINED, Datatype
from .exceptions import ERR_OTHER, ERR_REQUEST, SUCCESS, mpi_error, mpi_exception
from .exceptions import Exception as MPIException
from .handles import Handle
from .layouts import _specs

BYTE = PREDEFINED["BYTE"]


class Status:
    """Where a received message came from, its tag and size."""

    __slots__ = ("source", "tag", "error", "nbytes", "cancelled")
    source: int
    tag: int
    error: int
    nbytes: int
    cancelled: bool

    def __init__(self, status: Status | None = None) -> None:
        """An empty status (source ANY_SOURCE, tag ANY_TAG), or a copy of ``status``."""
        if status is not None and not isinstance(status, Status):
            raise TypeError(f"Status() takes a Status to copy, not {type(status).__name__}")
        self.source = ANY_SOURCE if status is None else status.source
        self.tag = ANY_TAG if status is None else status.tag
        self.error = SUCCESS if status is None else status.error
        self.nbytes = 0 if status is None else status.nbytes
        self.cancelled = False if status is None else status.cancelled

    def __repr__(self) -> str:
        return f"<collops.MPI.Status source={self.source} tag={self.tag} bytes={self.nbytes}>"

    def _set_from(self, other: Any) -> None:
        """Fill from a collops `Status` (``source``, ``tag``, ``nbytes``, ``cancelled``)."""
        self.source = int(other.source)
        self.tag = int(other.tag)
        self.nbytes = int(other.nbytes)
        self.cancelled = bool(getattr(other, "cancelled", False))
        self.error = SUCCESS

    def Get_source(self) -> int:
        """The sender's rank."""
        return self.source

    def Set_source(self, source: int) -> None:
        """Set the source."""
        self.source = int(source)

    def Get_tag(self) -> int:
        """The message's tag."""
        return self.tag

    def Set_tag(self, tag: int) -> None:
        """Set the tag."""
        self.tag = int(tag)

    def Get_error(self) -> int:
        """The error code."""
        return self.error

    def Set_error(self, error: int) -> None:
        """Set the error code."""
        self.error = int(error)

    def Get_count(self, datatype: Datatype = BYTE) -> int:
        """Elements of ``datatype`` received (UNDEFINED if not a whole number)."""
        size = datatype.Get_size()
        if size == 0:
            return 0 if self.nbytes == 0 else UNDEFINED
        return self.nbytes // size if self.nbytes % size == 0 else UNDEFINED

    def Get_elements(self, datatype: Datatype) -> int:
        """Basic elements of ``datatype``'s base type received."""
        base = datatype.base
        if base is None:
            return UNDEFINED
        return self.nbytes // base.itemsize if self.nbytes % base.itemsize == 0 else UNDEFINED

    def Set_elements(self, datatype: Datatype, count: int) -> None:
        """Record ``count`` elements of ``datatype`` as received."""
        self.nbytes = int(count) * datatype.Get_size()

    def Is_cancelled(self) -> bool:
        """Whether the request was cancelled."""
        return self.cancelled

    def Set_cancelled(self, flag: bool) -> None:
        """Mark as cancelled or not."""
        self.cancelled = bool(flag)

    @property
    def count(self) -> int:
        """Bytes received."""
        return self.Get_count()

    @count.setter
    def count(self, value: int) -> None:
        self.nbytes = int(value)

    @property
    def cancelled_flag(self) -> bool:
        """`Is_cancelled`."""
        return self.cancelled


def fill(status: Status | None, value: Any) -> None:
    """Copy a collops status (found in ``value``, or ``value`` itself) into ``status``."""
    if status is None:
        return
    found = value[1] if isinstance(value, tuple) and len(value) == 2 else value
    if hasattr(found, "nbytes") and hasattr(found, "source"):
        status._set_from(found)
    else:
        status.__init__()  # type: ignore[misc]


class Request(Handle):
    """A non-blocking operation in flight (null once complete)."""

    __slots__ = ("_request", "_finish", "_value", "_status", "_same", "__weakref__")
    _request: Any

    def __init__(self, request: Any = None, finish: Callable[[Any], Any] | None = None) -> None:
        """Wrap a collops request; ``finish(value)`` runs once it completes and gives the
        value `wait` returns. ``Request(other)`` copies another facade request's handle."""
        #: what identifies the request when it is not ``_request``: a `Request` copy of a
        #: persistent request is another handle of it (None otherwise)
        self._same: Any = None
        if isinstance(request, Request):
            if isinstance(request, Prequest):
                self._same = request._handle()
            request, finish = request._request, request._finish
        self._request = request
        self._finish = finish
        self._value: Any = None
        self._status: Any = None

    def __bool__(self) -> bool:
        return self._request is not None

    def _handle(self) -> Any:
        """What identifies the request (None when null): equal handles, equal requests."""
        same = self._same
        return self._request if same is None else same

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self._handle() is other._handle()

    def __hash__(self) -> int:
        return id(self._handle())

    def __repr__(self) -> str:
        return f"<collops.MPI.{type(self).__name__} {'active' if self else 'null'}>"

    def __reduce__(self) -> Any:
        """Pickled as mpi4py's: REQUEST_NULL is itself, a null copy an equal handle; an
        active request cannot be pickled (its operation belongs to its process)."""
        if self is REQUEST_NULL:
            return "REQUEST_NULL"
        if not self:
            return type(self), ()
        raise ValueError(f"cannot pickle {self!r}: an operation belongs to its process")

    def _complete(self, value: Any) -> Any:
        if self._finish is not None:
            value = self._finish(value)
        self._status = value
        self._value = value[0] if isinstance(value, tuple) and len(value) == 2 and \
            hasattr(value[1], "nbytes") else value
        self._release()
        return self._value

    def _release(self) -> None:
        self._request = None

    def _wait(self, status: Status | None) -> Any:
        if self._request is None:
            if status is not None:
                status.__init__()  # type: ignore[misc]
            return None
        try:
            value = self._complete(self._request.wait())
        except CollopsError as exc:
            self._release()
            raise mpi_error(exc) from None
        fill(status, self._status)
        return value

    def _test(self, status: Status | None) -> tuple[bool, Any]:
        if self._request is None:
            if status is not None:
                status.__init__()  # type: ignore[misc]
            return True, None
        try:
            if not self._request.test():
                return False, None
            return True, self._wait(status)
        except CollopsError as exc:
            self._release()
            raise mpi_error(exc) from None

    def Wait(self, status: Status | None = None) -> bool:
        """Block until complete."""
        request = self._request
        if status is None and self._finish is None and request is not None and (
                type(self) is Request):  # a collective's, the commonest: its value is kept
            try:
                value = request.wait()
            except CollopsError as exc:
                raise mpi_error(exc) from None
            finally:
                self._request = None
            self._status = value  # as `_complete` keeps it
            self._value = value[0] if type(value) is tuple and len(value) == 2 and hasattr(
                value[1], "nbytes") else value
            return True
        self._wait(status)
        return True

    def Test(self, status: Status | None = None) -> bool:
        """Whether complete (advancing it)."""
        return self._test(status)[0]

    def wait(self, status: Status | None = None) -> Any:
        """Block until complete; the received object (None for a send)."""
        return self._wait(status)

    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        """``(flag, object)``: whether complete, and the received object if so."""
        return self._test(status)

    def Get_status(self, status: Status | None = None) -> bool:
        """Whether complete (advancing it), without completing the request: its status then
        goes into ``status``; a null request's is empty."""
        if self._request is None:
            if status is not None:
                status.__init__()  # type: ignore[misc]
            return True
        try:
            if not self._request.test():
                return False
            query = getattr(self._request, "query", None)  # (a Grequest's: not freed yet)
            fill(status, query() if query is not None else self._request.wait())
        except CollopsError as exc:
            raise mpi_error(exc) from None
        return True

    get_status = Get_status

    def Cancel(self) -> None:
        """Cancel a pending receive (collective operations cannot be cancelled)."""
        cancel = getattr(self._request, "cancel", None)
        if cancel is None:
            raise mpi_exception(ERR_REQUEST, "Request.Cancel: only receives can be cancelled")
        try:
            cancel()
        except CollopsError as exc:
            raise mpi_error(exc) from None

    cancel = Cancel

    def Free(self) -> None:
        """Release the request (an operation in flight still completes)."""
        free = getattr(self._request, "free", None)
        if free is not None:
            free()
        self._request = None

    @classmethod
    def Waitall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """Wait for every request."""
        cls.waitall(requests, statuses)
        return True

    @classmethod
    def waitall(cls, requests: Sequence[Request],
                statuses: list[Status] | None = None) -> list[Any]:
        """Wait for every request; their objects."""
        got = [Status() for _ in requests]
        values = [request._wait(got[i]) for i, request in enumerate(requests)]
        _store(statuses, got)
        return values

    @classmethod
    def Testall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        """Whether all are complete (completing those that are only when all are)."""
        return cls.testall(requests, statuses)[0]

    @classmethod
    def testall(cls, requests: Sequence[Request],
                statuses: list[Status] | None = None) -> tuple[bool, list[Any] | None]:
        """``(flag, objects)``: all complete, and their objects if so."""
        if not _all_done(requests):
            return False, None
        return True, cls.waitall(requests, statuses)

    @classmethod
    def Get_status_all(cls, requests: Sequence[Request],
                       statuses: list[Status] | None = None) -> bool:
        """Whether all are complete, without completing them (their statuses if so)."""
        if not _all_done(requests):
            return False
        got = [Status() for _ in requests]
        for i, request in enumerate(requests):
            request.Get_status(got[i])
        _store(statuses, got)
        return True

    get_status_all = Get_status_all

    @classmethod
    def Waitany(cls, requests: Sequence[Request], status: Status | None = None) -> int:
        """The index of a completed request (UNDEFINED when all are null)."""
        return cls.waitany(requests, status)[0]

    @classmethod
    def waitany(cls, requests: Sequence[Request],
                status: Status | None = None) -> tuple[int, Any]:
        """``(index, object)`` of a completed request (UNDEFINED, None when all are null)."""
        from ..runtime.request import wait_any
        live = [i for i, r in enumerate(requests) if r._request is not None]
        if not live:
            if status is not None:
                status.__init__()  # type: ignore[misc]
            return UNDEFINED, None
        for i in live:  # an already complete one first, as MPI's progress would find it
            if requests[i]._advanced():
                return i, requests[i]._wait(status)
        try:
            k, _ = wait_any([requests[i]._request for i in live])
        except CollopsError as exc:
            raise mpi_error(exc) from None
        return live[k], requests[live[k]]._wait(status)

    @classmethod
    def Testany(cls, requests: Sequence[Request],
                status: Status | None = None) -> tuple[int, bool]:
        """``(index, flag)``: a completed request's index, or (UNDEFINED, False)."""
        index, flag, _ = cls.testany(requests, status)
        return index, flag

    @classmethod
    def testany(cls, requests: Sequence[Request],
                status: Status | None = None) -> tuple[int, bool, Any]:
        """``(index, flag, object)`` of a completed request if any."""
        live = [i for i, r in enumerate(requests) if r._request is not None]
        if not live:
            if status is not None:
                status.__init__()  # type: ignore[misc]
            return UNDEFINED, True, None
        for i in live:
            if requests[i]._advanced():
                return i, True, requests[i]._wait(status)
        return UNDEFINED, False, None

    @classmethod
    def Get_status_any(cls, requests: Sequence[Request],
                       status: Status | None = None) -> tuple[int, bool]:
        """``(index, flag)`` of a complete request, without completing it (UNDEFINED, True
        when all are null; UNDEFINED, False when none is complete)."""
        live = [i for i, r in enumerate(requests) if r._request is not None]
        if not live:
            if status is not None:
                status.__init__()  # type: ignore[misc]
            return UNDEFINED, True
        for i in live:
            if requests[i]._advanced():
                requests[i].Get_status(status)
                return i, True
        return UNDEFINED, False

    get_status_any = Get_status_any

    @classmethod
    def Waitsome(cls, requests: Sequence[Request],
                 statuses: list[Status] | None = None) -> list[int] | None:
        """Indices of the requests completed (at least one; None when all are null)."""
        return cls.waitsome(requests, statuses)[0]

    @classmethod
    def waitsome(cls, requests: Sequence[Request], statuses: list[Status] | None = None
                 ) -> tuple[list[int] | None, list[Any] | None]:
        """``(indices, objects)`` of the requests completed, at least one (None, None when
        all are null)."""
        first = Status()
        index, value = cls.waitany(requests, first)
        if index == UNDEFINED:
            return None, None
        indices, values, got = _complete_done(requests, statuses is not None)
        _store(statuses, [first, *got])
        return [index, *indices], [value, *values]

    @classmethod
    def Testsome(cls, requests: Sequence[Request],
                 statuses: list[Status] | None = None) -> list[int] | None:
        """Indices of the requests complete now (None when all are null)."""
        return cls.testsome(requests, statuses)[0]

    @classmethod
    def testsome(cls, requests: Sequence[Request], statuses: list[Status] | None = None
                 ) -> tuple[list[int] | None, list[Any] | None]:
        """``(indices, objects)`` of the requests complete now (None, None when all are
        null)."""
        if all(r._request is None for r in requests):
            return None, None
        indices, values, got = _complete_done(requests, statuses is not None)
        _store(statuses, got)
        return indices, values

    @classmethod
    def Get_status_some(cls, requests: Sequence[Request],
                        statuses: list[Status] | None = None) -> list[int] | None:
        """Indices of the requests complete now, without completing them (None when all
        are null)."""
        if all(r._request is None for r in requests):
            return None
        indices = [i for i, r in enumerate(requests) if r._request is not None and
                   r._advanced()]
        got = [Status() for _ in indices]
        for status, i in zip(got, indices, strict=True):
            requests[i].Get_status(status)
        _store(statuses, got)
        return indices

    get_status_some = Get_status_some

    def _advanced(self) -> bool:
        """Advance an active request; whether it is complete (its error raised as MPI's)."""
        try:
            return bool(self._request.test())
        except CollopsError as exc:
            self._release()
            raise mpi_error(exc) from None


def _all_done(requests: Sequence[Request]) -> bool:
    """Advance every active request; whether all are complete (null ones are)."""
    done = [r._request is None or r._advanced() for r in requests]  # every one advances
    return all(done)


def _complete_done(requests: Sequence[Request], statuses: bool
                   ) -> tuple[list[int], list[Any], list[Status]]:
    """Complete the active requests that are complete now: their indices, values and (when
    ``statuses``) statuses."""
    indices = [i for i, r in enumerate(requests) if r._request is not None and r._advanced()]
    got = [Status() for _ in indices] if statuses else [None] * len(indices)
    values = [requests[i]._wait(status) for i, status in zip(indices, got, strict=True)]
    return indices, values, got  # type: ignore[return-value]


def _store(statuses: list[Status] | None, got: Sequence[Status]) -> None:
    """Copy ``got`` into ``statuses`` as mpi4py does: a list grows to hold them all; a shorter
    sequence of another kind gets the first ones."""
    if statuses is None:
        return
    if len(got) > len(statuses) and isinstance(statuses, list):
        statuses.extend(Status() for _ in range(len(statuses), len(got)))
    for target, status in zip(statuses, got, strict=False):
        target.__init__(status)  # type: ignore[misc]


class Prequest(Request):
    """A persistent request: each `Start` runs the operation again; it stays usable after
    completing (inactive until the next start)."""

    __slots__ = ("_start", "_active")

    def __init__(self, start: Callable[[], Any] | None = None,
                 finish: Callable[[Any], Any] | None = None) -> None:
        """``start()`` begins one run and returns its collops request; ``Prequest(other)``
        is another handle of ``other``."""
        if isinstance(start, Prequest):
            start, finish = start._start, start._finish
        elif isinstance(start, Request):
            raise TypeError(f"Prequest() takes a persistent request, not a "
                            f"{type(start).__name__}")
        super().__init__(None, finish)
        self._start = start
        self._active: Any = None

    def __bool__(self) -> bool:
        return self._start is not None

    def _handle(self) -> Any:
        return self._start

    def _release(self) -> None:
        self._request = None

    def Start(self) -> None:
        """Begin one run."""
        if self._start is None:
            raise mpi_exception(ERR_REQUEST, "Prequest.Start: the request was freed")
        try:
            self._request = self._start()
        except CollopsError as exc:
            raise mpi_error(exc) from None

    @classmethod
    def Startall(cls, requests: Sequence[Prequest]) -> None:
        """Start every request."""
        for request in requests:
            request.Start()

    def Free(self) -> None:
        """Release the request."""
        if self._request is not None:
            self._wait(None)
        self._start = None


class _Generalized:
    """The operation of a `Grequest`: complete once the program says so (`complete`); its
    status is what ``query_fn`` sets, ``free_fn`` runs once when it is waited for (or freed),
    ``cancel_fn(completed)`` on `Grequest.Cancel`. A callback's exception is printed and
    raised as ``MPI.Exception`` (its own class, or ``ERR_OTHER``), as mpi4py does."""

    def __init__(self, query: Any, free: Any, cancel: Any, args: Any, kwargs: Any) -> None:
        self.query_fn, self.free_fn, self.cancel_fn = query, free, cancel
        self.args, self.kwargs = tuple(args or ()), dict(kwargs or {})
        self.done = threading.Event()
        self.value: Any = None
        self.freed = False

    def _called(self, fn: Any, *first: Any) -> None:
        if fn is None:
            return
        try:
            fn(*first, *self.args, **self.kwargs)
        except Exception as exc:
            traceback.print_exc()
            if isinstance(exc, MPIException):
                raise
            raise mpi_exception(ERR_OTHER, f"Grequest: {getattr(fn, '__name__', fn)} "
                                f"raised {exc!r}") from exc

    def complete(self, value: Any = None) -> None:
        """The operation is done; ``value`` is what `wait` gives."""
        self.value = value
        self.done.set()

    def test(self) -> bool:
        """Whether the program completed it."""
        return self.done.is_set()

    def query(self) -> Status:
        """Its status, as ``query_fn`` sets it (an empty one without it)."""
        status = Status()
        self._called(self.query_fn, status)
        return status

    def wait(self) -> tuple[Any, Status]:
        """Wait for `complete` (another thread's, as MPI's); its value and status, then
        ``free_fn``."""
        self.done.wait()
        try:
            status = self.query()
        finally:
            self.free()
        return self.value, status

    def cancel(self) -> None:
        """``cancel_fn(completed)``."""
        self._called(self.cancel_fn, self.done.is_set())

    def free(self) -> None:
        """``free_fn``, once."""
        if not self.freed:
            self.freed = True
            self._called(self.free_fn)


class Grequest(Request):
    """A generalized request: an operation the program runs itself and completes with
    `Complete`; `Wait`/`Test` then give the status ``query_fn`` sets."""

    __slots__ = ()

    def __init__(self, request: Any = None) -> None:
        """Another handle of a `Grequest` (the null one when None)."""
        if request is not None and not isinstance(request, Grequest):
            raise TypeError(f"Grequest() takes a Grequest, not a {type(request).__name__}")
        super().__init__(request)

    @classmethod
    def Start(cls, query_fn: Any = None, free_fn: Any = None, cancel_fn: Any = None,
              args: Any = None, kwargs: Any = None) -> Grequest:
        """A new generalized request (``query_fn(status, *args, **kwargs)``,
        ``free_fn(*args, **kwargs)``, ``cancel_fn(completed, *args, **kwargs)``)."""
        request = cls()
        request._request = _Generalized(query_fn, free_fn, cancel_fn, args, kwargs)
        return request

    def Complete(self) -> None:
        """Mark the operation complete."""
        self.complete()

    def complete(self, obj: Any = None) -> None:
        """Mark the operation complete; ``obj`` is what `wait`/`test` give."""
        if self._request is None:
            raise mpi_exception(ERR_REQUEST, "Grequest.Complete: the request is null")
        self._request.complete(obj)

    def _wait(self, status: Status | None) -> Any:
        try:
            return super()._wait(status)
        except BaseException:
            self._release()  # a callback failed: the request is gone, as MPI_Wait leaves it
            raise

    def Wait(self, status: Status | None = None) -> bool:
        """Block until complete (`Complete`, from another thread if need be)."""
        self._wait(status)
        return True


REQUEST_NULL = Request()


def compiled_method(kind: str, own: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` compiled as a whole (`_specs.Starter`, `_starters.c`: its commonest calls in
    one C call, every other one ``method``'s), or ``method`` itself where `_specs` is not
    built; ``kind`` names the call (a v-collective's, or "wait"), ``own`` collops' method."""
    if _specs is None:  # pragma: no cover - a build without a C compiler
        return method
    starter = _specs.Starter(kind, own, method)
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(starter, attribute, getattr(method, attribute))
    starter.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return starter  # type: ignore[no-any-return]


if _specs is not None:  # what the compiled methods wrap and raise
    _specs.configure_requests(Request, mpi_error, CollopsError)


def _new_request(started: Any) -> Request:
    return Request(started, None)


#: ``Request(started, None)`` for collops' request ``started`` (compiled: without __init__)
new_request: Callable[[Any], Request] = (_new_request if _specs is None
                                         else _specs.wrap_request)
#: the commonest `Wait` (a collective's request, no status) compiled
Request.Wait = compiled_method("wait", "wait", Request.Wait)  # type: ignore[method-assign]
