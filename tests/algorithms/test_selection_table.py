"""The built-in selection table (``collops/algorithms/defaults.toml``): it parses, its rules
name real algorithms and real evidence, it reproduces the choices made before it existed,
`explain` shows what decided, and users' tables override it or are refused with a place."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import collops
from collops.algorithms import selection, tuning
from collops.algorithms.registry import CostModel, algorithms, get_algorithm
from collops.algorithms.spec import CallSpec, make_spec
from collops.errors import ArgumentError
from collops.ops import SUM
from collops.shm import direct as shm_direct

ROOT = Path(__file__).resolve().parents[2]
KiB, MiB = 1024, 1024 * 1024
SHM = frozenset({"shm_direct", "shm_stream", "shm_cma"})
#: resource sets a communicator may have: every shm component, some of them, none (threads)
RESOURCE_SETS = [SHM, SHM - {"shm_cma"}, SHM - {"shm_stream"}, frozenset({"shm_direct"}),
                 frozenset()]
STREAMED = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce",
            "reduce_scatter_block")
SIZES = [8 << (3 * i) for i in range(9)]  # 8 B, 64 B, ..., 64 MiB (bytes per block)


# -- the choice before the table, copied from the code it replaced (kept as a reference) --------
_OLD_AUTO_UP_TO = {
    "bcast": {2: 4 * MiB, 8: math.inf},
    "allgather": {2: math.inf, 8: math.inf},
    "alltoall": {2: math.inf, 8: math.inf},
    "scatter": {2: 8 * MiB, 8: math.inf},
    "gather": {2: math.inf, 8: math.inf},
    "reduce": {2: 4 * MiB, 8: math.inf},
    "allreduce": {2: 4 * MiB, 8: MiB},
    "reduce_scatter_block": {2: 256 * KiB, 8: MiB},
}
_OLD_AUTO_FROM = {"allreduce": {2: 512 * KiB, 8: 0}}
_OLD_CMA_AUTO = frozenset({"reduce"})


def _old_by_ranks(bounds, p):
    return bounds[min((q for q in bounds if q >= p), default=max(bounds))]


def _old_stream_cost(spec: CallSpec, model: CostModel) -> float:
    n, p = spec.count * spec.itemsize, spec.size
    if spec.collective not in _OLD_AUTO_UP_TO or shm_direct.fits_a_slot(spec):
        return math.inf
    floor = (_old_by_ranks(_OLD_AUTO_FROM[spec.collective], p)
             if spec.collective in _OLD_AUTO_FROM else 0)
    if not floor <= n <= _old_by_ranks(_OLD_AUTO_UP_TO[spec.collective], p):
        return math.inf
    return 0.25 * model.alpha + 0.5 * n * model.beta


def _old_cma_cost(spec: CallSpec, model: CostModel) -> float:
    if spec.collective not in _OLD_CMA_AUTO or shm_direct.fits_a_slot(spec):
        return math.inf
    if spec.collective == "reduce" and spec.size > 2:
        return math.inf
    return 0.5 * model.alpha + spec.count * spec.itemsize * model.beta


def old_choice(spec: CallSpec, resources: frozenset[str]) -> str:
    """The algorithm the cost-calibrated selection took before the table (no tuning file)."""
    model = CostModel()
    old = {"shm_stream": _old_stream_cost, "shm_cma": _old_cma_cost}
    candidates = [a for a in algorithms(spec.collective)
                  if a.needs <= resources and a.eligible(spec)]
    return min(candidates, key=lambda a: old[a.name](spec, model) if a.name in old
               else a.estimate(spec, model)).name


def _spec(collective: str, p: int, nbytes: int) -> CallSpec:
    return make_spec(collective, p, np.float64, count=max(1, nbytes // 8),
                     op=SUM if collective in ("reduce", "allreduce", "reduce_scatter_block")
                     else None)


# -- the file ---------------------------------------------------------------------------------
def _anchors(markdown: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings."""
    found = set()
    for line in markdown.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def _all_rules(table: tuning.Tuning):
    for collective, rules in table.rules.items():
        for rule in rules:
            yield collective, rule, rule.source
    for component, settings in table.protocols.items():
        for name, rules in settings.items():
            for rule in rules:
                yield f"{component}.{name}", rule, rule.source


def test_the_builtin_table_parses_and_names_real_algorithms():
    table = tuning.builtin()
    assert set(STREAMED) <= set(table.rules)
    for collective, rules in table.rules.items():
        for rule in rules:
            for name in ([rule.algorithm] if rule.algorithm else list(rule.exclude)):
                assert get_algorithm(collective, name).name == name
    assert {"single_copy", "single_copy_min", "split_min"} <= set(table.protocols["shm"])


def test_the_shm_protocols_constants_are_table_settings():
    from collops.shm import endpoint
    table = tuning.builtin()
    assert set(endpoint.TABLE_ONLY) <= set(table.protocols["shm"])
    assert {"by_reference", "own_block"} <= set(table.protocols["shm_stream"])
    assert "scratch_bytes" in table.protocols["shm_cma"]


