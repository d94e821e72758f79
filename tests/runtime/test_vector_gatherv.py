"""gatherv with counts given on every rank, at the root only, or nowhere, against numpy, on
threads and on ``shm`` (through the direct slots' headers, `collops.shm.direct_gatherv`,
compiled and ``COLLOPS_COMPILED=0``), 2 to 4 ranks: zero counts, displacements with gaps, an
``out`` whose gaps keep what they held, blocks beyond a slot, non-blocking calls, and counts
that disagree with the blocks (`CollectiveMismatch` on every rank that can tell, no hang)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import collops

pytestmark = pytest.mark.timeout(240)

REPEATS = 3  # the first call prepares, the second binds, the third runs bound
WIDTH = 2  # elements per row
FORMS = ("every rank", "root only", "none")


def _rows(p: int, big: int = 0) -> list[int]:
    """Rows per rank: one rank with none, and ``big`` rows on the last rank when given."""
    rows = [[2, 0, 3, 1][j % 4] for j in range(p)]
    if big:
        rows[-1] = big
    return rows


def _block(j: int, rows: int) -> np.ndarray:
    return (np.arange(rows * WIDTH, dtype=np.float64) + 1000.0 * j).reshape(rows, WIDTH)


def _placed(rows: list[int], displs: list[int] | None, fill: float = 0.0) -> np.ndarray:
    """numpy's result: every rank's block at its displacement, ``fill`` between them."""
    at = displs or [sum(rows[:j]) for j in range(len(rows))]
    span = max((d + c for d, c in zip(at, rows, strict=True) if c), default=0)
    want = np.full((span, WIDTH), fill)
    for j, (d, c) in enumerate(zip(at, rows, strict=True)):
        want[d: d + c] = _block(j, c)
    return want


def _counts(form: str, rank: int, root: int, rows: list[int]) -> list[int] | None:
    if form == "every rank" or (form == "root only" and rank == root):
        return rows
    return None


def _forms(comm: collops.Comm, big: int = 0) -> list[str]:
    """Every call form, back to back and with gaps, blocking and not; what ran them."""
    p, r = comm.size, comm.rank
    rows = _rows(p, big)
    gaps, at = [0] * p, 1
    for j in reversed(range(p)):  # the blocks in reverse rank order, gaps between them
        gaps[j], at = at, at + rows[j] + 3
    took = set()
    for root in (0, p - 1):
        for form in FORMS:
            for displs in (None, gaps):
                for _ in range(REPEATS):
                    counts = _counts(form, r, root, rows)
                    got = comm.gatherv(_block(r, rows[r]), root, counts,
                                       displs=displs if r == root else None)
                    took.add(comm.last_algorithm)
                    if r == root:
                        np.testing.assert_array_equal(got, _placed(rows, displs))
                    else:
                        assert got is None
            req = comm.igatherv(_block(r, rows[r]), root, _counts(form, r, root, rows))
            got = req.wait()
            if r == root:
                np.testing.assert_array_equal(got, _placed(rows, None))
    return sorted(took)


@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_form_on_threads(p):
    took = collops.spawn(_forms, p)
    assert all("shm_direct" not in t for t in took), took


@pytest.mark.parametrize("compiled", ["1", "0"])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_form_through_the_headers(monkeypatch, compiled, p):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    took = collops.spawn(_forms, p, transport="shm", timeout=200)
    assert all(t == ["shm_direct"] for t in took), took


def _large(comm: collops.Comm, big: int) -> dict[str, list[str]]:
    """Every call form with the last rank's block beyond a slot, blocking (prepared, bound)
    and not, back to back and with gaps: what ran each form."""
    p, r = comm.size, comm.rank
    rows = _rows(p, big)
    gaps = [sum(rows[j + 1:]) + 3 * (p - j) for j in range(p)]  # reverse order, gaps
    took: dict[str, set[str]] = {form: set() for form in FORMS}
    for root in (0, p - 1):
        for form in FORMS:
            counts = _counts(form, r, root, rows)
            for displs in (None, gaps):
                for _ in range(REPEATS):
                    got = comm.gatherv(_block(r, rows[r]), root, counts,
                                       displs=displs if r == root else None)
                    took[form].add(comm.last_algorithm)
                    if r == root:
                        np.testing.assert_array_equal(got, _placed(rows, displs))
                    else:
                        assert got is None
                got = comm.igatherv(_block(r, rows[r]), root, counts,
                                    displs=displs if r == root else None).wait()
                if r == root:
                    np.testing.assert_array_equal(got, _placed(rows, displs))
    return {form: sorted(t) for form, t in took.items()}


@pytest.mark.parametrize(("compiled", "p"), [("1", 2), ("1", 3), ("0", 4)])
def test_blocks_beyond_a_slot(monkeypatch, compiled, p):
    """The last rank's block is larger than a 64 KiB slot: a root given counts has every
    block streamed (the selection's choice for them); one given none reads it out of the
    writer's memory."""
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    took = collops.spawn(_large, p, 6000, transport="shm", timeout=200)
    for t in took:
        assert "shm_stream" in t["every rank"] and "shm_stream" in t["root only"], took
        assert t["none"] == ["shm_direct"], took


def _out_keeps_gaps(comm: collops.Comm) -> bool:
    p, r = comm.size, comm.rank
    rows = _rows(p)
    displs = [sum(rows[:j]) + 2 * j for j in range(p)]
    want = _placed(rows, displs, fill=-1.0)
    out = np.full_like(want, -1.0) if r == 0 else None
    for form in FORMS:
        out = np.full_like(want, -1.0) if r == 0 else None
        got = comm.gatherv(_block(r, rows[r]), 0, _counts(form, r, 0, rows),
                           displs=displs if r == 0 else None, out=out)
        if r == 0:
            assert got is out or np.shares_memory(got, out)
            np.testing.assert_array_equal(out, want)
    return True


@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_out_keeps_what_the_gaps_held(transport):
    assert all(collops.spawn(_out_keeps_gaps, 3, transport=transport, timeout=120))


def _mismatched(comm: collops.Comm, form: str, big: int = 0) -> tuple[str | None, bool]:
    """Root 0 expects one row more from rank 1 than rank 1 gives; then a call that works."""
    p, r = comm.size, comm.rank
    rows = _rows(p, big)
    wrong = list(rows)
    wrong[1] += 1
    counts = wrong if r == 0 else (rows if form == "every rank" else None)
    try:
        comm.gatherv(_block(r, rows[r]), 0, counts, timeout=30)
        error = None
    except collops.CollopsError as exc:
        error = type(exc).__name__
    after = comm.allgather(np.array([r]), timeout=30)
    return error, after.tolist() == list(range(p))


@pytest.mark.parametrize("form", ["every rank", "root only"])
@pytest.mark.parametrize("transport", ["inproc", "shm"])
def test_counts_that_disagree_raise_where_they_can_be_told(transport, form):
    got = collops.spawn(_mismatched, 3, form, transport=transport, timeout=120)
    assert all(ok for _, ok in got), got
    assert got[0][0] == "CollectiveMismatch", got  # the root sees the block's length
    if transport == "shm":  # rank 1 sees the root's header expect another length
        assert got[1][0] == "CollectiveMismatch", got


@pytest.mark.parametrize("form", ["every rank", "root only"])
def test_counts_that_disagree_about_streamed_blocks(form):
    """As above with the last rank's block beyond a slot (the root streams the blocks): the
    root and rank 1 raise, and the last rank, whose block agrees, is not left waiting."""
    started = time.monotonic()
    got = collops.spawn(_mismatched, 3, form, 6000, transport="shm", timeout=120)
    assert all(ok for _, ok in got), got
    assert got[0][0] == "CollectiveMismatch" and got[1][0] == "CollectiveMismatch", got
    assert got[2][0] in (None, "CollectiveMismatch", "PeerFailed"), got
    assert time.monotonic() - started < 25, got  # well before the calls' 30 s timeout


@pytest.mark.parametrize("p", [2, 3, 4, 5, 16, 64])
def test_a_block_of_a_whole_slot_fits_with_its_header(p):
    """A non-root's block of ``direct_bytes`` (64 KiB, the bench's largest small size) goes
    into its slot after a header of ``1 + 3p`` words at any number of ranks."""
    from collops.shm.direct_gatherv import layout_for, own_spec
    from collops.shm.segment import Layout

    lay = Layout(size=p)
    spec = own_spec(p, np.dtype(np.float64), 0, lay.direct_bytes // 8)
    assert not layout_for(spec, 1, lay.direct_slot_bytes).overflows


def _whole_slots(comm: collops.Comm) -> bool:
    rows = 64 * 1024 // (8 * WIDTH)
    for counts in ([rows] * comm.size, None):
        got = comm.gatherv(_block(comm.rank, rows), 0, counts if comm.rank == 0 else None)
        if comm.rank == 0:
            np.testing.assert_array_equal(got, _placed([rows] * comm.size, None))
    return comm.last_algorithm == "shm_direct"


def test_blocks_of_a_whole_slot_at_four_ranks():
    assert all(collops.spawn(_whole_slots, 4, transport="shm", timeout=120))


def _members_only(comm: collops.Comm) -> tuple[str | None, bool]:
    """Counts on the members but none at the root (no form MPI or collops offers), with a
    block beyond a slot: every rank raises, none waits for its timeout; then a call that
    works."""
    p, r = comm.size, comm.rank
    rows = _rows(p, 6000)
    try:
        comm.gatherv(_block(r, rows[r]), 0, None if r == 0 else rows, timeout=30)
        error = None
    except collops.CollopsError as exc:
        error = type(exc).__name__
    after = comm.allgather(np.array([r]), timeout=30)
    return error, after.tolist() == list(range(p))


def test_counts_on_the_members_only_raise():
    started = time.monotonic()
    got = collops.spawn(_members_only, 3, transport="shm", timeout=120)
    assert all(ok for _, ok in got), got
    assert all(error in ("CollectiveMismatch", "PeerFailed") for error, _ in got), got
    assert time.monotonic() - started < 25, got


def _non_root_runs_compiled(comm: collops.Comm, calls: int) -> int:
    """Python executions of gatherv a non-root began over ``calls`` calls to a root given no
    counts, after the first few (which prepare and bind); each non-root comes late, so the
    root's header is there and the slots are free (nothing else hands a call to Python)."""
    from collops.shm import direct_gatherv

    x = np.full(1, float(comm.rank))

    def late() -> None:
        if comm.rank:
            time.sleep(0.02)

    for _ in range(REPEATS):
        late()
        comm.gatherv(x, 0, None)
    began = 0
    init = direct_gatherv.GathervExecution.__init__

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal began
        began += 1
        init(self, *args, **kwargs)

    direct_gatherv.GathervExecution.__init__ = counted  # type: ignore[method-assign]
    try:
        for _ in range(calls):
            late()
            got = comm.gatherv(x, 0, None)
            if comm.rank == 0:
                np.testing.assert_array_equal(got, np.arange(comm.size, dtype=np.float64))
    finally:
        direct_gatherv.GathervExecution.__init__ = init  # type: ignore[method-assign]
    return began


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
def test_a_non_root_stays_compiled_when_its_root_learns_the_counts():
    # the root's header says it takes any length (`ANY_LENGTH`); the compiled reader of a
    # non-root accepts that flag
    # (before, every such call fell back to the Python protocol: 20 of 20). A call whose root
    # is descheduled past the runner's spin also goes on in Python, so a loaded machine may
    # show a few
    began = collops.spawn(_non_root_runs_compiled, 2, 20, transport="shm", timeout=120)
    assert began[1] < 10, began


def test_the_compiled_reader_knows_the_any_length_flag():
    from collops.shm import direct, direct_alltoallv

    if direct._direct is None:
        pytest.skip("collops' C runners were not built here")
    assert direct._direct.ANY_LENGTH == direct_alltoallv.ANY_LENGTH


def _changing_rows(comm: collops.Comm, seed: int) -> list[str]:
    """A root given no counts, the members' rows changing from call to call (each rank
    draws every rank's rows from one seed, as numpy's reference does): the root's guess of
    the last call's rows holds for runs of calls and misses between them, the root's own
    rows included; results with and without ``out``. What ran each call."""
    p, r = comm.size, comm.rank
    rng = np.random.default_rng(seed)
    took = []
    for i in range(24):
        if i % 4 == 0:  # a new set of rows every fourth call (a zero among them)
            rows = [int(v) for v in rng.integers(0, 5, p)]
        x = _block(r, rows[r])
        want = _placed(rows, None)
        out = np.full_like(want, -7.0) if r == 0 and i % 3 == 2 else None
        got = comm.gatherv(x, 0, None, out=out)
        took.append(comm.last_algorithm)
        if r == 0:
            np.testing.assert_array_equal(got, want)
            if out is not None:  # filled (the general path returns a view of it)
                np.testing.assert_array_equal(out, want)
                assert got.size == 0 or np.shares_memory(got, out)
        else:
            assert got is None
    return took


@pytest.mark.parametrize(("transport", "compiled"),
                         [("inproc", "1"), ("shm", "1"), ("shm", "0")])
@pytest.mark.parametrize("p", [2, 3])
def test_a_root_given_no_counts_as_the_rows_change(monkeypatch, transport, compiled, p):
    monkeypatch.setenv("COLLOPS_COMPILED", compiled)
    took = collops.spawn(_changing_rows, p, 11 + p, transport=transport, timeout=150)
    if transport == "shm":
        assert set(took[0]) == {"shm_direct"}, took


def _guess_route(comm: collops.Comm) -> list[int]:
    """Python executions the root began over 12 calls whose rows stay the same, then 12
    whose rows change every call (the root comes late, its members' blocks there: nothing
    else hands a call over)."""
    from collops.shm import direct_gatherv

    began = [0]
    init = direct_gatherv.GathervExecution.__init__

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        began[0] += 1
        init(self, *args, **kwargs)

    counts = []
    for changing in (False, True):
        for i in range(REPEATS + 12):
            if i == REPEATS:
                began[0] = 0
                direct_gatherv.GathervExecution.__init__ = counted  # type: ignore[method-assign]
            if comm.rank == 0:
                time.sleep(0.02)
            rows = 1 + (i % 3 if changing else 0)
            got = comm.gatherv(_block(comm.rank, rows), 0, None)
            if comm.rank == 0:
                np.testing.assert_array_equal(got, _placed([rows] * comm.size, None))
        direct_gatherv.GathervExecution.__init__ = init  # type: ignore[method-assign]
        counts.append(began[0])
    return counts


@pytest.mark.usefixtures("compiled_on")  # a test of the compiled route
def test_a_root_given_no_counts_runs_compiled_while_its_guess_holds():
    # the root expects the rows of its last call: the same rows every call run compiled;
    # rows that change every call (the root's own too) hand each call to the Python protocol
    # (the root's own rows differ: it has no guess and takes the general path)
    steady, changing = collops.spawn(_guess_route, 2, transport="shm", timeout=120)[0]
    assert steady < 6, steady
    assert changing == 12, changing


def test_every_ranks_gatherv_spec_chooses_from_the_same_part():
    # what a rank's spec holds beyond the call (its block, its counts, a root's guess) never
    # enters the choice, so every rank chooses the same algorithm
    from collops.algorithms.selection import rank_independent
    from collops.shm.direct_gatherv import own_spec

    dt = np.dtype(np.float64)
    specs = [own_spec(3, dt, 0, 2, (2, 1, 0), None, False, True),  # a root's guess
             own_spec(3, dt, 0, 2, (2, 1, 0), (0, 3, 5)),  # a root given counts, displs
             own_spec(3, dt, 0, 2),  # a root given none
             own_spec(3, dt, 0, 1), own_spec(3, dt, 0, 0)]  # members
    assert len({rank_independent(s) for s in specs}) == 1
