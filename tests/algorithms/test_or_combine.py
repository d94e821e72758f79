"""The seed-002 gather (``or_combine``): its shape, its registry record, its bit-exactness."""

from __future__ import annotations

import numpy as np
import pytest

from collops.algorithms import get_algorithm, make_spec
from collops.schedule import OP_BOR_BYTES, OP_ZERO, run_reference, validate
from collops.schedule.table import StepKind
from tests.support.definedness import undefined_reads


def or_combine(collective: str = "gather"):
    return get_algorithm(collective, "or_combine")


def awkward_values(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    """Floats whose bits a value-level reduction would disturb: −0, NaN payloads, ±inf, tiny."""
    rng = np.random.default_rng(seed)
    real = np.dtype(dtype).type(0).real.dtype
    specials = np.array([-0.0, np.inf, -np.inf, np.finfo(real).tiny / 4, -1.5], dtype=real)
    values = rng.standard_normal(n).astype(real)
    values[: min(n, len(specials))] = specials[: min(n, len(specials))]
    bits = values.view(np.uint32 if real.itemsize == 4 else np.uint64)
    if n > len(specials):  # a NaN with a payload and its sign bit set
        bits[len(specials)] = np.iinfo(bits.dtype).max ^ 4
    if np.dtype(dtype).kind == "c":
        return (values + 1j * rng.standard_normal(n).astype(real)[::-1]).astype(dtype)
    return values.astype(dtype)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 11])
def test_every_contribution_is_the_zero_padded_whole_result_ored_up_a_tree(p):
    root = p // 2
    spec = make_spec("gather", p, np.float64, count=3, root=root)
    schedules = or_combine().build_all(spec)
    whole = 3 * p
    for r, s in enumerate(schedules):
        kinds = s.kind.tolist()
        zeros = [i for i in range(len(s)) if kinds[i] == StepKind.REDUCE and s.op[i] == OP_ZERO]
        assert len(zeros) == 1 and s.count[zeros[0]] == whole  # the p·m-element contribution
        ors = [i for i in range(len(s)) if kinds[i] == StepKind.REDUCE and s.op[i] == OP_BOR_BYTES]
        received = [i for i in range(len(s)) if kinds[i] == StepKind.RECV]
        assert len(ors) == len(received) and all(s.count[i] == whole for i in ors + received)
        sends = [i for i in range(len(s)) if kinds[i] == StepKind.SEND]
        assert len(sends) == (0 if r == root else 1)  # one reduction: each rank sends once
        assert all(s.count[i] == whole for i in sends)
    assert sum(len(np.nonzero(s.kind == StepKind.SEND)[0]) for s in schedules) == p - 1


@pytest.mark.parametrize("collective", ["gather", "gatherv"])
def test_registry_record_wants_in_network_reduction(collective):
    algorithm = or_combine(collective)
    assert "in_network_reduction" in algorithm.resources
    assert not algorithm.needs, "it must run on every transport"
    assert "combining network" in algorithm.description
    assert "every transport and topology" in algorithm.description
    assert algorithm.estimate(make_spec(collective, 5, counts=[1] * 5)) > 0


@pytest.mark.parametrize("p", [1, 2, 3, 5, 6, 7, 8, 9, 12, 17])
@pytest.mark.parametrize("root", [0, 1, -1])
def test_never_reads_or_combines_undefined_scratch(p, root):
    counts = [(3 * r + 1) % 4 for r in range(p)]  # some zero
    spec = make_spec("gatherv", p, np.int16, counts=counts, root=root % p)
    schedules = or_combine("gatherv").build_all(spec)
    validate(schedules)
    problems, recv_masks = undefined_reads(schedules)
    assert problems == []
    assert recv_masks[root % p].all(), "every position of the root's result is written"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("p", [3, 4, 5, 7])
def test_float_and_complex_results_are_bit_exact(dtype, p):
    root = p - 2
    count = 9
    spec = make_spec("gather", p, dtype, count=count, root=root)
    inputs = [awkward_values(dtype, count, seed) for seed in range(p)]
    results = run_reference(or_combine().build_all(spec), inputs, dtype)
    want = np.concatenate(inputs)
    assert results[root].view(np.uint8).tobytes() == want.view(np.uint8).tobytes()


def test_gatherv_places_blocks_at_scattered_displacements():
    p, root = 6, 4
    counts = [2, 0, 3, 1, 2, 4]
    displs = [20, 0, 3, 0, 12, 14]  # out of rank order, with gaps
    spec = make_spec("gatherv", p, np.float64, counts=counts, displs=displs, root=root)
    inputs = [np.arange(c, dtype=np.float64) + 10 * r for r, c in enumerate(counts)]
    schedules = or_combine("gatherv").build_all(spec)
    validate(schedules)
    fill = -7
    results = run_reference(schedules, inputs, np.float64, fill=fill)
    want = np.full(22, fill, np.float64)
    for r in range(p):
        want[displs[r]: displs[r] + counts[r]] = inputs[r]
    np.testing.assert_array_equal(results[root], want)
