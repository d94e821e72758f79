"""A `CallSpec` works out its hash once; equal specs hash alike, and a spec sent to another
process (whose string hashes differ) is found there as a spec made there is."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import replace

import numpy as np

from collops.algorithms.spec import make_spec
from collops.ops import as_op

CHILD = """
import pickle, sys
import numpy as np
from collops.algorithms.spec import make_spec
sent = pickle.loads(sys.stdin.buffer.read())
made = make_spec("allgatherv", 3, np.dtype(np.int32), counts=[1, 2, 3])
print(hash(sent) == hash(made) and {made: "found"}.get(sent))
"""


def test_equal_specs_hash_alike_and_a_changed_field_changes_the_spec():
    a = make_spec("allreduce", 4, np.dtype(np.float64), count=8, op=as_op("sum"))
    b = make_spec("allreduce", 4, np.dtype(np.float64), count=8, op=as_op("sum"))
    assert a is not b and a == b and hash(a) == hash(b) == hash(a)
    assert {a: 1}[b] == 1
    for change in ({"count": 9}, {"size": 3}, {"root": 1}, {"op": as_op("max")},
                   {"dtype": np.dtype(np.float32)}):
        other = replace(a, **change)
        assert other != a and {a: 1}.get(other) is None, change


def test_a_pickled_spec_leaves_its_hash_behind_and_is_found_in_another_process():
    spec = make_spec("allgatherv", 3, np.dtype(np.int32), counts=[1, 2, 3])
    hash(spec)
    assert "_hash" not in pickle.loads(pickle.dumps(spec)).__dict__
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    child = subprocess.run([sys.executable, "-c", CHILD], input=pickle.dumps(spec),
                           capture_output=True, env=env, timeout=60)
    assert child.stdout.decode().strip() == "found", child.stderr.decode()
