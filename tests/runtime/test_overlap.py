"""Whether two arrays may share memory (`runtime.overlap`): the compiled check and its Python
twin give numpy's ``may_share_memory`` answer for arrays of one owner, of two owners, and views
of buffers that are not owning arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from collops.runtime import overlap


def _arrays() -> list[np.ndarray]:
    """Owning arrays, views of them (and views of views), and arrays over shared bytes."""
    a, b = np.zeros(16), np.zeros(16)
    raw = bytearray(128)
    over = np.frombuffer(raw, np.float64)
    return [a, b, a[:8], a[8:], a[4:12], a[::2], a[1::2], a[:8][2:6], a.reshape(4, 4)[1],
            a.view(np.uint8)[:8], b[3:], b.reshape(4, 4).T, over, over[4:], over[:4],
            np.frombuffer(raw, np.uint8)[40:], np.frombuffer(memoryview(raw)[64:], np.int64),
            np.zeros(0), a[5:5]]


def test_the_compiled_check_is_used():
    assert overlap._overlap is not None, "collops.runtime._overlap is not built"
    assert overlap.may_overlap is overlap._overlap.may_overlap


@pytest.mark.parametrize("check", ["compiled", "python"])
def test_every_pair_gets_numpy_s_answer(check):
    may_overlap = overlap.may_overlap if check == "compiled" else overlap.python_may_overlap
    arrays = _arrays()
    answers = set()
    for x, y in itertools.product(arrays, repeat=2):
        expected = bool(np.may_share_memory(x, y))
        answers.add(expected)
        assert may_overlap(x, y) is expected, (x.base is not None, y.base is not None)
    assert answers == {True, False}  # the pairs tell the answers apart
