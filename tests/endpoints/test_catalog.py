"""Algorithm lists per geometry: contents with and without each resource, and call checks."""

from __future__ import annotations

import numpy as np
import pytest

from collops import ops
from collops.algorithms import algorithms, get_algorithm
from collops.algorithms.registry import Algorithm
from collops.check.cases import LAST_NONZERO
from collops.endpoints import Verdict, Xfer, algorithm_lists, resources_of
from collops.endpoints.catalog import CONTIGUOUS
from collops.endpoints.config import parse_geometry_config
from collops.endpoints.xfer import spec_of
from collops.errors import ArgumentError

BASE = frozenset({CONTIGUOUS})
EVERYTHING = BASE | {"in_network_reduction", "one_node", "power_of_two_size"}


def lists(collective: str, resources: frozenset[str], size: int = 4,
          ranges: dict | None = None):
    return algorithm_lists(collective, resources, lambda x: spec_of(x, size), ranges)


def names(entries):
    return {e.name for e in entries}


@pytest.mark.parametrize(("collective", "algorithm", "resource"), [
    ("gather", "or_combine", "in_network_reduction"),
    ("allreduce", "affinity_tree", "one_node"),
    ("bcast", "affinity_tree", "one_node"),
    ("allgather", "recursive_doubling", "power_of_two_size"),
])
def test_an_algorithm_is_offered_only_where_its_resource_is(collective, algorithm, resource):
    always, must_query = lists(collective, EVERYTHING)
    assert algorithm in names(always) | names(must_query)
    always, must_query = lists(collective, EVERYTHING - {resource})
    assert algorithm not in names(always) | names(must_query)
    entry = next(e for e in lists(collective, EVERYTHING).always
                 + lists(collective, EVERYTHING).must_query if e.name == algorithm)
    assert resource in entry.resources


def test_the_lists_cover_the_registry_and_follow_restrictions():
    always, must_query = lists("allreduce", EVERYTHING)
    # every algorithm but those only a particular transport runs (mpi_native, shm_direct)
    assert names(always) | names(must_query) == {a.name for a in algorithms("allreduce")
                                                  if not a.needs - EVERYTHING}
    assert "ring" in names(must_query)            # needs a commutative operator
    assert "recursive_doubling" in names(always)
    ring = next(e for e in must_query if e.name == "ring")
    assert ring.restrictions == ("the operator is commutative",)
    assert ring.message_sizes == (0, None) and ring.description
    assert "commutative" not in " ".join(ring.resources)


def test_without_contiguous_buffers_no_schedule_is_offered():
    always, must_query = lists("bcast", EVERYTHING - {CONTIGUOUS})
    assert always == [] and must_query == []


def test_needs_of_an_algorithm_are_resources():
    alg = Algorithm("allreduce", "native", "a transport's own", get_algorithm(
        "allreduce", "ring").builder, needs=frozenset({"mpi"}), native=lambda *a: None)
    assert resources_of(alg) == {"mpi"}


def test_check_rejects_invalid_calls_with_reasons():
    always, must_query = lists("allreduce", EVERYTHING, size=4)
    ring = next(e for e in must_query if e.name == "ring")
    assert ring.check(Xfer("allreduce", "ring", np.ones(8), op=ops.SUM))
    verdict = ring.check(Xfer("allreduce", "ring", np.ones(8, np.int64), op=LAST_NONZERO))
    assert not verdict and verdict.reasons == ("requires that the operator is commutative",)
    assert "invalid: requires that the operator is commutative" == str(verdict)
    bad_op = ring.check(Xfer("allreduce", "ring", np.ones(3), op=ops.BAND))
    assert not bad_op and "BAND" in bad_op.reasons[0]
    objects = ring.check(Xfer("allreduce", "ring", np.array([object()])))
    assert not objects and "cannot move" in objects.reasons[0]


def test_check_names_a_bad_root_and_uneven_blocks():
    (entry, *_), _ = lists("scatter", EVERYTHING, size=4)
    assert not entry.check(Xfer("scatter", entry.name, np.ones(8), root=7))
    assert "root 7" in entry.check(Xfer("scatter", entry.name, np.ones(8), root=7)).reasons[0]
    uneven = entry.check(Xfer("scatter", entry.name, np.ones(7)))
    assert not uneven and "equal blocks" in uneven.reasons[0]
    no_data = entry.check(Xfer("scatter", entry.name, None))
    assert not no_data and "no data" in no_data.reasons[0]


def test_preference_rules_give_message_size_ranges():
    ranges = {"recursive_doubling": (0, 64)}
    always, must_query = lists("allreduce", EVERYTHING, ranges=ranges)
    entry = next(e for e in must_query if e.name == "recursive_doubling")
    assert entry.message_sizes == (0, 64)
    assert entry.check(Xfer("allreduce", None, np.ones(8)))              # 64 bytes
    too_big = entry.check(Xfer("allreduce", None, np.ones(9)))
    assert not too_big and "72 bytes is outside" in too_big.reasons[0]
    assert isinstance(too_big, Verdict)


def test_am_collectives_list_their_data_collective():
    spec = spec_of(Xfer("amreduce", None, np.ones(3), op="max"), 5)
    assert not isinstance(spec, Verdict)
    assert spec.collective == "reduce" and spec.op is ops.MAX and spec.size == 5


def test_configuration_parsing_and_errors():
    cfg = parse_geometry_config({"geometry": {"tasks": [2, 0], "contexts": [1]},
                                 "algorithms": {"bcast": {"prefer": ["binomial"]}}}, 3)
    assert cfg.endpoints == ((2, 1), (0, 1))
    assert cfg.preferences == {"bcast": {"prefer": ["binomial"], "rules": []}}
    explicit = parse_geometry_config({"geometry": {"endpoints": [[1, 0], [1, 1]]}}, 2)
    assert explicit.endpoints == ((1, 0), (1, 1))
    with pytest.raises(ArgumentError, match="must lie in"):
        parse_geometry_config({"geometry": {"tasks": "0-4"}}, 3)
    with pytest.raises(ArgumentError, match="no such algorithm"):
        parse_geometry_config({"algorithms": {"bcast": {"prefer": ["fastest"]}}}, 3)
