"""Hot spots over time for the event-driven models: the bytes every link carries per window.

The congestion model has rounds; the flow and packet models run in continuous time, so their
hot spots are told per *time window*: the run is cut into windows of equal width, and every
window reports the link that carried the most bytes in it, and how many. The result is a
`RoundStats` whose rows are windows (``phase`` = window index, ``slot`` = 0, ``messages`` =
flows started or packet hops begun in it, ``time_s`` = its width), so the tables and the
``hotspots`` plot draw it against simulated time like the congestion model's timed rounds.

The packet models log every hop (start, link, bytes) and bin them at the end, a packet's
bytes in the window where it starts crossing the link. The flow model does not know its end
in advance: `LinkTimeline` adds each interval's per-link rates × duration into windows that
start narrow and double in width (merging pairs) whenever the run outgrows them, so memory
stays at most twice ``WINDOWS`` rows of links.
"""

from __future__ import annotations

import numpy as np

from .congestion import RoundStats

#: windows a run is cut into (the flow model keeps between this many and twice as many)
WINDOWS = 64


def window_stats(rows: np.ndarray, counts: np.ndarray, width: float, end: float) -> RoundStats:
    """`RoundStats` of per-window link bytes ``rows`` (windows × links) up to ``end``."""
    used = max(1, min(len(rows), int(np.ceil(end / width - 1e-9)) if width > 0 else 1))
    rows, counts = rows[:used], counts[:used]
    durations = np.full(used, width)
    durations[-1] = max(0.0, end - width * (used - 1))
    hot = np.argmax(rows, axis=1) if rows.shape[1] else np.zeros(used, dtype=np.int64)
    index = np.arange(used, dtype=np.int64)
    load = rows[index, hot] if rows.shape[1] else np.zeros(used)
    return RoundStats(phase=index, slot=np.zeros(used, dtype=np.int64),
                      messages=counts.astype(np.int64), hot_link=hot.astype(np.int64),
                      hot_load_bytes=load, time_s=durations,
                      mean_load_bytes=rows.mean(axis=1) if rows.shape[1] else np.zeros(used))


def hops_to_windows(hop_log: list[tuple[float, int, int]], num_links: int, end: float,
                    windows: int = WINDOWS) -> RoundStats:
    """Per-window hot spots of a packet model's hop log ``(start, link, bytes)``."""
    if not hop_log or end <= 0:
        return window_stats(np.zeros((1, num_links)), np.zeros(1), max(end, 0.0), end)
    log = np.asarray(hop_log, dtype=np.float64)
    width = end / windows
    window = np.minimum((log[:, 0] / width).astype(np.int64), windows - 1)
    link = log[:, 1].astype(np.int64)
    rows = np.bincount(window * num_links + link, weights=log[:, 2],
                       minlength=windows * num_links).reshape(windows, num_links)
    return window_stats(rows, np.bincount(window, minlength=windows), width, end)


class LinkTimeline:
    """Bytes per link per time window, for a run whose end is not known in advance."""

    def __init__(self, num_links: int, windows: int = WINDOWS, width: float = 1e-7) -> None:
        self.windows = int(windows)
        self.width = float(width)
        self.rows = np.zeros((2 * self.windows, int(num_links)))
        self.counts = np.zeros(2 * self.windows)

    def _fit(self, time: float) -> None:
        """Double the window width until ``time`` falls inside the rows."""
        while time >= self.width * len(self.rows):
            half = len(self.rows) // 2
            self.rows[:half] = self.rows[0::2] + self.rows[1::2]
            self.rows[half:] = 0.0
            self.counts[:half] = self.counts[0::2] + self.counts[1::2]
            self.counts[half:] = 0.0
            self.width *= 2

    def started(self, time: float) -> None:
        """Count one flow starting at ``time``."""
        self._fit(time)
        self.counts[int(time / self.width)] += 1

    def add(self, start: float, end: float, link_rate: np.ndarray) -> None:
        """Links carried ``link_rate`` bytes/s each from ``start`` to ``end``."""
        if end <= start:
            return
        self._fit(end)
        first, last = int(start / self.width), min(int(end / self.width), len(self.rows) - 1)
        for window in range(first, last + 1):
            lo = max(start, window * self.width)
            hi = min(end, (window + 1) * self.width)
            if hi > lo:
                self.rows[window] += link_rate * (hi - lo)

    def stats(self, end: float) -> RoundStats:
        """The windows up to ``end`` as `RoundStats`."""
        self._fit(end)
        return window_stats(self.rows, self.counts, self.width, end)
