"""``collops model`` with the network-aware pick.

`collops.model.cli` prints closed forms. With ``--collective`` this command adds, for each
size, what algorithm selection picks for the call on the topology, contention included, and
the table behind the pick — the very choice of ``collops sim --algorithm auto`` (`collops.sim.
auto`: every eligible algorithm's schedule simulated on the network in the ``--model`` given,
the ranks on its first nodes in its order). It lives in the command layer because the model
package sits below the simulator (docs/design.md): `sim` prices algorithms with `model`'s
closed forms, so `model` cannot call `sim`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .model.cli import Row, cmd_model, format_rows, model_args
from .sim.api import MODELS
from .sim.auto import choose, network_for
from .topology import Topology


def _arguments(p: argparse.ArgumentParser) -> None:
    model_args(p)
    p.add_argument("--model", default="congestion", choices=MODELS,
                   help="with --collective: the simulator model that prices each algorithm "
                        "for the network-aware pick (default congestion, as collops sim)")
    p.add_argument("--no-pick", dest="pick", action="store_false",
                   help="with --collective: leave out the network-aware pick")


def network_pick(args: argparse.Namespace, topology: Topology, p: int,
                 sizes: Sequence[int]) -> tuple[list[str], list[Row]]:
    """For each size: selection's pick for ``args.collective`` on ``topology`` (p ranks) and
    the table behind it."""
    if not args.pick or p < 1:
        return [], []
    network = network_for(topology, p, args.model, options={"progress": False})
    rows, explanations = [], []
    for m in sizes:
        picked = choose(args.collective, m, network)
        rows.append(Row("choice", picked.algorithm, str(topology), p, m,
                        float(picked.result.time_s), f"simulated, {args.model} model"))
        explanations.append(picked.explanation)
    title = (f"{args.collective} on {topology}, p = {p}: the network-aware pick (as collops sim "
             f"--algorithm auto; {args.model} model)")
    return [format_rows(rows, title, "network"), "\n\n".join(explanations)], rows


def cmd_model_with_pick(args: argparse.Namespace) -> int:
    """Closed-form estimates, and with ``--collective`` the network-aware pick."""
    return cmd_model(args, network_pick)


#: the subcommand this module adds to ``collops``: name, argument set-up, handler
COMMAND = ("model", _arguments, cmd_model_with_pick)