def test_a_user_table_chooses_an_allgathers_own_block_source_or_is_refused(
        user_table, monkeypatch):
    from collops.shm import stream_plan
    from collops.shm.stream_protocol import IN_RECV, IN_SEND
    spec = _spec("allgather", 2, 4 * MiB)
    assert stream_plan.own_block(spec) == IN_SEND
    for value, expected in (('"recv"', IN_RECV), ('"elsewhere"', None), ("1", None)):
        path = user_table(f"[[protocols.shm_stream.own_block]]\nvalue = {value}\n")
        tuning.forget_user_tables()
        monkeypatch.setenv("COLLOPS_TUNING_FILE", path)
        collops.reload_settings()
        try:
            if expected is None:
                with pytest.raises(ArgumentError, match="own_block"):
                    stream_plan.own_block(spec)
            else:
                assert stream_plan.own_block(spec) == expected
        finally:
            monkeypatch.delenv("COLLOPS_TUNING_FILE")
            collops.reload_settings()
            tuning.forget_user_tables()


def test_every_rule_names_an_existing_record_or_finding():
    for where, _rule, source in _all_rules(tuning.builtin()):
        assert source, f"{where}: a rule without a source"
        path, _, anchor = source.partition("#")
        assert path.startswith("docs/"), (where, source)
        assert (ROOT / path).is_file(), (where, source)
        if anchor:
            assert anchor in _anchors(ROOT / path), (where, source)


def test_every_protocol_setting_has_a_rule_for_every_call():
    table = tuning.builtin()
    for component, settings in table.protocols.items():
        for name in settings:
            for collective in STREAMED:
                for p in (2, 3, 8):
                    assert table.setting(component, name, _spec(collective, p, MiB)) is not None


# -- the decisions --------------------------------------------------------------------------
@pytest.mark.parametrize("collective", STREAMED)
def test_the_table_reproduces_the_choices_made_before_it(collective):
    different = []
    for resources in RESOURCE_SETS:
        for p in (2, 3, 4, 8):
            for nbytes in SIZES:
                spec = _spec(collective, p, nbytes)
                now = selection.select(spec, resources=resources).algorithm.name
                before = old_choice(spec, resources)
                if now != before:
                    different.append((sorted(resources), p, nbytes, before, now))
    assert not different, different


def test_the_table_decides_where_the_stream_runs_and_the_cost_model_elsewhere():
    big = _spec("allreduce", 2, MiB)
    choice = selection.select(big, resources=SHM)
    assert choice.algorithm.name == "shm_stream" and choice.rule is not None
    assert choice.rule.source == "docs/bench/n2-large.json"
    small = _spec("allreduce", 2, 256 * KiB)  # below the 2-rank stream's floor: a schedule
    choice = selection.select(small, resources=SHM)
    assert choice.rule is None and choice.algorithm.name not in ("shm_stream", "shm_cma")
    assert {"shm_stream", "shm_cma"} <= {n for r in choice.excluded for n in r.exclude}


def test_stream_and_cma_costs_are_finite_models():
    model = CostModel()
    for collective in STREAMED:
        for name in ("shm_stream", "shm_cma"):
            alg = get_algorithm(collective, name)
            small, large = (alg.estimate(_spec(collective, 4, n), model) for n in (8, 64 * MiB))
            assert 0 < small < large < math.inf, (collective, name)


def test_by_reference_follows_the_protocol_table():
    def by_reference(collective, p, nbytes):
        return tuning.setting("shm_stream", "by_reference", _spec(collective, p, nbytes)).value
    assert by_reference("alltoall", 2, 4 * MiB) and by_reference("alltoall", 2, 6 * MiB)
    assert not by_reference("alltoall", 2, 2 * MiB) and not by_reference("alltoall", 2, 8 * MiB)
    assert not by_reference("alltoall", 4, 4 * MiB)  # more ranks than cores
    assert not any(by_reference("allgather", 2, n) for n in SIZES)  # one pass for both copies
    assert not by_reference("bcast", 2, 4 * MiB)  # a root's idle core: the ring pipelines


# -- explain --------------------------------------------------------------------------------
def test_explain_shows_the_rule_that_decided_and_the_protocol_settings():
    text = selection.explain(_spec("alltoall", 2, 4 * MiB), SHM)
    assert "decided by: rule collops/algorithms/defaults.toml [[alltoall.rule]]" in text
    assert "shm_stream for 0 B-∞ per block, 1-2 ranks, on shm" in text
    assert "source: docs/bench/n2-large.json" in text
    assert "shm_stream.by_reference = True" in text
    assert "docs/performance.md#rings-against-blocks-by-reference" in text


def test_explain_shows_the_costs_and_exclusions_when_the_model_decided():
    text = selection.explain(_spec("bcast", 2, 16 * MiB), SHM)
    assert "decided by: lowest α-β cost estimate" in text
    assert "excluded from the cost model by:" in text and "excluded by a rule" in text


