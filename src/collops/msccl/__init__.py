"""MSCCL-IR in and out: any collops schedule written as the XML program MSCCL's runtime reads
(`export`), and such a file turned into a collops algorithm (`load`).

The mapping, in short (docs/writing-algorithms.md has the whole of it):

* buffers: MSCCL's ``i``/``o``/``s`` are collops' SEND/RECV/TMP; one chunk is one element of
  the exported call, and an imported program scales each chunk to ``count / chunks`` elements;
* a rank is a ``gpu``; its steps go to thread blocks — one per peer it sends to, one per peer
  it receives from, one for local copies and reductions — in schedule order, on channel 0, so
  the k-th send to a peer meets the peer's k-th receive exactly as in collops;
* dependencies: a step's first dependency in another thread block is its ``depid``/``deps``,
  each further one a ``nop`` before it; order within a thread block is implicit.
"""

from .export import to_xml
from .load import MscclProgram, import_file, parse, register

__all__ = ["MscclProgram", "import_file", "parse", "register", "to_xml"]
