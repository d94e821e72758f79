"""A reduce's root and a reduce_scatter_block's ranks on ``shm_stream`` fold each chunk into
their result as they read it (``protocols.shm_stream.fold_as_read``), in rank order.

Against numpy's left fold in rank order, ``((x0 ∘ x1) ∘ x2) ∘ …``, bit for bit, on data whose
float sums round differently in any other order: at every root, blocking and not, reduce,
reduce_scatter_block and allreduce (its reduce-scatter phase, in place and not), sizes
crossing chunks and filling the rings twice over, with the compiled loop and the Python one.
Switched off by the selection table, the scratch-buffer fold gives the same results.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import collops
from collops.algorithms.spec import make_spec
from collops.ops import as_op
from collops.shm import segment as seg
from collops.shm import stream as shm_stream
from collops.shm import stream_plan, stream_run
from tests.support.runners import compiled_runners
from tests.support.tuning import user_table

NAME = shm_stream.NAME
CHUNK = seg.DEFAULT_STREAM_CHUNK_BYTES
RING = seg.DEFAULT_STREAM_CHUNKS * CHUNK
#: (dtype, items per rank, operators): across chunk edges; two rings' worth, so writers wait
#: for ring slots while the root waits for the rank before them
CASES = [(np.float64, 3 * CHUNK // 8 + 5, ("sum", "max")),
         (np.float32, 2 * RING // 4 + 7, ("sum", "prod")),
         (np.int32, CHUNK // 4 * 2, ("sum", "bxor")),
         (np.uint8, CHUNK + 1, ("min",))]
NUMPY = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
         "bxor": np.bitwise_xor}


def _contribution(rank, dtype, n, salt):
    """Rank ``rank``'s data: floats of mixed magnitudes (their sum's rounding depends on the
    order), small integers elsewhere."""
    rng = np.random.default_rng(1000 * salt + rank)
    if np.dtype(dtype).kind == "f":
        scale = 10.0 ** rng.integers(-6, 7, n)
        return (rng.standard_normal(n) * scale).astype(dtype)
    return rng.integers(0, 100, n).astype(dtype)


def _left_fold(op, xs):
    return functools.reduce(NUMPY[op], xs)


def _counted_folds(monkeypatch):
    """Count the scratch-buffer folds (`FoldingExecution`) the ranks make."""
    made = []
    real = stream_run.FoldingExecution

    class Counted(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args, **kw):
            made.append(1)
            super().__init__(*args, **kw)

    monkeypatch.setattr(stream_run, "FoldingExecution", Counted)
    return made


def _every_fold(comm):
    """Every case: the wrong results, and how many scratch-buffer folds this rank made."""
    p, r = comm.size, comm.rank
    made = _counted_folds(pytest.MonkeyPatch())
    wrong = []
    salt = 0
    for dtype, n, ops in CASES:
        for op in ops:
            salt += 1
            xs = [_contribution(q, dtype, n, salt) for q in range(p)]
            total = _left_fold(op, xs)
            for root in range(p):
                out = np.empty(n, dtype) if r == root else None
                got = comm.reduce(xs[r], op, root, out=out, algorithm=NAME)
                if r == root and not np.array_equal(got, total):
                    wrong.append(("reduce", op, np.dtype(dtype).name, root))
                got = comm.ireduce(xs[r], op, root, algorithm=NAME).wait()
                if r == root and not np.array_equal(got, total):
                    wrong.append(("ireduce", op, np.dtype(dtype).name, root))
            m = n - n % p
            blocks = [_contribution(q, dtype, m, salt) for q in range(p)]
            whole = _left_fold(op, blocks)
            b = m // p
            got = comm.reduce_scatter_block(blocks[r], op, algorithm=NAME)
            if not np.array_equal(got, whole[r * b:(r + 1) * b]):
                wrong.append(("reduce_scatter_block", op, np.dtype(dtype).name))
            got = comm.allreduce(blocks[r], op, algorithm=NAME)
            if not np.array_equal(got, whole):
                wrong.append(("allreduce", op, np.dtype(dtype).name))
            mine = blocks[r].copy()
            comm.allreduce(mine, op, out=mine, algorithm=NAME)
            if not np.array_equal(mine, whole):
                wrong.append(("allreduce in place", op, np.dtype(dtype).name))
    return wrong, len(made)


@pytest.fixture(params=["compiled", "python"])
def mode(request):
    """The compiled loop and the Python one (the children fork with the setting)."""
    with compiled_runners(request.param == "compiled"):
        yield request.param


def test_the_data_tells_the_rank_order_from_any_other():
    # the check below could not fail if the data summed alike in every order
    xs = [_contribution(q, np.float64, 3 * CHUNK // 8 + 5, 1) for q in range(4)]
    assert not np.array_equal(_left_fold("sum", xs), _left_fold("sum", xs[::-1]))
    swapped = [xs[0], xs[2], xs[1], xs[3]]
    assert not np.array_equal(_left_fold("sum", xs), _left_fold("sum", swapped))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("p", [2, 3, 4])
def test_folding_as_read_keeps_the_rank_order_bit_for_bit(p, mode):
    # no rank gathered into a scratch buffer to fold after
    assert collops.spawn(_every_fold, p, transport="shm", timeout=220) == [([], 0)] * p


def _folds_made(comm):
    made = _counted_folds(pytest.MonkeyPatch())
    x = _contribution(comm.rank, np.float64, 3 * CHUNK // 8 + 5, 7)
    got = comm.reduce(x, "sum", 0, algorithm=NAME)
    return len(made), None if got is None else got.tobytes()


def test_only_the_selection_table_sends_a_root_back_to_the_scratch_buffer(tmp_path):
    on = collops.spawn(_folds_made, 3, transport="shm", timeout=50)
    with user_table(tmp_path / "tuning.toml", '[[protocols.shm_stream.fold_as_read]]\n'
                    'value = false\nsource = "test"\n'):
        off = collops.spawn(_folds_made, 3, transport="shm", timeout=50)
    assert [made for made, _ in on] == [0, 0, 0]
    assert [made for made, _ in off] == [1, 0, 0]  # the root's
    assert on[0][1] == off[0][1] and on[0][1] is not None


def test_a_folding_plan_needs_a_compiled_operator_and_chunks_of_whole_items():
    spec = make_spec("reduce", 4, np.float64, count=1 << 17, root=1, op=as_op("sum"))
    assert stream_plan.fold_as_read(spec, 1, CHUNK, False) is not None
    assert stream_plan.fold_as_read(spec, 0, CHUNK, False) is None  # not the root
    assert stream_plan.fold_as_read(spec, 1, CHUNK, True) is None  # blocks by reference
    assert stream_plan.fold_as_read(spec, 1, CHUNK - 4, False) is None  # items split
    logical = make_spec("reduce", 4, np.float64, count=1 << 17, root=1, op=as_op("land"))
    assert stream_plan.fold_as_read(logical, 1, CHUNK, False) is None  # numpy folds it
