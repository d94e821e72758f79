"""`collops.algorithms(collective)`: the registry's records, as users see them from Python."""

from __future__ import annotations

import pytest

import collops
from collops import COLLECTIVES
from collops.algorithms import make_spec
from collops.cli import main

#: issue 2's required algorithms, by collective (more are welcome)
REQUIRED = {
    "bcast": {"linear", "binomial", "scatter_allgather", "pipeline"},
    "scatter": {"linear", "binomial"}, "scatterv": {"linear", "binomial"},
    "gather": {"linear", "binomial", "or_combine"}, "gatherv": {"linear", "binomial"},
    "allgather": {"ring", "bruck", "recursive_doubling", "alltoallv"},
    "allgatherv": {"ring", "bruck", "recursive_doubling", "alltoallv"},
    "alltoall": {"linear", "pairwise", "bruck", "random_chunked"},
    "alltoallv": {"linear", "pairwise", "random_chunked"},
    "reduce": {"binomial", "nary_tree", "rabenseifner"},
    "allreduce": {"recursive_doubling", "ring", "rabenseifner", "reduce_bcast"},
    "reduce_scatter": {"ring", "recursive_halving", "pairwise"},
    "scan": {"linear", "recursive_doubling"}, "exscan": {"linear", "recursive_doubling"},
    "barrier": {"dissemination", "tree"},
}


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_records_have_name_description_restrictions_and_parameters(collective):
    records = collops.algorithms(collective)
    names = [a.name for a in records]
    assert len(names) == len(set(names)), names
    assert REQUIRED.get(collective, set()) <= set(names), (collective, names)
    for a in records:
        assert a.collective == collective
        assert isinstance(a.name, str) and a.name.isidentifier()
        assert isinstance(a.description, str) and a.description.strip()
        assert "\n" not in a.description  # one line, as the CLI table prints it
        for r in a.restrictions:
            assert r.name and r.description and callable(r.check)
        for p in a.params:
            assert p.name.isidentifier() and p.description
            assert p.coerce(p.default, a.name) == p.default


def test_restrictions_and_parameters_are_the_documented_ones():
    by_name = {a.name: a for a in collops.algorithms("allgather")}
    assert [r.name for r in by_name["recursive_doubling"].restrictions] == ["power_of_two"]
    assert by_name["ring"].restrictions == ()
    params = {p.name: p.default for p in by_name["alltoallv"].params}
    assert set(params) == {"seed", "chunk"}
    linear = {a.name: a for a in collops.algorithms("alltoall")}["linear"]
    assert "throttle" in {p.name for p in linear.params}
    commutative_only = {a.name for a in collops.algorithms("allreduce")
                        if any(r.name == "commutative" for r in a.restrictions)}
    assert "ring" in commutative_only
    gather = {a.name: a for a in collops.algorithms("gather")}
    assert "in_network_reduction" in gather["or_combine"].resources


def test_records_decide_eligibility_for_a_spec():
    rd = {a.name: a for a in collops.algorithms("allgather")}["recursive_doubling"]
    assert rd.eligible(make_spec("allgather", 8, count=4))
    assert not rd.eligible(make_spec("allgather", 6, count=4))
    assert rd.reasons_ineligible(make_spec("allgather", 6, count=4)) == [
        "the number of ranks is a power of two"]


def test_an_unknown_collective_is_an_error_naming_it():
    with pytest.raises(collops.CollopsError) as info:
        collops.algorithms("allsum")
    assert "allsum" in str(info.value)


@pytest.mark.parametrize("collective", ["allreduce", "gather"])
def test_the_cli_listing_is_the_same_registry(capsys, collective):
    assert main(["algorithms", collective]) == 0
    out = capsys.readouterr().out
    for a in collops.algorithms(collective):
        assert a.name in out and a.description[:30] in out
