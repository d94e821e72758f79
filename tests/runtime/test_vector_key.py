"""The compiled key of a v-call's counts and displacements (`collops.runtime._keys`) is the
Python one's (`vector_calls.python_vector_key`) for every argument: lists and tuples of ints
copied, numpy integers, ranges and bools converted, anything else None."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collops.runtime import vector_calls

pytestmark = pytest.mark.skipif(vector_calls._keys is None, reason="built without a C compiler")

INTS = st.lists(st.integers(-(1 << 70), 1 << 70), max_size=6)
PART = st.one_of(
    st.none(), INTS, INTS.map(tuple), INTS.map(lambda v: [bool(i % 2) for i in v]),
    st.lists(st.integers(0, 1000), max_size=6).map(np.array),
    st.lists(st.integers(0, 1000), max_size=6).map(lambda v: [np.int32(i) for i in v]),
    st.lists(st.floats(allow_nan=False), min_size=1, max_size=3), st.text(max_size=3),
    st.binary(max_size=3), st.integers(0, 5).map(range), st.integers())


@given(st.lists(PART, min_size=1, max_size=4))
def test_the_compiled_key_is_the_python_key(parts):
    assert vector_calls._keys.vector_key(*parts) == vector_calls.python_vector_key(*parts)


def test_the_fast_path_uses_the_compiled_key():
    assert vector_calls.vector_key is vector_calls._keys.vector_key
    key = vector_calls.vector_key([1, 2], None)
    assert key == ((1, 2), None) and type(key[0]) is tuple
