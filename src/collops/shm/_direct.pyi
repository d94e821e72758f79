"""Types of the compiled fast path of the shm_direct collectives (``_direct.c``)."""

from collections.abc import Callable, Sequence
from typing import Any

READ_NONE: int
READ_COPY: int
READ_SELF: int
READ_REDUCE: int
READ_TABLE: int

class Runner:
    """The blocking fast path of one shm_direct call signature on one rank."""

    def __init__(self, *, segment: Any, ndarray: type, area: Any, occupant: list[Any | None],
                 own_pending: list[int], readers: tuple[int, ...],
                 slow: Callable[..., None], wake: Callable[[int], None], publishes: bool,
                 nbytes: int, fingerprint: int, mix: int, my_held: Sequence[int],
                 my_fp: Sequence[int], my_data: Sequence[int], held: Sequence[int],
                 ack: Sequence[int], ack_of_me: Sequence[int], sleeper_words: Sequence[int],
                 sleeper_ranks: Sequence[int], read_kind: int, src: Sequence[int],
                 dst: Sequence[int], len: Sequence[int], self_copy: tuple[int, int, int],
                 count: int, op: int, dtype: int, spin_seconds: float,
                 store_fingerprint: bool = True, prefix_at: int = -1, prefix_head: int = 0,
                 write_prefix: bool = False, yield_seconds: float = 0.0,
                 hand_over_core: bool = False,
                 local_words: Sequence[int] | None = None, is_root: bool = False,
                 announces: bool = False, head: bytes | None = None,
                 writes: Sequence[int] | None = None, back: Sequence[int] | None = None,
                 table: tuple[int, int, int] | None = None, slot_bytes: int = 0,
                 occupant_calls: Any = None, skip: tuple[int, int] = (0, 0),
                 defers: bool = False) -> None: ...
    def run(self, send: Any, recv: Any, seq: int, timeout: float | None,
            phase: int = 0, confirm: bool = True) -> None:
        """One blocking direct call (``confirm`` false: a root does not wait for its readers
        to find the call)."""
    def bind_bcast(self, env: Any, dtype: Any, shape: tuple[int, ...], nbytes: int,
                   head: Any, slow: Any, alloc: Callable[[], Any], name: str, /) -> None:
        """The array signature and envelope header `bcast` runs."""
    def bcast(self, comm: Any, x: Any, out: Any, timeout: float | None, /) -> Any:
        """A whole bound broadcast: its result, None (parse the envelope) or ``slow``."""
    def bind_call(self, dtype: Any, itemsize: int, shape: tuple[int, ...],
                  out_shape: tuple[int, ...] | None, slow: Any, alloc: Callable[[], Any],
                  name: str, /) -> None:
        """The array signatures `call` runs (``out_shape`` None: no result on this rank)."""
    def call(self, comm: Any, x: Any, out: Any, timeout: float | None, /) -> Any:
        """A whole bound call: its result, None (no result here) or ``slow``."""

def fold_into(out: Any, in_: Any, dtype: int, op: int, /) -> None:
    """out = out op in, element-wise."""

def combine_into(out: Any, a: Any, b: Any, dtype: int, op: int, /) -> None:
    """``out = a op b`` element-wise in numpy's arithmetic (``out`` may be ``a``)."""
