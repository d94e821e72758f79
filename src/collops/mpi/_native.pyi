from collections.abc import Callable
from typing import Any

import numpy as np

BARRIER: int
BCAST: int
ALLREDUCE: int
REDUCE: int
ALLGATHER: int
ALLTOALL: int
GATHER: int
SCAN: int
EXSCAN: int
REDUCE_SCATTER_BLOCK: int

def load(module_path: str, sizeof_comm: int, comm_world: int, byte: int, double: int,
         sum: int) -> bool: ...

class Runner:
    def __init__(self, *, kind: int, comms: tuple[int, ...], count: int, datatype: int,
                 op: int, root: int, is_root: bool, board: Any, mine: int,
                 rows: tuple[int, ...], fingerprint: int, spin: float, agree_first: bool,
                 transport: Any, active: list[Any], watch: np.ndarray | None, watch_id: int,
                 finish: Callable[..., bool], fail: Callable[[int, int], None],
                 ndarray: type, flags: int = -1, mark: np.ndarray | None = None,
                 pending: np.ndarray | None = None, defer: bool = False) -> None: ...
    def bind_call(self, counter: Any, dtype: np.dtype, shape: tuple[int, ...],
                  out_shape: tuple[int, ...] | None, slow: Any, alloc: Callable[[], Any]
                  ) -> None: ...
    def call(self, x: Any, out: Any, timeout: float | None) -> Any: ...
    def bind_bcast(self, counter: Any, env: np.ndarray, mine: np.ndarray, head: bytes,
                   dtype: np.dtype, shape: tuple[int, ...], out_shape: tuple[int, ...],
                   slow: Any, alloc: Callable[[], Any]) -> None: ...
    def bcast(self, x: Any, out: Any, timeout: float | None) -> Any: ...
    def known(self, signature: int, data: np.ndarray, seq: int,
              timeout: float | None) -> int | None: ...
    def bind_known(self, counter: Any, dtype: np.dtype, shape: tuple[int, ...],
                   signature: int, slow: Any, alloc: Callable[[], Any],
                   rest: Callable[..., Any]) -> None: ...
    def known_call(self, x: Any, out: Any, timeout: float | None) -> Any: ...
