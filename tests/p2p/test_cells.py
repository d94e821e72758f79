"""The cell rings of point-to-point messages over shared memory (`collops.shm.cells`): a ring
wraps around, a full ring holds its sender back until the receiver drains it, small and
large messages of one pair keep their order, a receiver that dies while its sender waits for
room is named, and nothing stays behind in /dev/shm."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

import collops
from collops import ANY_TAG, PeerFailed, RankFailed, config
from collops.shm import segment as seg

pytestmark = pytest.mark.timeout(180)

CELLS = seg.Layout.for_ranks(2).p2p_cells


@pytest.fixture(autouse=True)
def _cells_on(monkeypatch):
    monkeypatch.delenv("COLLOPS_SHM_P2P_CELLS", raising=False)
    config.reload_settings()
    yield
    monkeypatch.undo()
    config.reload_settings()


def _spawn(fn, p=2, *args):
    return collops.spawn(fn, p, *args, transport="shm", timeout=120)


def _collops_files():
    return {name for name in os.listdir("/dev/shm") if "collops" in name}


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
def test_the_cells_are_in_use_over_shm():
    def body(comm):
        return comm.transport.point_to_point_cells() is not None

    assert _spawn(body) == [True, True]


def test_a_ring_wraps_around_many_times_with_every_message_intact():
    count = 5 * CELLS + 3

    def body(comm):
        if comm.rank == 0:
            for i in range(count):
                comm.send(np.arange(i % 97, dtype=np.float64) + i, 1, tag=i % 5)
            return None
        got = []
        for i in range(count):
            out = np.empty(96)
            data, status = comm.recv(out, source=0, tag=ANY_TAG)
            n = status.count
            got.append(n == i % 97 and status.tag == i % 5
                       and np.array_equal(data[:n], np.arange(n, dtype=np.float64) + i))
        return got

    assert _spawn(body)[1] == [True] * count


def test_a_full_ring_holds_the_sender_until_the_receiver_drains_it(tmp_path):
    times = tmp_path / "times.json"

    def body(comm):
        if comm.rank == 0:
            for i in range(CELLS):  # fills the ring: each send completes at once
                comm.send(np.array([i]), 1)
            comm.send(np.array([CELLS]), 1)  # waits for room
            return time.monotonic()
        time.sleep(0.5)
        start = time.monotonic()
        values = [int(comm.recv(source=0)[0][0]) for _ in range(CELLS + 1)]
        times.write_text(json.dumps(start))
        return values

    sent_at, values = _spawn(body)
    assert values == list(range(CELLS + 1))
    assert sent_at >= json.loads(times.read_text())  # the last send returned after draining


def test_an_isend_behind_a_full_ring_completes_once_the_receiver_drains():
    def body(comm):
        if comm.rank == 0:
            requests = [comm.isend(np.full(3, i), 1, tag=i) for i in range(2 * CELLS)]
            first_pending = not requests[-1].test()
            comm.barrier()
            collops.wait_all(requests)
            return first_pending
        comm.barrier()
        return [int(comm.recv(source=0, tag=i)[0][0]) for i in range(2 * CELLS)]

    pending, values = _spawn(body)
    assert pending is True and values == list(range(2 * CELLS))


@pytest.mark.parametrize("sizes", [[8, 300_000, 8, 64, 5_000, 3 << 20, 8, 1_000, 8],
                                   [3 << 20, 8, 8, 200_000, 8]])
def test_small_and_large_messages_of_one_pair_keep_their_order(sizes):
    def body(comm):
        if comm.rank == 0:
            requests = [comm.isend(np.full(n // 8, i, np.int64), 1, tag=7)
                        for i, n in enumerate(sizes)]
            requests.append(comm.isend(np.full(1, -1, np.int64), 1, tag=8))
            collops.wait_all(requests)
            return None
        late = comm.recv(source=0, tag=8)[0]  # the last one first: the others wait, in order
        got = [comm.recv(source=0, tag=ANY_TAG)[0] for _ in sizes]
        return [int(late[0])] + [(a.size, int(a[0]), int(a[-1])) for a in got]

    expected = [-1] + [(n // 8, i, i) for i, n in enumerate(sizes)]
    assert _spawn(body)[1] == expected


def test_blocking_small_sends_and_probes_mix_with_a_large_one_in_order():
    def body(comm):
        if comm.rank == 0:
            comm.send(np.array([1.0]), 1, tag=1)
            request = comm.isend(np.full(1 << 17, 2.0), 1, tag=2)
            comm.send(np.array([3.0]), 1, tag=3)
            request.wait()
            return None
        status = comm.probe(source=0)
        first = comm.recv(np.empty(1), source=0)[0][0]
        big = comm.recv(source=0, tag=ANY_TAG)[0]
        last = comm.recv(np.empty(1), source=0, tag=3)[0][0]
        return status.tag, first, big.size, float(big[-1]), last

    assert _spawn(body)[1] == (1, 1.0, 1 << 17, 2.0, 3.0)


def test_cells_of_two_communicators_on_one_pair_reach_their_own():
    def body(comm):
        other = comm.dup()
        if comm.rank == 0:
            other.send(np.array([1.0]), 1, tag=3)  # first in the ring, for the other one
            comm.send(np.array([2.0]), 1, tag=3)
            other.send(np.array([3.0]), 1, tag=3)
            return None
        first = comm.recv(np.empty(1), source=0, tag=3)[0][0]
        rest = [other.recv(np.empty(1), source=0, tag=3)[0][0] for _ in range(2)]
        return [first, *rest]

    assert _spawn(body)[1] == [2.0, 1.0, 3.0]


def test_a_receiver_that_dies_while_its_sender_waits_for_room_is_named(tmp_path):
    where = tmp_path / "rank0.json"

    def body(comm):
        if comm.rank == 0:
            start = time.monotonic()
            try:
                for i in range(CELLS + 1):
                    comm.send(np.array([i]), 1)
                seen = {"raised": None}
            except PeerFailed as exc:
                seen = {"raised": "PeerFailed", "failed": exc.failed_rank, "text": str(exc)}
            seen["seconds"] = time.monotonic() - start
            where.write_text(json.dumps(seen))
            return None
        time.sleep(0.3)
        os._exit(3)

    before = _collops_files()
    with pytest.raises(RankFailed):
        _spawn(body)
    seen = json.loads(where.read_text())
    assert seen["raised"] == "PeerFailed" and seen["failed"] == 1, seen
    assert seen["seconds"] < 2.3, seen
    assert _collops_files() <= before


def test_nothing_is_left_in_dev_shm():
    before = _collops_files()

    def body(comm):
        peer = 1 - comm.rank
        for i in range(3 * CELLS):
            if comm.rank == 0:
                comm.send(np.array([i]), peer)
            else:
                comm.recv(np.empty(1, np.int64), source=peer)
        return True

    assert _spawn(body) == [True, True]
    assert _collops_files() <= before


# -- chains: a message across consecutive cells, one process, both ends of one ring ----------

RING_CELLS, CELL_BYTES = 8, 256
BODY = CELL_BYTES - 64


def _ring_ends():
    """A sender's and a receiver's end of one ring of `RING_CELLS` cells in a bytearray."""
    from collops.shm import cells

    if not cells.compiled():
        pytest.skip("the compiled cell rings were not built")
    memory = bytearray(2 * seg.LINE + RING_CELLS * CELL_BYTES + 64)
    sleeping = (2 * seg.LINE + RING_CELLS * CELL_BYTES) // 8  # stays 0: nobody sleeps

    def end():
        return cells.CellRing(memory, 2 * seg.LINE, 0, seg.LINE // 8, sleeping, sleeping + 1,
                              RING_CELLS, CELL_BYTES, 0.0, 0.0)

    return memory, end(), end()


def _push(ring, payload, tag=5, seq=0):
    from collops.shm import cells

    prefix = np.array([payload.size], np.int64).tobytes() + b"|u1"
    return ring.push(3, tag, seq, cells.INLINE, cells.token_word("|u1"), 1, prefix, payload)


def _cells_of(nbytes):
    return 1 if nbytes + 16 <= BODY else 1 + -(-(nbytes + 16 - BODY) // BODY)


def test_chains_around_cell_boundaries_wrap_the_ring_and_arrive_whole():
    _, sender, receiver = _ring_ends()
    sizes = [BODY - 17, BODY - 16, BODY - 15, 2 * BODY - 16, 2 * BODY - 15, 3 * BODY + 1,
             RING_CELLS * BODY - 16, 0, 1]
    for i, n in enumerate(sizes * 3):  # every size at several places of the ring
        data = np.random.default_rng(i).integers(0, 256, n, dtype=np.uint8)
        assert _push(sender, data, tag=i)
        if i % 2:
            out = np.full(n + 3, 7, np.uint8)
            got = receiver.take(3, -1, out)
            assert got >= 0 and got & ((1 << 31) - 1) == i and got >> 31 == n
            np.testing.assert_array_equal(out[:n], data)
            assert (out[n:] == 7).all()
        else:
            context, tag, nbytes, form, _seq, _word, body = receiver.head()
            assert (context, tag, nbytes) == (3, i, n)
            assert bool(form & 8) == (_cells_of(n) > 1)  # CHAIN
            assert body[16:] == data.tobytes()
            receiver.consume()
        assert not receiver.ready() and sender.room()


def test_a_chain_waits_for_room_for_all_its_cells_and_never_exceeds_the_ring():
    _, sender, receiver = _ring_ends()
    assert _push(sender, np.zeros(5 * BODY - 16, np.uint8))  # 5 of the 8 cells
    big = np.ones(4 * BODY - 16, np.uint8)  # 4 cells: only 3 are free
    assert not _push(sender, big)
    receiver.consume()
    assert _push(sender, big)
    with pytest.raises(ValueError):
        _push(sender, np.zeros(RING_CELLS * BODY - 15, np.uint8))  # 9 cells


def test_a_chain_not_all_published_is_not_received_and_leaves_the_ring_as_it_was():
    memory, sender, receiver = _ring_ends()
    data = np.arange(3 * BODY - 16, dtype=np.uint8)
    assert _push(sender, data, tag=9)
    last = 2 * seg.LINE + 2 * CELL_BYTES  # the third cell's sequence word
    word = memory[last: last + 8]
    memory[last: last + 8] = bytes(8)  # as if the sender were still writing it
    out = np.zeros(data.size, np.uint8)
    assert receiver.ready() and receiver.head() is None
    assert receiver.take(3, 9, out) == -1 and receiver.wait_take(3, 9, out) == -1
    with pytest.raises(RuntimeError):
        receiver.consume()
    memory[last: last + 8] = word
    got = receiver.take(3, 9, out)
    assert got >> 31 == data.size
    np.testing.assert_array_equal(out, data)


def test_a_chain_that_does_not_fit_the_buffer_is_left_for_the_general_path():
    _, sender, receiver = _ring_ends()
    data = np.arange(2 * BODY, dtype=np.uint8)
    assert _push(sender, data)
    assert receiver.take(3, -1, np.zeros(data.size - 1, np.uint8)) == -2  # truncation
    assert receiver.take(3, 6, np.zeros(data.size, np.uint8)) == -2  # another tag
    assert receiver.head()[2] == data.size
