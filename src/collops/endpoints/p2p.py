"""PAMI's point-to-point on endpoints: active messages to a dispatch id set on the target
context (`send`, `send_immediate`), one-sided `rput`/`rget` between memory regions, fences
and work posted to a context's progress.

Everything travels by collops' own point-to-point (`runtime/p2p.py`) on a communicator the
client reserves at creation (a `dup` of its task communicator), so it never meets the user's
messages or the geometries'. *Control* messages — pickled records: an active message's
header (with its data when small: eager), acknowledgements, put and get requests, fence
markers — travel to a task under one tag, `CONTROL_TAG`, with the target context's offset;
whichever context of the task advances routes them to their contexts' inboxes in the order
each task sent them, and refuses, at both ends, one for a context the task never created. A
larger payload is a message of its own under a tag unique to the transfer
(`PAYLOAD_BASE` + a number the sending task never reuses while it is in flight): the receiver
posts it straight into the buffer the dispatch function named through its `Recv` (PAMI's
``pami_recv_t``) or into the memory region. The target acknowledges every `send`, `rput` and
failed `rget` once the data has landed, which is the origin's remote completion.

Callbacks run inside `Context.advance`, on whichever thread advances the context.
"""

from __future__ import annotations

import pickle
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..datatypes import as_array, dtype_from_token, dtype_token
from ..errors import ArgumentError
from ..runtime.arguments import checked_int
from ..runtime.matching import ANY_SOURCE
from . import client as client_module  # a cycle: the package imports client first
from .p2p_values import (
    AGAIN,
    Memregion,
    Recv,
    Transfer,
    bytes_of,
    error_from,
    error_record,
    recv_buffer_error,
)
from .xfer import DispatchError

if TYPE_CHECKING:
    from ..runtime.request import Request
    from .client import Client, Context, Endpoint

__all__ = ["AGAIN", "EAGER_LIMIT", "HEADER_LIMIT", "IMMEDIATE_LIMIT", "PAYLOAD_BASE",
           "Memregion", "PointToPoint", "Recv", "Transfer"]

#: data bytes an active message carries with its header (the dispatch function gets them)
EAGER_LIMIT = 4096
#: header + data bytes of `send_immediate` (PAMI's PAMI_DISPATCH_SEND_IMMEDIATE_MAX)
IMMEDIATE_LIMIT = 512
#: bytes of an active message's header
HEADER_LIMIT = 4096
#: tags at and above this carry payloads (below 2**29: MPICH's TAG_UB, as point-to-point
#: over MPI uses MPI's own tags)
PAYLOAD_BASE = 1 << 28
#: the tag of every control message to a task, the target context inside
CONTROL_TAG = 0


