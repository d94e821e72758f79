"""Starting the processes of a shared-memory job, watching them, and cleaning up after them.

The launcher owns the job: it creates the job's segment as anonymous shared memory
(`collops.shm.segment`) and starts the ranks, which inherit its descriptor
(``COLLOPS_SHM_FD``). The segment has no name, so nothing is left behind whoever is killed
and whenever: the kernel frees it when the last process holding it ends.

It also is the job's failure detector: it reaps the ranks, and when one ends badly it
writes the rank into the segment's header and wakes every sleeping rank, whose pending
operations then raise `PeerFailed`. The rank written is the first cause: a rank that failed
because another died or returned early says so in its block (`ShmTransport.note_cause`),
and the launcher names that one, so every survivor names the same rank. The survivors get
a short grace to exit on their own, then are killed. Each rank is started with
PR_SET_PDEATHSIG, so killing the launcher kills the job too.

Two entry points: `launch_program` runs ``python program.py args`` N times (``collops
run``), `launch_function` forks N processes that call a function (``collops.spawn``). Both
pass every rank's stdout and stderr on by whole lines (`launcher_output`).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import secrets
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import IO, Any

from ..errors import CollectiveTimeout, RankFailed, TransportError
from ..shm import kernel
from ..shm import segment as seg
from ..transport import placement
from ..transport.base import Transport
from .launcher_output import OutputForwarder

#: exit status of a job that ran out of time (as coreutils' timeout)
EXIT_TIMEOUT = 124
#: exit status of a job interrupted by SIGINT / SIGTERM
EXIT_INTERRUPTED = 130
#: seconds the surviving ranks get to exit on their own after a rank failed
FAILURE_GRACE = 1.0
_TICK = 0.01
_PR_SET_PDEATHSIG = 1


class _Job:
    """A job's segment as seen by its launcher: rank states, failure marks, release."""

    def __init__(self, nprocs: int) -> None:
        self.nprocs = nprocs
        self.id = secrets.token_hex(8)  # names the job to its ranks (``COLLOPS_JOB``)
        job, layout = seg.create_job(nprocs)
        assert isinstance(job, int), "the launcher's segments are anonymous"
        self.fd = job
        try:
            self.segment = seg.Segment(self.fd)
        except BaseException:
            seg.release_job(self.fd)
            raise
        self.layout = layout
        self.words = self.segment.words

    def state(self, rank: int) -> int:
        """The rank's state word."""
        return int(self.words[self.layout.rank_word(rank, seg.R_STATE)])

    def mark_exit(self, rank: int, failed: bool) -> None:
        """Record a rank's end; a failure is announced to every other rank."""
        word = self.layout.rank_word(rank, seg.R_STATE)
        if not failed:
            self.words[word] = seg.EXITED
            return
        self.words[word] = seg.FAILED
        if self.words[seg.H_FAILED] == 0:
            self.words[seg.H_FAILED] = self.first_cause(rank) + 1
        self.wake_all()

    def first_cause(self, rank: int) -> int:
        """The rank whose failure (or early exit) ``rank``'s failure followed from, through
        the causes the ranks noted (`ShmTransport.note_cause`); ``rank`` itself if none."""
        seen = {rank}
        while True:
            cause = int(self.words[self.layout.rank_word(rank, seg.R_STATUS)]) - 1
            if not 0 <= cause < self.nprocs or cause in seen:
                return rank
            rank = cause
            seen.add(rank)

    def whereabouts(self, running: list[int]) -> str:
        """Which ranks the ``running`` ones wait for, from the world communicator's call
        counters in the segment: the ranks behind the furthest running rank's call."""
        words, layout = self.words, self.layout
        calls = [int(words[layout.counter_offset(r, 0) // seg.WORD]) for r in range(self.nprocs)]
        furthest = max(calls[r] for r in running)
        behind = [r for r in range(self.nprocs) if calls[r] < furthest]
        ended = sorted(set(range(self.nprocs)) - set(running))
        text = (f"not heard from: ranks {behind} (they had not reached call #{furthest - 1} "
                f"of the world communicator, where ranks "
                f"{[r for r in running if calls[r] == furthest]} wait)" if behind else
                f"every rank had made {furthest} calls on the world communicator, so none "
                "was waiting for another there: they ran code outside collops, or calls on "
                "other communicators")
        return (f"{text}; still running: ranks {running}"
                + (f"; already ended: ranks {ended}" if ended else ""))

    def wake_all(self) -> None:
        """Ring every rank's doorbell."""
        for r in range(self.nprocs):
            w = self.layout.rank_word(r, seg.R_DOORBELL)
            self.words[w] = (self.words[w] + 1) & 0xFFFFFFFF
            kernel.futex_wake(self.segment.address + w * 8)

    def close(self) -> None:
        """Unmap the segment and close the launcher's descriptor (the ranks' mappings keep
        it until they end)."""
        self.words = None  # type: ignore[assignment]
        self.segment.close()
        seg.release_job(self.fd)


def _die_with_parent() -> None:
    """In a child: be killed when the launcher dies."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _exit_status(returncode: int) -> int:
    """A shell-style exit status: 128 + signal for a rank killed by a signal."""
    return 128 - returncode if returncode < 0 else returncode


def _describe_end(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


class _Interrupted(Exception):
    """SIGINT or SIGTERM reached the launcher."""


class _SignalGuard:
    """Turn the first SIGINT/SIGTERM into `_Interrupted` while a job runs and its ranks are
    ended (main thread only); later ones find the job already ending and are ignored, so a
    second Ctrl-C cannot break off the clean-up."""

    def __enter__(self) -> _SignalGuard:
        self.saved: dict[int, Any] = {}
        self.interrupted = False
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, self._raise)
        return self

    def _raise(self, signum: int, frame: object) -> None:
        if not self.interrupted:
            self.interrupted = True
            raise _Interrupted(signal.Signals(signum).name)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def _kill_all(pids: Iterable[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


# ---- launch_program -------------------------------------------------------------------


def launch_program(nprocs: int, argv: list[str], timeout: float | None = None,
                   tag_output: bool = False, bind_to: str = "auto",
                   environment: dict[str, str] | None = None) -> int:
    """Run ``python *argv`` as ranks 0..nprocs-1 of one shm job (``environment`` added to
    theirs); the job's exit status."""
    cpus = placement.usable_cpus()
    binding = placement.plan_binding(nprocs, bind_to, cpus, "run")
    try:
        job = _Job(nprocs)
    except TransportError as exc:  # the memory cannot be had: say what to change
        _message(str(exc))
        return 1
    procs: list[subprocess.Popen[bytes]] = []
    output = OutputForwarder(tag_output, report_failures=True)
    with _SignalGuard():
        try:
            for rank in range(nprocs):
                procs.append(_start_rank(job, rank, argv, output, binding, len(cpus),
                                         environment or {}))
            output.start()
            return _watch_programs(job, procs, timeout)
        except _Interrupted as exc:
            _message(f"{exc}: ending all {nprocs} ranks")
            _kill_all((p.pid for p in procs if p.poll() is None), signal.SIGTERM)
            _reap(procs, 0.5)
            return EXIT_INTERRUPTED
        finally:
            _kill_all(p.pid for p in procs if p.poll() is None)
            for p in procs:
                p.wait()
            output.close()
            job.close()


def _start_rank(job: _Job, rank: int, argv: list[str], output: OutputForwarder,
                binding: list[int | None], job_cpus: int,
                environment: dict[str, str]) -> subprocess.Popen[bytes]:
    env = dict(os.environ, **environment, COLLOPS_TRANSPORT="shm", COLLOPS_JOB=job.id,
               COLLOPS_SHM_FD=str(job.fd), COLLOPS_RANK=str(rank), COLLOPS_SIZE=str(job.nprocs))
    # a line reaches the launcher when printed, so a killed rank's output is not lost
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(placement.rank_environment(binding, job_cpus))
    cpu = binding[rank]

    def start() -> None:  # in the child, before exec: the pin survives the exec
        _die_with_parent()
        placement.pin(cpu)

    out, err = output.pipes(rank)
    try:  # stdin goes to rank 0 alone, as with mpiexec
        return subprocess.Popen([sys.executable, *argv], env=env, preexec_fn=start,
                                stdin=None if rank == 0 else subprocess.DEVNULL,
                                stdout=out, stderr=err, pass_fds=(job.fd,))
    finally:
        os.close(out)
        os.close(err)


def _watch_programs(job: _Job, procs: list[subprocess.Popen[bytes]],
                    timeout: float | None) -> int:
    start = time.monotonic()
    first_failure: tuple[int, int] | None = None
    failed_at = 0.0
    running = set(range(len(procs)))
    while running:
        for rank in sorted(running):
            code = procs[rank].poll()
            if code is None:
                continue
            running.discard(rank)
            job.mark_exit(rank, failed=code != 0)
            if code != 0 and first_failure is None:
                first_failure, failed_at = (rank, code), time.monotonic()
                _message(f"rank {rank} {_describe_end(code)}; ending the job")
        now = time.monotonic()
        if first_failure is not None and running and now - failed_at > FAILURE_GRACE:
            _kill_all(procs[r].pid for r in running)
        if timeout is not None and running and now - start > timeout:
            _message(f"timed out after {timeout:g} s; ranks still running: {sorted(running)}")
            _kill_all(procs[r].pid for r in running)
            return EXIT_TIMEOUT
        if running:
            time.sleep(_TICK)
    return 0 if first_failure is None else _exit_status(first_failure[1])


def _reap(procs: list[subprocess.Popen[bytes]], grace: float) -> None:
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass


def _message(text: str) -> None:
    sys.stderr.write(f"collops run: {text}\n")
    sys.stderr.flush()


# ---- launch_function ------------------------------------------------------------------

_LENGTH = struct.Struct("=Q")


def launch_function(worker: Callable[[Transport], Any], nprocs: int,
                    timeout: float | None = None, bind_to: str = "auto") -> list[Any]:
    """Fork ``nprocs`` ranks each calling ``worker(transport)``; their results by rank."""
    cpus = placement.usable_cpus()
    binding = placement.plan_binding(nprocs, bind_to, cpus, "spawn")
    job = _Job(nprocs)
    pids: dict[int, int] = {}
    readers: dict[int, int] = {}
    output = OutputForwarder(tag=False)
    with _SignalGuard():
        try:
            for rank in range(nprocs):
                pid, fd = _fork_rank(job, rank, worker, list(readers.values()), output,
                                     binding, len(cpus))
                pids[rank], readers[rank] = pid, fd
            output.start()
            return _collect(job, pids, readers, timeout)
        except _Interrupted:
            raise KeyboardInterrupt from None
        finally:
            _kill_all(pids.values())
            for pid in pids.values():
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            for fd in readers.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
            output.close()
            job.close()


def _fork_rank(job: _Job, rank: int, worker: Callable[[Transport], Any],
               inherited: list[int], output: OutputForwarder, binding: list[int | None],
               job_cpus: int) -> tuple[int, int]:
    out, err = output.pipes(rank)
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except BaseException:
        for fd in (read_fd, write_fd, out, err):
            os.close(fd)
        raise
    if pid == 0:  # the rank: never returns
        code = 1
        try:
            for fd in (read_fd, *inherited, *output.read_ends()):
                os.close(fd)
            _write_into(out, err)
            _die_with_parent()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            placement.enter_rank(rank, binding, job_cpus)
            code = _run_rank(job.fd, rank, job.nprocs, worker, write_fd)
        finally:
            os._exit(code)
    for fd in (write_fd, out, err):
        os.close(fd)
    return pid, read_fd


def _write_into(out: int, err: int) -> None:
    """In a forked rank: make fds 1 and 2 the pipes, and sys.stdout and sys.stderr write to
    them a line at a time (the parent's may be replaced objects: a notebook's, pytest's)."""
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    sys.stdout = _line_writer(1, sys.stdout)
    sys.stderr = _line_writer(2, sys.stderr)


def _line_writer(fd: int, like: Any) -> IO[str]:
    return open(fd, "w", buffering=1, closefd=False,
                encoding=getattr(like, "encoding", None) or "utf-8",
                errors=getattr(like, "errors", None) or "backslashreplace")


def _run_rank(job: int, rank: int, size: int, worker: Callable[[Transport], Any],
              write_fd: int) -> int:
    from ..config import reload_settings
    from ..shm.transport import ShmTransport

    transport = None
    try:
        reload_settings()  # a rank reads the environment as it is when the rank starts
        transport = ShmTransport(job, rank, size)
        payload = pickle.dumps((True, worker(transport)), protocol=5)
        code = 0
    except BaseException as exc:
        payload = pickle.dumps((False, traceback.format_exc(), type(exc).__name__), protocol=5)
        code = 1
    with os.fdopen(write_fd, "wb") as pipe:  # the report goes out before we look gone
        pipe.write(_LENGTH.pack(len(payload)) + payload)
    if transport is not None:
        transport.close()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _collect(job: _Job, pids: dict[int, int], readers: dict[int, int],
             timeout: float | None) -> list[Any]:
    """Read every rank's report, marking failures as they come; results or RankFailed."""
    start = time.monotonic()
    data = {rank: bytearray() for rank in readers}
    open_ranks = {fd: rank for rank, fd in readers.items()}
    failures: list[tuple[int, str, str]] = []
    failed_at = 0.0
    with selectors.DefaultSelector() as selector:
        for fd in open_ranks:
            selector.register(fd, selectors.EVENT_READ)
        while open_ranks:
            for key, _ in selector.select(_TICK * 5):
                chunk = os.read(key.fd, 1 << 20)
                if chunk:
                    data[open_ranks[key.fd]] += chunk
                    continue
                rank = open_ranks.pop(key.fd)
                selector.unregister(key.fd)
                report = _finish_rank(job, rank, pids[rank], bytes(data[rank]))
                if report is not None:
                    if not failures:
                        failed_at = time.monotonic()
                    failures.append(report)
            now = time.monotonic()
            if failures and open_ranks and now - failed_at > FAILURE_GRACE:
                _kill_all(pids[r] for r in open_ranks.values())
            if timeout is not None and open_ranks and now - start > timeout:
                running = sorted(open_ranks.values())
                where = job.whereabouts(running)
                _kill_all(pids.values())
                raise CollectiveTimeout(
                    f"collops.spawn: the job did not finish within {timeout:g} s; {where}; "
                    f"every rank was stopped (SIGKILL)")
    if failures:
        raise RankFailed(*_root_cause(failures))
    return [_unpack(data[rank]) for rank in range(len(pids))]


def _finish_rank(job: _Job, rank: int, pid: int, raw: bytes) -> tuple[int, str, str] | None:
    """Reap a rank whose pipe closed; its failure report, or None if it succeeded."""
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    report: tuple[int, str, str] | None = None
    if len(raw) >= _LENGTH.size:
        ok, *rest = pickle.loads(raw[_LENGTH.size:])
        if not ok:
            report = (rank, rest[0], rest[1])
    elif code == 0:
        report = (rank, "the rank exited without reporting a result", "RuntimeError")
    if report is None and code != 0:
        report = (rank, f"the rank {_describe_end(code)}", "ProcessDied")
    job.mark_exit(rank, failed=report is not None)
    return report


def _unpack(raw: bytes | bytearray) -> Any:
    return pickle.loads(bytes(raw)[_LENGTH.size:])[1]


def _root_cause(failures: list[tuple[int, str, str]]) -> tuple[int, str, str]:
    """The first failure that is not merely a consequence (PeerFailed) of another."""
    for failure in failures:
        if failure[2] != "PeerFailed":
            return failure
    return failures[0]
