"""Render `collops bench --json` records as the Markdown tables of docs/performance.md.

Usage: python benchmarks/bench_table.py docs/bench/n4.json [more.json ...]
"""

from __future__ import annotations

import json
import sys


def _size(n: int) -> str:
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def table(records: list[dict]) -> str:
    """One Markdown table: a row per record, the ratio in bold."""
    lines = ["| collective | size | algorithm | collops µs | MPICH µs | ratio "
             "| collops algbw GB/s |", "|---|---|---|---|---|---|---|"]
    for r in records:
        mpi = r.get("mpi_latency_us")
        ratio = r.get("ratio")
        lines.append(f"| {r['collective']} | {_size(r['size'])} | `{r['algorithm']}` | "
                     f"{r['latency_us']:.1f} | {'' if mpi is None else f'{mpi:.1f}'} | "
                     f"{'' if ratio is None else f'**{ratio:.2f}**'} | {r['algbw_GBps']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    """Print a table per file named on the command line."""
    for path in sys.argv[1:]:
        with open(path) as f:
            print(table(json.load(f)))
        print()


if __name__ == "__main__":
    main()
