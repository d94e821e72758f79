"""What the call fingerprint costs an 8-byte collective (issue target: under 2 %).

Usage: .venv/bin/python benchmarks/fingerprint_cost.py [--nprocs 2] [--iterations 2000]
           [--rounds 101]

Every collops call carries a 64-bit fingerprint of (collective, algorithm, root, dtype,
counts): in the header of each message on the schedule path, and on the ``shm_direct`` path
(where 8-byte calls go) in the slot's control line — the full fingerprint in one word, and
24 bits of it packed with the call number into the word readers poll anyway, so comparing
costs nothing extra.

Measured two ways, on real ranks over shared memory:

* **compiled runner** (the default): an A/B run. Each rank makes the same blocking 8-byte
  allreduce on two communicators, one with the normal runner and one whose runner was built
  without the fingerprint (no store, nothing packed: the readers then only match call
  numbers), alternating ``--rounds`` times; printed are the medians and the median of the
  paired per-round differences with its interquartile range (the noise to read it against).
* **Python runner** (``COLLOPS_COMPILED=0``, or no C compiler): the fingerprint work the
  Python hot path adds — the store of the full fingerprint and the packing — written inline in
  a loop as the hot path has it, less the same loop without it, as a share of the call.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import collops
from collops import config
from collops.shm import direct as shm_direct
from collops.shm.direct_area import held_word


def _time(fn, iterations: int) -> float:
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - start) / iterations


def _template_of(comm, collective: str):
    return next(t for key, t in comm._templates.items()
                if isinstance(key, tuple) and key[0] == collective)


def _compiled_ab(comm, iterations: int, rounds: int) -> dict:
    """Medians of an allreduce with and without the fingerprint (compiled runner)."""
    x = np.ones(1)
    bare = comm.dup()
    for c in (comm, bare):
        for _ in range(100):
            c.allreduce(x)
    template = _template_of(bare, "allreduce")
    call = bare._native_call(template.spec, {})
    _, area = shm_direct.area_of(call)
    template.runner = shm_direct._compiled_runner(call, bare.transport, area,
                                                  fingerprinted=False)
    with_fp, without = [], []
    for _ in range(rounds):
        comm.barrier()
        with_fp.append(_time(lambda: comm.allreduce(x), iterations))
        comm.barrier()
        without.append(_time(lambda: bare.allreduce(x), iterations))
    differences = sorted(a - b for a, b in zip(with_fp, without, strict=True))
    quartile = len(differences) // 4
    return {"with_us": statistics.median(with_fp) * 1e6,
            "without_us": statistics.median(without) * 1e6,
            "difference_us": statistics.median(differences) * 1e6,
            "quartiles_us": (differences[quartile] * 1e6, differences[-1 - quartile] * 1e6),
            "runner": type(_template_of(comm, "allreduce").runner).__name__}


def _python_inline(comm, iterations: int, rounds: int) -> dict:
    """The Python runner: the call, and the fingerprint work written inline."""
    x = np.ones(1)
    for _ in range(100):
        comm.allreduce(x)
    allreduce = statistics.median(_time(lambda: comm.allreduce(x), iterations)
                                  for _ in range(rounds))
    area = comm.transport.direct_area(comm.context, tuple(comm._group))
    words = area.words
    mine = area.fps[comm.rank][0]
    fingerprint = int(words[mine]) or 1
    mix = held_word(0, fingerprint)

    def inline_work() -> float:
        """Seconds per call of the work written inline, as the hot path has it."""
        k = 12345
        start = time.perf_counter()
        for _ in range(iterations):
            words[mine] = fingerprint
            word = (k << 24) | mix
        middle = time.perf_counter()
        for _ in range(iterations):
            word = k
        end = time.perf_counter()
        del word
        return max(0.0, (middle - start) - (end - middle)) / iterations

    comm.barrier()
    work = statistics.median(inline_work() for _ in range(5))
    return {"allreduce_us": allreduce * 1e6, "fingerprint_us": work * 1e6,
            "runner": type(_template_of(comm, "allreduce").runner).__name__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=101)
    args = parser.parse_args()
    print(f"{args.nprocs} ranks over shm, algorithm shm_direct")
    if shm_direct._direct is not None:
        r = collops.spawn(_compiled_ab, args.nprocs, args.iterations, args.rounds,
                          transport="shm", timeout=600)[0]
        share = 100 * r["difference_us"] / r["with_us"]
        low, high = (100 * q / r["with_us"] for q in r["quartiles_us"])
        print(f"compiled runner ({r['runner']}): allreduce 8 B {r['with_us']:.3f} µs with the "
              f"fingerprint, {r['without_us']:.3f} µs without; paired difference per round "
              f"{share:+.2f} % (middle half of the rounds: {low:+.2f} % to {high:+.2f} %)")
    import os
    os.environ["COLLOPS_COMPILED"] = "0"
    config.reload_settings()
    r = collops.spawn(_python_inline, args.nprocs, args.iterations, args.rounds,
                      transport="shm", timeout=600)[0]
    print(f"Python runner ({r['runner']}): allreduce 8 B {r['allreduce_us']:.2f} µs; "
          f"fingerprint work per call {r['fingerprint_us'] * 1000:.0f} ns = "
          f"{100 * r['fingerprint_us'] / r['allreduce_us']:.2f} %")


if __name__ == "__main__":
    main()
