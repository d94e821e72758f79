"""The slot codec's `encode_rows` (a scatter's or alltoall's slots, one call) and its plain
objects (pickled without a buffer callback): the compiled codec against the Python one and
against `pickle` itself."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from collops.runtime import _slots, objects, slot_codec

SLOT, HEAD = objects.SLOT, slot_codec.HEAD

class Sub(int):
    """An int subclass: not plain (its pickle names the class)."""


#: objects of every kind the compiled codec tells apart: plain ones (scalars, and small
#: containers of them two levels deep), and others (arrays, deeper or longer containers,
#: subclasses, bytearrays) that pickle with the buffer callback
OBJECTS = [0, -7, 2**70, 1.5, "text", b"raw", True, None, (1, "a"), [1, [2, 3]],
           {"a": 1, "b": (2, 3)}, [[[1]]], list(range(40)), {"x": np.arange(3)},
           np.arange(4.0), bytearray(b"ab"), [{"k": [1]}], Sub(3)]


@pytest.mark.parametrize("codec", [_slots, slot_codec], ids=["compiled", "python"])
def test_rows_that_all_fit_hold_each_objects_pickle(codec):
    rows = np.zeros(len(OBJECTS) * SLOT, np.uint8)
    assert codec.encode_rows(rows, SLOT, OBJECTS) is None
    got = codec.decode(rows, SLOT, len(OBJECTS), 0, len(OBJECTS))
    for want, back in zip(OBJECTS, got, strict=True):
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(back, want)
        elif isinstance(want, dict) and "x" in want:
            np.testing.assert_array_equal(back["x"], want["x"])
        else:
            assert back == want and type(back) is type(want)
    for j, obj in enumerate(OBJECTS[:13]):  # in band, the same bytes pickle writes
        n = int(rows[j * SLOT: j * SLOT + HEAD].view(np.int64)[0])
        assert rows[j * SLOT + HEAD: j * SLOT + HEAD + n].tobytes() == pickle.dumps(obj, 5)


@pytest.mark.parametrize("codec", [_slots, slot_codec], ids=["compiled", "python"])
def test_a_row_that_does_not_fit_gives_every_objects_result(codec):
    big = np.arange((SLOT - HEAD) // 8 + 1)
    objs = [1, {"x": big}, "y" * SLOT, (2, 3)]
    rows = np.zeros(len(objs) * SLOT, np.uint8)
    got = codec.encode_rows(rows, SLOT, objs)
    assert got is not None and got[0] is None and got[3] is None
    main, buffers = got[1]
    assert len(buffers) == 1 and np.shares_memory(np.asarray(buffers[0]), big)
    np.testing.assert_array_equal(pickle.loads(main, buffers=buffers)["x"], big)
    main, buffers = got[2]
    assert buffers == [] and pickle.loads(main) == "y" * SLOT
    assert codec.decode(rows, SLOT, len(objs), 0, 1) is None  # the slots say TOO_BIG


@pytest.mark.parametrize("codec", [_slots, slot_codec], ids=["compiled", "python"])
def test_rows_outside_the_buffer_are_an_error(codec):
    with pytest.raises(ValueError):
        codec.encode_rows(np.zeros(2 * SLOT - 1, np.uint8), SLOT, [1, 2])
    with pytest.raises(TypeError):
        codec.encode_rows(np.zeros(2 * SLOT, np.uint8), SLOT, 5)


def test_an_object_whose_pickling_fails_raises_from_the_rows():
    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("no pickling")

    with pytest.raises(RuntimeError, match="no pickling"):
        _slots.encode_rows(np.zeros(2 * SLOT, np.uint8), SLOT, [1, Unpicklable()])
