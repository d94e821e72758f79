"""Clients, contexts and endpoints (seed 001).

A `Client` is one program's use of the messaging layer on one task (a rank of a collops
communicator — a thread in process, a process on shared memory). It owns *contexts*:
communication resources, each with its own progress, several per task. An `Endpoint` names
a (client, context, task) triple; a geometry is a list of endpoints, so a task may take part
through several contexts at once.

Progress is explicit: `Context.advance` drives the transfers posted through that context and
receives the active-message headers addressed to it; `Context.start_progress_thread` does it
in the background. A lock per context serialises its progress; a lock per client guards the
task's real transport.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError
from ..runtime.comm import Comm
from .mux import Loopback
from .p2p import Memregion, PointToPoint, Transfer

if TYPE_CHECKING:
    from .geometry import Geometry, Member
    from .xfer import Xfer

Dispatch = Callable[..., Any]


class Client:
    """This task's messaging client ``name`` over the task communicator ``comm`` (collective
    over ``comm``: it reserves the point-to-point message space)."""

    def __init__(self, name: str, comm: Comm | None = None) -> None:
        if comm is None:
            from ..runtime.world import init
            comm = init()
        self.name = name
        self.comm = comm
        #: the message space of the contexts' point-to-point (`endpoints.p2p`)
        self.p2p_comm = comm.dup()
        self._numbers = itertools.count()
        self.task = comm.rank
        self.tasks = comm.size
        self.transport_lock = threading.RLock()
        self.loopback = Loopback()
        self.contexts: list[Context] = []
        self._cpus: list[int | None] | None = None
        self.geometries_made = 0
        #: (task, context offset) of a local endpoint -> the geometries it belongs to (weakly)
        self._geometries_of: dict[tuple[int, int], list[weakref.ref[Geometry]]] = {}

    def __repr__(self) -> str:
        return f"<Client {self.name!r} task {self.task} of {self.tasks}, " \
               f"{len(self.contexts)} contexts>"

    def create_contexts(self, count: int = 1) -> list[Context]:
        """Make ``count`` more contexts on this task (a local call)."""
        if count < 1:
            raise ArgumentError("create_contexts", "count", count, "must be >= 1")
        made = [Context(self, len(self.contexts) + i) for i in range(count)]
        self.contexts.extend(made)
        return made

    def endpoint(self, task: int, context: int = 0) -> Endpoint:
        """The endpoint of context offset ``context`` on ``task``."""
        return Endpoint(self, context, task)

    def endpoints(self, tasks: Iterable[int], contexts: int | Sequence[int] = 1) -> list[Endpoint]:
        """Endpoints of the given tasks, ``contexts`` (a count or offsets) each, task-major."""
        offsets = range(contexts) if isinstance(contexts, int) else list(contexts)
        return [Endpoint(self, c, t) for t in tasks for c in offsets]

    def geometry(self, endpoints: Sequence[Endpoint] | None = None, *,
                 tasks: Iterable[int] | None = None, contexts: int | Sequence[int] = 1,
                 name: str = "", preferences: dict[str, Any] | None = None) -> Geometry:
        """Make a geometry (collective over every task of the client's communicator).

        Give the endpoints, or ``tasks`` (a range or list; every task when None) with
        ``contexts`` per task.
        """
        from .geometry import Geometry
        if endpoints is None:
            chosen = range(self.tasks) if tasks is None else tasks
            endpoints = self.endpoints(chosen, contexts)
        return Geometry(self, list(endpoints), name=name, preferences=preferences)

    def geometry_from_config(self, path: str) -> Geometry:
        """Make the geometry a TOML configuration file describes (see `endpoints.config`)."""
        from .config import load_geometry_config
        cfg = load_geometry_config(path, self.tasks)
        return self.geometry(self.endpoints_of(cfg.endpoints), name=cfg.name,
                             preferences=cfg.preferences)

    def joined(self, endpoint: Endpoint, geometry: Geometry) -> None:
        """Record that local ``endpoint`` is a member of ``geometry`` (see `Endpoint.post`)."""
        refs = self._geometries_of.setdefault(endpoint.key, [])
        refs[:] = [r for r in refs if r() is not None]
        refs.append(weakref.ref(geometry))

    def geometries_of(self, endpoint: Endpoint) -> list[Geometry]:
        """The live geometries local ``endpoint`` belongs to, oldest first."""
        alive = [r() for r in self._geometries_of.get(endpoint.key, [])]
        return [g for g in alive if g is not None]

    def endpoints_of(self, pairs: Iterable[tuple[int, int]]) -> list[Endpoint]:
        """Endpoints from ``(task, context)`` pairs."""
        return [Endpoint(self, c, t) for t, c in pairs]

    def context(self, offset: int) -> Context:
        """This task's context ``offset``, creating contexts up to it if needed."""
        while len(self.contexts) <= offset:
            self.create_contexts(1)
        return self.contexts[offset]

    def advance(self) -> int:
        """Advance every context of this task once; returns the events handled."""
        return sum(c.advance() for c in list(self.contexts))

    def next_number(self) -> int:
        """A number this task has not handed out before (transfers, memory regions)."""
        return next(self._numbers)

    def pending(self) -> int:
        """Transfers and active-message parts still in flight on this task's contexts."""
        return sum(c.pending for c in self.contexts)

    def wait_for_activity(self, timeout: float) -> None:
        """Sleep until the transport may have news (or ``timeout``)."""
        with self.transport_lock:
            self.comm.transport.wait_for_activity(min(timeout, 0.002))

    def task_cpus(self) -> list[int | None]:
        """The CPU each task is pinned to, None when unpinned (collective; cached)."""
        if self._cpus is None:
            from ..topology.machine import bound_cpu
            self._cpus = list(self.comm.allgather_object(bound_cpu()))
        return self._cpus

    def close(self) -> None:
        """Stop every progress thread."""
        for c in self.contexts:
            c.stop_progress_thread()

    def destroy(self) -> None:
        """Close the client and give back its point-to-point communicator
        (PAMI_Client_destroy; collective over the client's tasks, as making it was)."""
        self.close()
        self.p2p_comm.free()


class Context:
    """A communication resource of one task, with its own progress (several per task)."""

    def __init__(self, client: Client, offset: int) -> None:
        self.client = client
        self.offset = offset
        self.lock = threading.RLock()
        self.dispatch: dict[tuple[str, int], Dispatch] = {}
        #: the (collective, dispatch id) whose callbacks are two-phase (`register_dispatch`)
        self.two_phase: set[tuple[str, int]] = set()
        self.members: list[Member] = []
        self.xfers: list[Xfer] = []
        #: errors of dispatch callbacks run here for other endpoints' active messages
        self.dispatch_errors: list[BaseException] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.thread_error: BaseException | None = None
        self.p2p = PointToPoint(self)

    def __repr__(self) -> str:
        return f"<Context {self.offset} of task {self.client.task}>"

    @property
    def endpoint(self) -> Endpoint:
        """This context's endpoint."""
        return Endpoint(self.client, self.offset, self.client.task)

    def advance(self, max_loops: int = 1) -> int:
        """Drive this context's transfers, active messages and posted work, up to
        ``max_loops`` times until something happens (PAMI_Context_advance); events handled.

        Raises the error of a transfer posted here that failed, or of a message this context
        could not take (not when called by the progress thread, which leaves errors on the
        transfers and in `dispatch_errors`).
        """
        for _ in range(max(1, max_loops)):
            events = self._advance_once()
            if events:
                return events
        return 0

    def _advance_once(self) -> int:
        with self.lock:
            events = 0
            try:
                events += self.p2p.poll()
            except BaseException as exc:  # noqa: BLE001 - kept by the progress thread
                if threading.current_thread() is not self._thread:
                    raise
                self.dispatch_errors.append(exc)
            for member in list(self.members):
                events += member.poll_headers()
            failed: Xfer | None = None
            for xfer in list(self.xfers):
                member = xfer_member(xfer)
                try:
                    finished = member.poll_xfer(xfer)
                except BaseException as exc:  # noqa: BLE001 - kept on the transfer, re-raised
                    xfer.error = exc
                    finished = True
                    failed = failed or xfer
                if finished:
                    self.xfers.remove(xfer)
                    events += 1
            if failed is not None and threading.current_thread() is not self._thread:
                assert failed.error is not None
                raise failed.error
            return events

    @property
    def pending(self) -> int:
        """Transfers posted here, active messages this context takes part in, and
        point-to-point transfers, receives, fences and work, in flight."""
        return len(self.xfers) + sum(len(m.as_peer) for m in self.members) + self.p2p.pending

    # -- PAMI's point-to-point (`endpoints.p2p`) ----------------------------------------------
    def set_dispatch(self, dispatch_id: int, fn: Dispatch) -> None:
        """PAMI_Dispatch_set: run ``fn(header, data, origin, recv)`` for each active message
        sent to this context with ``dispatch_id``. ``data`` is the data when it came with the
        header (``recv`` None); else ``data`` is None and ``fn`` names the receive buffer
        through ``recv`` (`Recv`: ``recv.buffer``, optional ``recv.done``)."""
        self.p2p.dispatch[int(dispatch_id)] = fn

    def send(self, target: Endpoint, dispatch_id: int, header: Any = b"", data: Any = None,
             done: Callable[[Transfer], Any] | None = None,
             remote_done: Callable[[Transfer], Any] | None = None) -> Transfer:
        """PAMI_Send: an active message to ``target``'s dispatch ``dispatch_id``; ``done``
        runs once ``data`` may be reused, ``remote_done`` once the target has it."""
        with self.lock:
            return self.p2p.send(target, dispatch_id, header, data, done, remote_done)

    def send_immediate(self, target: Endpoint, dispatch_id: int, header: Any = b"",
                       data: Any = None) -> None:
        """PAMI_Send_immediate: a small active message (`p2p.IMMEDIATE_LIMIT` bytes of header
        and data), copied at once, with no completion callbacks."""
        with self.lock:
            self.p2p.send_immediate(target, dispatch_id, header, data)

    def memregion(self, array: Any) -> Memregion:
        """PAMI_Memregion_create: register ``array`` for `rput` and `rget`; send the returned
        `Memregion` to the tasks that will use it."""
        with self.lock:
            return self.p2p.memregion(array)

    def memregion_destroy(self, region: Memregion) -> None:
        """PAMI_Memregion_destroy: later puts and gets naming ``region`` fail."""
        with self.lock:
            self.p2p.regions.pop(region.region_id, None)

    def rput(self, local: Memregion, remote: Memregion, nbytes: int, *, local_offset: int = 0,
             remote_offset: int = 0, done: Callable[[Transfer], Any] | None = None,
             remote_done: Callable[[Transfer], Any] | None = None) -> Transfer:
        """PAMI_Rput: copy ``nbytes`` from this context's region ``local`` into ``remote``
        (a region of another context); ``done`` and ``remote_done`` as for `send`."""
        with self.lock:
            return self.p2p.rput(local, remote, nbytes, local_offset, remote_offset, done,
                                 remote_done)

    def rget(self, local: Memregion, remote: Memregion, nbytes: int, *, local_offset: int = 0,
             remote_offset: int = 0, done: Callable[[Transfer], Any] | None = None) -> Transfer:
        """PAMI_Rget: copy ``nbytes`` from ``remote`` into this context's region ``local``;
        ``done`` runs once they have landed."""
        with self.lock:
            return self.p2p.rget(local, remote, nbytes, local_offset, remote_offset, done)

    def fence(self, endpoint: Endpoint | None = None,
              done: Callable[[Transfer], Any] | None = None) -> Transfer:
        """PAMI_Fence_all (or PAMI_Fence_endpoint with ``endpoint``): ``done`` runs once
        every transfer this context started earlier (to ``endpoint``) completed remotely."""
        with self.lock:
            return self.p2p.fence(endpoint, done)

    def post(self, work: Callable[[Context], Any]) -> None:
        """PAMI_Context_post: run ``work(context)`` on this context's next advance, from any
        thread; it runs again on each advance while it returns `p2p.AGAIN`."""
        self.p2p.post(work)

    def start_progress_thread(self, interval: float = 0.0005) -> None:
        """Advance this context in a background thread until `stop_progress_thread`; after
        an advance that found nothing it waits on the transport (`Client.wait_for_activity`:
        the transport's own wait, ended by an arrival) for at most ``interval`` s."""
        if self._thread is not None:
            return
        self._stop.clear()

        def run() -> None:
            while not self._stop.is_set():
                try:
                    if not self.advance():
                        self.client.wait_for_activity(interval)
                except BaseException as exc:  # noqa: BLE001 - surfaced by the transfers
                    self.thread_error = exc
                    return

        self._thread = threading.Thread(target=run, name=f"collops-context-{self.offset}",
                                        daemon=True)
        self._thread.start()

    def stop_progress_thread(self) -> None:
        """Stop the background progress thread (if any) and wait for it."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()

    @property
    def progress_thread_running(self) -> bool:
        """Whether a progress thread advances this context."""
        return self._thread is not None


def xfer_member(xfer: Xfer) -> Member:
    """The geometry member a transfer was posted through."""
    assert xfer.geometry is not None and xfer.endpoint is not None
    return xfer.geometry.member(xfer.endpoint)


class Endpoint:
    """A (client, context, task) triple: one participant of a geometry."""

    def __init__(self, client: Client, context: Context | int, task: int | None = None) -> None:
        self.client = client
        self.context_offset = context.offset if isinstance(context, Context) else int(context)
        self.task = client.task if task is None else int(task)
        if not 0 <= self.task < client.tasks:
            raise ArgumentError("Endpoint", "task", task, f"must lie in [0, {client.tasks})")
        if self.context_offset < 0:
            raise ArgumentError("Endpoint", "context", context, "must be >= 0")

    @property
    def key(self) -> tuple[int, int]:
        """``(task, context offset)``."""
        return (self.task, self.context_offset)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Endpoint):
            return NotImplemented
        return self.client.name == other.client.name and self.key == other.key

    def __hash__(self) -> int:
        return hash((self.client.name, self.key))

    def __repr__(self) -> str:
        return f"Endpoint({self.client.name!r}, task={self.task}, context={self.context_offset})"

    @property
    def local(self) -> bool:
        """Whether this endpoint lives on the calling task."""
        return self.task == self.client.task

    @property
    def context(self) -> Context:
        """The context behind a local endpoint."""
        if not self.local:
            raise ArgumentError("Endpoint.context", "endpoint", self,
                                f"lives on task {self.task}, not on this task "
                                f"({self.client.task})")
        return self.client.context(self.context_offset)

    def register_dispatch(self, collective: str, dispatch_id: int, fn: Dispatch, *,
                          two_phase: bool = False) -> None:
        """Run ``fn(data, delivery)`` when a ``collective`` transfer with ``dispatch_id``
        reaches this endpoint (an amgather/amreduce peer's returns its contribution).

        ``two_phase`` (active messages; PAMI's header handler): ``fn(None, delivery)`` runs
        when the header arrives, and may set ``delivery.recv.buffer`` (the data lands there)
        and ``delivery.recv.done``; naming no buffer, ``fn(data, delivery)`` runs as well."""
        key = (collective, int(dispatch_id))
        self.context.dispatch[key] = fn
        if two_phase:
            self.context.two_phase.add(key)
        else:
            self.context.two_phase.discard(key)

    @property
    def geometries(self) -> list[Geometry]:
        """The geometries this (local) endpoint belongs to, oldest first."""
        return self.client.geometries_of(self)

    def post(self, xfer: Xfer, geometry: Geometry | None = None) -> Xfer:
        """Post ``xfer`` through this endpoint on ``geometry``, else ``xfer.geometry``
        (``Xfer(…, geometry=g)``), else the one geometry this endpoint belongs to."""
        if geometry is not None and xfer.geometry is not None and xfer.geometry is not geometry:
            raise ArgumentError("Endpoint.post", "geometry", geometry.name,
                                f"differs from the transfer's own geometry {xfer.geometry.name}")
        target = geometry or xfer.geometry
        if target is None:
            mine = self.geometries if self.local else []
            if len(mine) != 1:
                names = ", ".join(g.name for g in mine)
                raise ArgumentError(
                    "Endpoint.post", "geometry", None,
                    (f"{self!r} belongs to {len(mine)} geometries ({names})" if mine else
                     f"{self!r} belongs to no geometry on this task")
                    + ": name one, ep.post(xfer, geometry) or Xfer(..., geometry=geometry)")
            target = mine[0]
        return target.post(xfer, via=self)
