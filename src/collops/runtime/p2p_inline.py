"""The point-to-point inline limit: the most payload bytes an envelope sent as a transport
message carries inside it (`p2p_channel`; a larger payload follows as a message of its own),
read from the selection tables (``protocols.p2p.inline_max``) as a communicator's channel is
made."""

from __future__ import annotations

from .. import config
from ..algorithms import tuning
from ..errors import ArgumentError

#: the bounds a table's value must keep
INLINE_BOUNDS = (0, 1 << 20)


def inline_max(ranks: int, rank: int = 0) -> int:
    """The most payload bytes an envelope carries inline in a job of ``ranks`` ranks: the
    selection tables' ``protocols.p2p.inline_max``; `ArgumentError` naming the rule if out of
    bounds."""
    rule = tuning.setting("p2p", "inline_max", None, config.settings.tuning_file, ranks)
    low, high = INLINE_BOUNDS
    value = rule.value
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ArgumentError("point-to-point", "protocols.p2p.inline_max", value,
                            f"{rule.where}: must be a whole number of bytes from {low} to "
                            f"{high}", rank)
    return value
