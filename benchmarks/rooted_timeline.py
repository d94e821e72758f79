"""Where a rooted small call's time goes on more ranks than cores: a timeline of a gather.

Usage: .venv/bin/python benchmarks/rooted_timeline.py [--nprocs 4] [--iterations 300]

Every rank times blocking 8-byte gathers (an untimed barrier before each, as `collops bench`
does) and keeps the monotonic clock at entry and exit. That clock is the same in every
process, so the script prints how long the root took, how long after the root the last
non-root entered the call, and how long after that non-root left (its contribution
published) the root left.
"""

from __future__ import annotations

import argparse

import numpy as np
from common import timed_calls

import collops


def _timeline(comm, iterations: int) -> list[tuple[float, float]]:
    x = np.ones(1)
    out = np.empty(comm.size)

    def gather() -> None:
        comm.gather(x, 0, out=out if comm.rank == 0 else None)

    return timed_calls(comm, gather, iterations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nprocs", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    per_rank = collops.spawn(_timeline, args.nprocs, args.iterations, transport="shm",
                             timeout=600)
    root = np.array(per_rank[0])
    others = [np.array(marks) for marks in per_rank[1:]]
    last_in = np.max([o[:, 0] for o in others], axis=0)
    last_out = np.max([o[:, 1] for o in others], axis=0)
    took = (root[:, 1] - root[:, 0]) * 1e6
    print(f"{args.nprocs} ranks, 8-byte gather: the root took {took.mean():.0f} µs on average "
          f"(median {np.median(took):.0f}, 90th percentile {np.percentile(took, 90):.0f})")
    print(f"  the last non-root entered {np.mean(last_in - root[:, 0]) * 1e6:.0f} µs after "
          "the root")
    print(f"  the root left {np.mean(root[:, 1] - last_out) * 1e6:.0f} µs after the last "
          "non-root left")


if __name__ == "__main__":
    main()