def _explain_allreduce(comm):
    return comm.explain("allreduce", np.ones(MiB // 8))


def test_comm_explain_shows_the_transport_protocols_in_force(monkeypatch):
    monkeypatch.setenv("COLLOPS_SHM_SINGLE_COPY_MIN", str(3 * MiB))  # read by each rank
    text = collops.spawn(_explain_allreduce, 2, transport="shm", timeout=60)[0]
    row = next(line for line in text.splitlines() if line.startswith("shm_stream "))
    assert row.endswith("<-- chosen") and "decided by: rule" in text
    assert f"shm.single_copy_min = {3 * MiB}  (COLLOPS_SHM_SINGLE_COPY_MIN)" in text
    assert "shm.split_min = 262144  (collops/algorithms/defaults.toml" in text


# -- users' tables -------------------------------------------------------------------------
@pytest.fixture
def user_table(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "tuning.toml"
        path.write_text(text)
        selection.clear_cache()
        return str(path)
    yield write
    selection.clear_cache()


@pytest.mark.parametrize("text, where", [
    ('[allreduce]\nalgorithm = "ring"\nalgorithm = "ring"\n', "line 3"),
    ('[[allreduce.rule]]\nalgorithm = "ring"\nmax_byte = 4\n',
     "[[allreduce.rule]] #1: unknown key 'max_byte'"),
    ('[[allreduce.rule]]\nalgorithm = "ring"\n[[allreduce.rule]]\nexclude = ["nope"]\n',
     "[[allreduce.rule]] #2: allreduce has no algorithm 'nope'"),
    ('[[bcast.rule]]\nalgorithm = "linear"\nmin_ranks = -1\n',
     "[[bcast.rule]] #1: min_ranks must be a non-negative integer"),
    ('[[bcast.rule]]\nalgorithm = "linear"\nper = "rank"\n', "[[bcast.rule]] #1: per must be"),
    ('[[bcast.rule]]\nmax_bytes = 8\n', "[[bcast.rule]] #1: give 'algorithm' or 'exclude'"),
    ('[broadcast]\nalgorithm = "linear"\n', "[broadcast]: not a collective"),
    ('[[protocols.shm.split_min]]\nsource = "x"\n',
     "[[protocols.shm.split_min]] #1: missing key 'value'"),
])
def test_a_malformed_user_table_is_an_error_naming_where(user_table, text, where):
    path = user_table(text)
    with pytest.raises(ArgumentError) as info:
        selection.select(_spec("allreduce", 2, 64), tuning_file=path)
    assert path in str(info.value) and where in str(info.value)


def test_a_user_rule_overrides_a_builtin_one(user_table):
    path = user_table('[[allreduce.rule]]\nmin_bytes = 65536\nalgorithm = "ring"\n'
                      'source = "my own runs"\n')
    spec = _spec("allreduce", 2, MiB)
    assert selection.select(spec, resources=SHM).algorithm.name == "shm_stream"
    choice = selection.select(spec, resources=SHM, tuning_file=path)
    assert choice.algorithm.name == "ring" and choice.rule is not None
    assert choice.rule.where == f"{path} [[allreduce.rule]] #1"
    # calls the user's rule does not cover: the built-in rules still decide
    assert selection.select(_spec("allreduce", 2, 8), resources=SHM,
                            tuning_file=path).algorithm.name == "shm_direct"


def test_a_user_protocol_setting_overrides_the_builtin_one(user_table):
    path = user_table('[[protocols.shm_stream.by_reference]]\ncollective = "allgather"\n'
                      'value = true\nsource = "mine"\n')
    spec = _spec("allgather", 2, MiB)
    assert tuning.setting("shm_stream", "by_reference", spec, path).value is True
    assert tuning.setting("shm_stream", "by_reference", spec).value is False
    assert tuning.setting("shm_stream", "by_reference", _spec("alltoall", 2, 8), path
                          ).value is False


def test_a_rule_naming_an_ineligible_algorithm_falls_back(user_table):
    # a 1 MiB contribution does not fit shm_direct's slot: the built-in rules decide instead
    path = user_table('[[bcast.rule]]\nalgorithm = "shm_direct"\nsource = "mine"\n')
    spec = _spec("bcast", 2, MiB)
    assert not get_algorithm("bcast", "shm_direct").eligible(spec)
    choice = selection.select(spec, resources=SHM, tuning_file=path)
    assert choice.algorithm.name == selection.select(spec, resources=SHM).algorithm.name
    # and on a transport without the resource, the cost model
    choice = selection.select(_spec("bcast", 2, 8), tuning_file=path)
    assert choice.rule is None and choice.reason == "lowest α-β cost estimate"


def test_the_shm_environment_variables_are_settings():
    from collops.config import Settings
    default = Settings.from_env({})
    assert default.shm_single_copy is None and default.shm_single_copy_min is None
    given = Settings.from_env({"COLLOPS_SHM_SINGLE_COPY": "0",
                               "COLLOPS_SHM_SINGLE_COPY_MIN": "4096"})
    assert given.shm_single_copy is False and given.shm_single_copy_min == 4096
