"""Where a call stood when a peer failed: the collective, its number and its step.

A transport notices a dead peer without knowing which collective needed it; the execution
that raised does. `locate_failure` reads that from any execution — a schedule's, the root
agreement's or a native one's — and names it in the `PeerFailed`, so every survivor says
"rank 1 died in allgather (call 17, step 3 of ring)".
"""

from __future__ import annotations

from typing import Any

from ..algorithms.fingerprint import differences
from ..errors import CollectiveMismatch, PeerFailed
from ..transport.tags import SEQ_BITS, call_of_tag_base


def _number(ex: Any) -> int | None:
    """The call's number on its communicator, from whatever tag the execution keeps."""
    seq = getattr(ex, "seq", None)
    if isinstance(seq, int):
        return seq
    base = getattr(ex, "tag_base", None)
    if not isinstance(base, int):
        tag = getattr(ex, "tag", None) or (getattr(ex, "phase_tag", None), SEQ_BITS)
        if not isinstance(tag, tuple) or not isinstance(tag[0], int):
            return None
        base = tag[0] << SEQ_BITS
    return call_of_tag_base(base)[1]


def locate_failure(exc: BaseException, ex: Any) -> None:
    """Name in ``exc``, if it is a `PeerFailed` that does not say yet, the call ``ex`` ran (in
    a `CollectiveMismatch` that could not say it, the fields in which the calls differ)."""
    info = getattr(ex, "info", None)
    if isinstance(exc, CollectiveMismatch) and exc.theirs is not None and info is not None:
        exc.args = (f"{exc} ({differences(info.fingerprint, exc.theirs)})",)
        exc.theirs = None
    if not isinstance(exc, PeerFailed) or exc.call is not None:
        return
    if info is not None:
        pending = getattr(ex, "pending", None)
        if pending:
            step = f"step {pending[0][1]} of {info.algorithm}"
        elif getattr(ex, "main", 1) is None:
            step = f"agreeing on the call before {info.algorithm}"
        else:
            step = f"through {info.algorithm}"
        exc.locate(info.collective, _number(ex), step)
        return
    what = getattr(ex, "what", None) or getattr(getattr(ex, "role", None), "what", None)
    if isinstance(what, str):
        exc.locate_native(what, _number(ex))
    elif getattr(ex, "spec", None) is not None:
        exc.locate(ex.spec.collective, _number(ex))
