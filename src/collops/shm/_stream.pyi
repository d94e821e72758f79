"""Types of the compiled inner loop of the shm_stream collectives (``_stream.c``)."""

from collections.abc import Callable, Sequence
from typing import Any

DONE: int
STUCK: int
FOREIGN: int
FAILED: int
MOVED: int

def copy(dst: int, src: int, nbytes: int, /) -> None:
    """Copy bytes between two addresses, around 4 KiB aliasing."""

def read_process(pid: int, remote: int, local: int, nbytes: int, /) -> int:
    """Copy bytes out of another process, around 4 KiB aliasing: 0 or the errno."""

class Plan:
    """What one rank writes and reads in one shm_stream call signature."""

    def __init__(self, *, segment: Any, cursors: Any, me: int, nchunks: int,
                 chunk_bytes: int, my_filled: int, my_headers: int, my_ring: int,
                 writes: Any, drained_of_me: Any, writers: Any,
                 self_copy: tuple[int, int, int], sleeper_words: Sequence[int],
                 sleeper_ranks: Sequence[int], wake: Callable[[int], None],
                 streaming: bool = False, own_from: int = 1,
                 roll_words: Sequence[int] = (), roll_slots: int = 0) -> None: ...
    @property
    def own_source(self) -> int:
        """Where an allgather's own block is published from unless that copy would be
        aliased (IN_SEND 1 or IN_RECV 2: ``own_from``)."""
    def advance(self, state: Any, send: int, recv: int, word: int, fingerprint: int,
                may_write: bool, spin: float, /) -> int:
        """Everything that can move now, spinning at most ``spin`` s: DONE, STUCK or FOREIGN,
        with MOVED or-ed in when anything moved."""
    def ready(self, state: Any, send: int, recv: int, word: int, fingerprint: int,
              may_write: bool, /) -> bool:
        """Whether `advance` can move now."""
    def wake(self) -> None:
        """A full fence, then wake the peers asleep (after a store they may wait for)."""
