"""The MPI channel's matching of waiting receives (`MpiChannel.drain`) against a scripted link
(no MPI needed): a message that arrives between one waiting receive's probe and a later
one's goes to the earliest posted receive it fits, as MPI's order says."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from collops.mpi.p2p import HEADER_BYTES, Probed, pack_header
from collops.runtime.matching import ANY_SOURCE, ANY_TAG
from collops.runtime.p2p_mpi import MpiChannel, MpiRecvOp

ANY = -1  # the scripted link's wildcards


class ScriptedLink:
    """A link whose queue of messages grows as the script says: before the ``n``-th probe,
    the messages ``arrivals[n]`` arrive (in order, as MPI would deliver them)."""

    any_source = any_tag = ANY
    tag_ub = 1 << 20

    def __init__(self, arrivals: dict[int, list[tuple[int, int, float]]]) -> None:
        self.arrivals, self.queue, self.probes = arrivals, [], 0

    def improbe(self, source: int, tag: int) -> Probed | None:
        self.queue += self.arrivals.get(self.probes, [])
        self.probes += 1
        for i, (s, t, value) in enumerate(self.queue):
            if source in (ANY, s) and tag in (ANY, t):
                del self.queue[i]
                payload = np.full(2, value)
                probed = Probed(None, s, t, HEADER_BYTES + payload.nbytes)
                header = pack_header(0, "<f8", payload.shape, payload.nbytes, "send", s)
                probed.inline = header + payload.tobytes()
                probed.head = (0, "<f8", payload.shape, payload.nbytes)
                return probed
        return None


def _channel(link: ScriptedLink) -> MpiChannel:
    return MpiChannel(SimpleNamespace(), link, [0, 1, 2], 1, 0)  # type: ignore[arg-type]


def _receive(channel: MpiChannel, source: int, tag: int) -> MpiRecvOp:
    op = MpiRecvOp(channel, "irecv", source, tag, None, None)
    channel.waiting.append(op)
    return op


def _value(op: MpiRecvOp) -> Any:
    assert op.done and op.result is not None
    data, status = op.result
    return float(data[0]), status.source, status.tag


def test_a_message_arriving_mid_drain_goes_to_the_earliest_receive_it_fits():
    # the first receive's probe finds nothing; message 1 arrives before the second's probe
    link = ScriptedLink({1: [(0, 9, 1.0)], 3: [(0, 9, 2.0)]})
    channel = _channel(link)
    first, second = _receive(channel, 0, 9), _receive(channel, 0, 9)
    channel.drain()  # probes: first (none), second (1: the first's), second again (none)
    assert _value(first) == (1.0, 0, 9)
    assert not second.done and channel.waiting == [second]
    channel.drain()  # message 2 arrives
    assert _value(second) == (2.0, 0, 9)
    assert channel.waiting == []


@pytest.mark.parametrize("wildcard", ["source", "tag", "both"])
def test_a_wildcard_receive_posted_first_takes_the_message_first(wildcard):
    source = ANY_SOURCE if wildcard in ("source", "both") else 2
    tag = ANY_TAG if wildcard in ("tag", "both") else 4
    link = ScriptedLink({1: [(2, 4, 7.0)]})
    channel = _channel(link)
    early, later = _receive(channel, source, tag), _receive(channel, 2, 4)
    channel.drain()
    assert _value(early) == (7.0, 2, 4)
    assert channel.waiting == [later] and not later.done


def test_a_message_an_earlier_receive_does_not_fit_goes_to_the_later():
    link = ScriptedLink({1: [(2, 5, 3.0)]})
    channel = _channel(link)
    early, later = _receive(channel, 0, 9), _receive(channel, ANY_SOURCE, ANY_TAG)
    channel.drain()
    assert _value(later) == (3.0, 2, 5)
    assert channel.waiting == [early] and not early.done


def test_receives_after_the_one_that_took_a_message_are_probed_in_the_same_drain():
    # message 1 arrives before the second probe and goes to the first receive; the second
    # is probed again and takes message 2, the third takes nothing
    link = ScriptedLink({1: [(0, 9, 1.0), (0, 9, 2.0)]})
    channel = _channel(link)
    ops = [_receive(channel, 0, 9) for _ in range(3)]
    channel.drain()
    assert [_value(op)[0] for op in ops[:2]] == [1.0, 2.0]
    assert channel.waiting == [ops[2]]
