"""`Matcher` against MPI's matching rules, checked as properties of random sequences of
posted receives and arriving messages (no transport involved)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from collops.runtime.matching import ANY_SOURCE, ANY_TAG, Envelope, Matcher, Posted, fits

SOURCES, TAGS = 3, 3

_event = st.one_of(
    st.tuples(st.just("post"), st.sampled_from([ANY_SOURCE, *range(SOURCES)]),
              st.sampled_from([ANY_TAG, *range(TAGS)])),
    st.tuples(st.just("arrive"), st.integers(0, SOURCES - 1), st.integers(0, TAGS - 1)),
    st.tuples(st.just("cancel"), st.integers(0, 50), st.just(0)),
)


def _run(events):
    """Feed ``events`` to a Matcher; return the receives, the messages and the pairs matched
    (receive index, message index) in the order they matched."""
    matcher = Matcher()
    receives: list[Posted] = []
    messages: list[Envelope] = []
    pairs: list[tuple[int, int]] = []
    cancelled: set[int] = set()
    sent = [0] * SOURCES
    for kind, a, b in events:
        if kind == "post":
            posted = Posted(a, b, len(receives))
            receives.append(posted)
            got = matcher.post(posted)
            if got is not None:
                pairs.append((posted.owner, messages.index(got)))
        elif kind == "arrive":
            envelope = Envelope(a, b, sent[a], 0)
            sent[a] += 1
            messages.append(envelope)
            posted = matcher.arrive(envelope)
            if posted is not None:
                pairs.append((posted.owner, len(messages) - 1))
        elif receives:
            victim = receives[a % len(receives)]
            if matcher.cancel(victim):
                cancelled.add(victim.owner)
    return matcher, receives, messages, pairs, cancelled


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=60))
def test_matching_follows_mpis_rules(events):
    matcher, receives, messages, pairs, cancelled = _run(events)
    taken = {m: r for r, m in pairs}
    by_receive = {r: m for r, m in pairs}
    # every pair fits, and nothing is matched twice or after its cancel
    assert len(taken) == len(pairs) == len(by_receive)
    assert all(fits(receives[r].source, receives[r].tag, messages[m]) for r, m in pairs)
    assert not cancelled & by_receive.keys()
    # nothing waits that could match: no posted receive fits an unexpected message
    assert all(not fits(p.source, p.tag, e) for p in matcher.posted for e in matcher.unexpected)
    # the queues hold exactly what is unmatched (less the cancelled)
    assert {p.owner for p in matcher.posted} == set(range(len(receives))) - by_receive.keys() \
        - cancelled
    assert [messages.index(e) for e in matcher.unexpected] == \
        [m for m in range(len(messages)) if m not in taken]
    # non-overtaking: if a receive took message j, no earlier message i from the same source
    # that it also fits was left for a receive posted later (or left unmatched)
    for r, j in pairs:
        for i in range(j):
            if (messages[i].source == messages[j].source
                    and fits(receives[r].source, receives[r].tag, messages[i])):
                assert i in taken and taken[i] < r, (r, i, j)


@settings(max_examples=200, deadline=None)
@given(st.lists(_event, max_size=60))
def test_posted_receives_take_messages_in_post_order(events):
    # among receives that fit the same messages, the earlier posted matches first
    _, receives, messages, pairs, _ = _run(events)
    matched_at = {r: k for k, (r, _) in enumerate(pairs)}
    for r1, m1 in pairs:
        for r2, m2 in pairs:
            same = (receives[r1].source, receives[r1].tag) == (receives[r2].source,
                                                                receives[r2].tag)
            if same and r1 < r2:
                assert matched_at[r1] < matched_at[r2] or m1 < m2