class PointToPoint:
    """One context's point-to-point state: dispatch functions, memory regions, transfers
    and receives in flight, posted work and fences."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.client: Client = context.client
        self.dispatch: dict[int, Callable[..., Any]] = {}
        self.regions: dict[int, np.ndarray] = {}
        self.transfers: dict[int, Transfer] = {}       # awaiting an acknowledgement or data
        self.sending: list[tuple[Request, Transfer | None]] = []
        self.receiving: list[tuple[Request, Callable[[], None]]] = []
        self.immediate_targets: set[tuple[int, int]] = set()
        self.fences: list[tuple[Transfer, list[Transfer]]] = []
        self.work: deque[Callable[[Context], Any]] = deque()
        #: control records routed to this context (`_route`), with their source task
        self.inbox: deque[tuple[tuple[Any, ...], int]] = deque()
        #: errors of messages this context took, to raise (one per advance)
        self.errors: list[BaseException] = []
        #: transfers of this context that failed, to raise unless `Transfer.wait` did
        self.failed: list[Transfer] = []

    # -- helpers ---------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        """This task."""
        return self.client.task

    def _target(self, call: str, target: Any) -> Endpoint:
        if not isinstance(target, client_module.Endpoint) or target.client is not self.client:
            raise ArgumentError(call, "target", target, "must be an endpoint of client "
                                f"{self.client.name!r} (client.endpoint(task, context))",
                                self.rank)
        return target

    def _data(self, call: str, data: Any) -> np.ndarray:
        if data is None:
            return np.empty(0, np.uint8)
        if isinstance(data, np.ndarray) and not data.flags.c_contiguous:
            raise ArgumentError(call, "data", data.shape, "must be a C-contiguous array",
                                self.rank)
        return as_array(data, call, "data", self.rank)

    def _header(self, call: str, header: Any) -> bytes:
        blob = bytes(header)
        if len(blob) > HEADER_LIMIT:
            raise ArgumentError(call, "header", f"{len(blob)} bytes",
                                f"must be at most HEADER_LIMIT={HEADER_LIMIT} bytes", self.rank)
        return blob

    def _send_record(self, record: tuple[Any, ...], task: int, context: int,
                     transfer: Transfer | None = None) -> None:
        with self.client.transport_lock:
            request = self.client.p2p_comm.isend_object((context, record), task, CONTROL_TAG)
        self.sending.append((request, transfer))

    def _send_payload(self, array: np.ndarray, task: int, tag: int,
                      transfer: Transfer | None) -> None:
        with self.client.transport_lock:
            request = self.client.p2p_comm.isend(array, task, tag)
        self.sending.append((request, transfer))

    def _receive_payload(self, buffer: np.ndarray, source: int, tag: int,
                         then: Callable[[], None]) -> Request:
        with self.client.transport_lock:
            request = self.client.p2p_comm.irecv(buffer, source, tag)
        self.receiving.append((request, then))
        return request

    def _start(self, transfer: Transfer) -> tuple[int, int]:
        """A new transfer's number and its payload tag."""
        number = self.client.next_number()
        self.transfers[number] = transfer
        return number, PAYLOAD_BASE + number % PAYLOAD_BASE

    # -- the calls -------------------------------------------------------------------------
    def send(self, target: Any, dispatch_id: Any, header: Any, data: Any,
             done: Callable[[Transfer], Any] | None,
             remote_done: Callable[[Transfer], Any] | None) -> Transfer:
        """PAMI_Send (see `Context.send`)."""
        call = "Context.send"
        target = self._target(call, target)
        dispatch_id = checked_int(call, "dispatch_id", dispatch_id, self.rank)
        blob, array = self._header(call, header), self._data(call, data)
        head = ("am", self.context.offset, dispatch_id, blob, array.nbytes,
                dtype_token(array.dtype), array.shape)
        return self._deliver(head, array, Transfer(self.context, call, target, done,
                                                   remote_done))

    def _deliver(self, head: tuple[Any, ...], data: np.ndarray, transfer: Transfer) -> Transfer:
        """Send the record ``head`` + (eager data, payload tag, number) to the transfer's
        target, and the data as a payload of its own when it is too large to go with it."""
        target = transfer.target
        assert target is not None
        number, tag = self._start(transfer)
        eager = data.tobytes() if data.nbytes <= EAGER_LIMIT else None
        self._send_record(head + (eager, None if eager is not None else tag, number),
                          target.task, target.context_offset,
                          transfer if eager is not None else None)
        if eager is None:
            self._send_payload(data, target.task, tag, transfer)
        return transfer

    def send_immediate(self, target: Any, dispatch_id: Any, header: Any, data: Any) -> None:
        """PAMI_Send_immediate (see `Context.send_immediate`)."""
        call = "Context.send_immediate"
        target = self._target(call, target)
        dispatch_id = checked_int(call, "dispatch_id", dispatch_id, self.rank)
        blob, array = self._header(call, header), self._data(call, data)
        if len(blob) + array.nbytes > IMMEDIATE_LIMIT:
            raise ArgumentError(call, "data", f"{len(blob)} + {array.nbytes} bytes",
                                f"header and data must fit IMMEDIATE_LIMIT={IMMEDIATE_LIMIT} "
                                "bytes (use send)", self.rank)
        record = ("am", self.context.offset, dispatch_id, blob, array.nbytes,
                  dtype_token(array.dtype), array.shape, array.tobytes(), None, None)
        self._send_record(record, target.task, target.context_offset)
        self.immediate_targets.add(target.key)

    def memregion(self, array: Any) -> Memregion:
        """PAMI_Memregion_create (see `Context.memregion`)."""
        call = "Context.memregion"
        if not isinstance(array, np.ndarray) or not array.flags.c_contiguous \
                or not array.flags.writeable:
            raise ArgumentError(call, "array", type(array).__name__,
                                "must be a writeable C-contiguous numpy array", self.rank)
        number = self.client.next_number()
        self.regions[number] = bytes_of(array)
        return Memregion(self.rank, self.context.offset, number, array.nbytes)

    def _region(self, call: str, name: str, region: Any, offset: Any, nbytes: int,
                local: bool) -> tuple[Memregion, int]:
        if not isinstance(region, Memregion):
            raise ArgumentError(call, name, region, "must be a Memregion "
                                "(Context.memregion)", self.rank)
        mine = (region.task, region.context) == (self.rank, self.context.offset)
        if local and (not mine or region.region_id not in self.regions):
            raise ArgumentError(call, name, region, "must be a region registered on this "
                                f"context (task {self.rank}, context {self.context.offset})",
                                self.rank)
        offset = checked_int(call, f"{name}_offset", offset, self.rank)
        if offset < 0 or offset + nbytes > region.nbytes:
            raise ArgumentError(call, f"{name}_offset", offset, f"{nbytes} bytes from it do "
                                f"not fit the region's {region.nbytes} bytes", self.rank)
        return region, offset

    def rput(self, local: Any, remote: Any, nbytes: Any, local_offset: Any,
             remote_offset: Any, done: Callable[[Transfer], Any] | None,
             remote_done: Callable[[Transfer], Any] | None) -> Transfer:
        """PAMI_Rput (see `Context.rput`)."""
        call = "Context.rput"
        data, remote, remote_offset = self._one_sided(call, local, remote, nbytes, local_offset,
                                                      remote_offset)
        target = self.client.endpoint(remote.task, remote.context)
        head = ("put", self.context.offset, remote.region_id, remote_offset, data.nbytes)
        return self._deliver(head, data, Transfer(self.context, call, target, done,
                                                  remote_done))

    def rget(self, local: Any, remote: Any, nbytes: Any, local_offset: Any,
             remote_offset: Any, done: Callable[[Transfer], Any] | None) -> Transfer:
        """PAMI_Rget (see `Context.rget`)."""
        call = "Context.rget"
        into, remote, remote_offset = self._one_sided(call, local, remote, nbytes, local_offset,
                                                      remote_offset)
        target = self.client.endpoint(remote.task, remote.context)
        transfer = Transfer(self.context, call, target, done, None)
        number, tag = self._start(transfer)

        def landed() -> None:
            if self.transfers.pop(number, None) is not None:
                transfer.complete_remote()

        transfer.request = self._receive_payload(into, target.task, tag, landed)
        self._send_record(("get", self.context.offset, remote.region_id, remote_offset,
                           into.nbytes, tag, number), target.task, target.context_offset)
        return transfer

    def _one_sided(self, call: str, local: Any, remote: Any, nbytes: Any, local_offset: Any,
                   remote_offset: Any) -> tuple[np.ndarray, Memregion, int]:
        """A put's or get's checked arguments: the bytes of the local region it reads or
        writes, the remote region and the offset in it."""
        count = checked_int(call, "nbytes", nbytes, self.rank)
        if count < 0:
            raise ArgumentError(call, "nbytes", nbytes, "must be >= 0", self.rank)
        local, start = self._region(call, "local", local, local_offset, count, True)
        remote, remote_start = self._region(call, "remote", remote, remote_offset, count, False)
        return self.regions[local.region_id][start:start + count], remote, remote_start

    def fence(self, endpoint: Any, done: Callable[[Transfer], Any] | None) -> Transfer:
        """PAMI_Fence_all / PAMI_Fence_endpoint (see `Context.fence`)."""
        call = "Context.fence"
        key = None if endpoint is None else self._target(call, endpoint).key
        earlier = [t for t in self.transfers.values()
                   if key is None or (t.target is not None and t.target.key == key)]
        fence = Transfer(self.context, call, endpoint, None, done)
        for task, context in sorted(self.immediate_targets):
            if key is None or key == (task, context):
                marker = Transfer(self.context, call, self.client.endpoint(task, context),
                                  None, None)
                number, _ = self._start(marker)
                self._send_record(("fence", self.context.offset, number), task, context)
                earlier.append(marker)
        self.immediate_targets = set() if key is None else self.immediate_targets - {key}
        self.fences.append((fence, earlier))
        return fence

    def post(self, work: Callable[[Context], Any]) -> None:
        """PAMI_Context_post (see `Context.post`)."""
        if not callable(work):
            raise ArgumentError("Context.post", "work", work, "must be callable", self.rank)
        self.work.append(work)

    # -- progress --------------------------------------------------------------------------
    def poll(self) -> int:
        """Handle what has arrived and what has completed; events handled. Raises the first
        error met here (a failed transfer of this context, or a message this context could
        not take) once everything ready has been handled."""
        events = 0
        for _ in range(len(self.work)):
            work = self.work.popleft()
            if work(self.context) is AGAIN:
                self.work.append(work)
            events += 1
        events += self._route()
        while self.inbox:
            record, source = self.inbox.popleft()
            self._handle(record, source)
            events += 1
        events += self._poll_requests()
        events += self._poll_fences()
        while self.failed:          # one error per advance: the next advance raises the next
            transfer = self.failed.pop(0)
            if not transfer.reported and transfer.error is not None:
                transfer.reported = True
                raise transfer.error
        if self.errors:
            raise self.errors.pop(0)
        return events

    def _route(self) -> int:
        """Take the control messages that arrived for any context of this task into their
        contexts' inboxes (in arrival order: under the transport lock); refuse those for a
        context this task never created, at both ends."""
        comm, contexts, routed = self.client.p2p_comm, self.client.contexts, 0
        with self.client.transport_lock:
            while (message := comm.improbe(ANY_SOURCE, CONTROL_TAG)) is not None:
                raw, status = message.recv()
                offset, record = pickle.loads(raw.tobytes())
                routed += 1
                if offset < len(contexts):
                    contexts[offset].p2p.inbox.append((record, status.source))
                else:
                    self._refuse(record, status.source, offset)
        return routed

    def _refuse(self, record: tuple[Any, ...], source: int, offset: int) -> None:
        """Answer a message sent to context ``offset``, which this task never created: the
        origin's transfer fails, and this context's advance raises."""
        kind, origin_context = record[0], record[1]
        call = {"am": "Context.send", "put": "Context.rput", "get": "Context.rget",
                "fence": "Context.fence"}.get(kind, "Context")
        error = ArgumentError(call, "target", f"endpoint (task {self.rank}, context {offset})",
                              f"task {self.rank} has no context {offset} (it created "
                              f"{len(self.client.contexts)}: Client.create_contexts); sent by "
                              f"task {source}, context {origin_context}", self.rank)
        self.errors.append(error)
        if kind == "ack":
            return
        if kind in ("am", "put") and record[-2] is not None:  # drain its payload
            self._receive_payload(np.empty(record[4], np.uint8), source, record[-2],
                                  lambda: None)
        self._send_record(("ack", record[-1], error_record(error)), source, origin_context)

    def _poll_requests(self) -> int:
        events = 0
        with self.client.transport_lock:
            receiving = [(r, then) for r, then in self.receiving if r.test()]
            sent = [(r, t) for r, t in self.sending if r.test()]
        for request, then in receiving:
            self.receiving.remove((request, then))
            then()
            events += 1
        for request, transfer in sent:
            self.sending.remove((request, transfer))
            if transfer is not None and transfer.error is None:
                transfer.complete_local()
            events += 1
        return events

    def _poll_fences(self) -> int:
        finished = [(f, earlier) for f, earlier in self.fences
                    if all(t.completed for t in earlier)]
        for fence, earlier in finished:
            self.fences.remove((fence, earlier))
            fence.complete_remote()
        return len(finished)

    @property
    def pending(self) -> int:
        """Transfers, receives, fences and posted work in flight, and messages routed here
        by another context's advance and not handled yet."""
        return (len(self.transfers) + len(self.receiving) + len(self.fences)
                + len(self.work) + len(self.inbox))

    # -- the target's side -----------------------------------------------------------------
    def _handle(self, record: tuple[Any, ...], source: int) -> None:
        kind = record[0]
        if kind == "am":
            self._active_message(source, *record[1:])
        elif kind == "put":
            self._put(source, *record[1:])
        elif kind == "get":
            self._get(source, *record[1:])
        elif kind == "fence":
            self._acknowledge(source, record[1], record[2], None)
        else:
            self._acknowledged(record[1], record[2])

    def _acknowledge(self, task: int, context: int, number: int | None,
                     error: BaseException | None, raise_here: bool = True) -> None:
        if error is not None and raise_here:
            self.errors.append(error)
        if number is not None:
            record = None if error is None else error_record(error)
            self._send_record(("ack", number, record), task, context)

    def _acknowledged(self, number: int | None, error: tuple[Any, ...] | None) -> None:
        transfer = self.transfers.pop(number, None) if number is not None else None
        if transfer is None:
            if number is None and error is not None:   # a refused send_immediate
                self.errors.append(error_from(error))
            return
        if error is None:
            transfer.complete_remote()
            return
        transfer.error = error_from(error)
        if transfer.request is not None:        # a failed get: its data will never come
            with self.client.transport_lock:
                transfer.request.cancel()  # type: ignore[attr-defined]
        self.failed.append(transfer)

    def _active_message(self, source: int, origin_context: int, dispatch_id: int,
                        header: bytes, nbytes: int, token: str, shape: tuple[int, ...],
                        eager: bytes | None, tag: int | None, number: int | None) -> None:
        origin = self.client.endpoint(source, origin_context)
        fn = self.dispatch.get(dispatch_id)
        error: BaseException | None = None
        if fn is None:
            error = ArgumentError(
                "Context.send", "dispatch_id", dispatch_id,
                f"no dispatch function is set for it on context {self.context.offset} of "
                f"task {self.rank} (Context.set_dispatch)", self.rank)
        dtype = dtype_from_token(token)
        if eager is not None:
            if fn is not None:
                data = np.frombuffer(eager, dtype).reshape(shape)
                error = self._call(fn, header, data, origin, None)
            self._acknowledge(source, origin_context, number, error)
            return
        recv = Recv(origin, nbytes, dtype, shape)
        if fn is not None:
            error = self._call(fn, header, None, origin, recv) or recv_buffer_error(
                "Context.send (dispatch's recv)", recv, self.rank)
        into = bytes_of(recv.buffer)[:nbytes] if error is None else np.empty(nbytes, np.uint8)
        assert tag is not None

        def landed() -> None:
            failure = error
            if failure is None and recv.done is not None:
                failure = self._call(recv.done, recv)
            self._acknowledge(source, origin_context, number, failure)

        self._receive_payload(into, source, tag, landed)

    def _call(self, fn: Callable[..., Any], *args: Any) -> BaseException | None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - reported to both ends
            return DispatchError(f"the dispatch function on task {self.rank}, context "
                                 f"{self.context.offset} raised {type(exc).__name__}: {exc}")
        return None

    def _region_at(self, call: str, region_id: int, offset: int,
                   nbytes: int) -> tuple[np.ndarray | None, BaseException | None]:
        region = self.regions.get(region_id)
        if region is None or offset + nbytes > region.nbytes:
            return None, ArgumentError(call, "remote", region_id, "no such memory region "
                                       f"on task {self.rank}, context {self.context.offset} "
                                       "(destroyed?)", self.rank)
        return region[offset:offset + nbytes], None

    def _put(self, source: int, origin_context: int, region_id: int, offset: int, nbytes: int,
             eager: bytes | None, tag: int | None, number: int) -> None:
        into, error = self._region_at("Context.rput", region_id, offset, nbytes)
        if eager is not None:
            if into is not None:
                into[:] = np.frombuffer(eager, np.uint8)
            self._acknowledge(source, origin_context, number, error, raise_here=False)
            return
        assert tag is not None
        self._receive_payload(np.empty(nbytes, np.uint8) if into is None else into, source,
                              tag, lambda: self._acknowledge(source, origin_context, number,
                                                             error, raise_here=False))

    def _get(self, source: int, origin_context: int, region_id: int, offset: int, nbytes: int,
             tag: int, number: int) -> None:
        data, error = self._region_at("Context.rget", region_id, offset, nbytes)
        if data is None:
            self._acknowledge(source, origin_context, number, error, raise_here=False)
            return
        self._send_payload(data, source, tag, None)
