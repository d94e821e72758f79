"""The whole-mask rounds' rules on one rank (`context_ids.ContextIds`): one agreement at a time
holds the mask, the lowest key among those waiting; the others are offered nothing until it
puts the mask back or leaves; what a round offered is locked against windows meanwhile."""

from __future__ import annotations

from collops.runtime.context_ids import ContextIds

LOW, HIGH = (0, 7), (3, 1)  # (parent id, call number): LOW goes first


def test_the_lowest_waiting_key_holds_the_mask_and_the_others_are_offered_nothing():
    ids = ContextIds()
    assert ids.whole(HIGH) is not None  # alone: it takes the mask
    assert ids.whole(LOW) is None  # held by another, even a higher key
    ids.put_back(HIGH, ids.locked)
    assert ids.whole(HIGH) is None  # free, but a lower key waits
    got = ids.whole(LOW)
    assert got is not None and got == ids.locked and got == ids.free  # every free id
    assert ids.window() == (0, 0)  # locked: a window finds nothing
    ids.put_back(LOW, got)
    ids.leave(LOW)
    assert ids.whole(HIGH) is not None and ids.holder == HIGH


def test_leaving_gives_the_mask_back_and_takes_the_key_out_of_the_queue():
    ids = ContextIds()
    assert ids.whole(LOW) is not None
    ids.leave(LOW)  # an agreement that ended (or failed) mid-round
    assert ids.holder is None and ids.waiting == set()
    ids.unlock(ids.locked)
    assert ids.whole(HIGH) is not None
