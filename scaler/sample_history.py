"""A queue's recent snapshots and its longer arrival history: what a sampler keeps.

Pure: the sampler (and the simulator) append what they read, with the rate window and the sample
interval in force; readers get an immutable view, the same tuple until the next append.
"""

from __future__ import annotations

import collections

from brokers.base import QueueSnapshot
from scaler.arrival_history import ArrivalHistory

#: how long an arrival history waits for the broker's totals to count the jobs the queue
#: holds (two of RabbitMQ's 5 s statistics intervals) before it begins anyway: after a node
#: restart they start again from 0 beside a backlog, and never will
LAGGING_TOTALS_WAIT = 10.0


class SampleHistory:
    """Snapshots oldest first, trimmed to the rate window and two sample intervals more (at most
    ``max_samples``), and the arrival history their counters feed."""

    def __init__(self, max_samples: int | None = None) -> None:
        if max_samples is not None and max_samples < 2:
            raise ValueError(f"max_history must be at least 2 snapshots, not {max_samples}")
        self._samples: collections.deque[QueueSnapshot] = collections.deque(maxlen=max_samples)
        #: the longer history of arrivals that estimates ages where jobs carry no timestamp
        self.arrivals = ArrivalHistory()
        self._view: tuple[QueueSnapshot, ...] | None = ()
        #: since when the totals have lagged the jobs held, before the arrival history began
        self._lagging_since: float | None = None

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def view(self) -> tuple[QueueSnapshot, ...]:
        """The snapshots, oldest first: built once per append, shared by every reader."""
        if self._view is None:
            self._view = tuple(self._samples)
        return self._view

    def append(self, snapshot: QueueSnapshot, *, window: float, interval: float) -> None:
        """Add the newest snapshot; keep what the rates over ``window`` need, and two sample
        intervals more, so the window is covered from one sample before its start."""
        samples = self._samples
        samples.append(snapshot)
        keep_from = snapshot.observed_at - window - 2 * interval
        while len(samples) > 2 and samples[1].observed_at <= keep_from:
            samples.popleft()
        if snapshot.arrivals_total is not None and not self._waits_for_totals(snapshot):
            self.arrivals.add(snapshot.counted_at, snapshot.arrivals_total)
        self._view = None

    def _waits_for_totals(self, snapshot: QueueSnapshot) -> bool:
        """Whether the arrival history is still to begin, and waits (``LAGGING_TOTALS_WAIT`` at
        most) for totals that count the jobs the queue holds (:func:`_lags`)."""
        if self.arrivals or not _lags(snapshot):
            return False
        if self._lagging_since is None:
            self._lagging_since = snapshot.observed_at
        return snapshot.observed_at - self._lagging_since < LAGGING_TOTALS_WAIT


def _lags(snapshot: QueueSnapshot) -> bool:
    """Whether the broker's own totals (counted since the queue began, apart from the depth:
    RabbitMQ's statistics) have not yet counted the jobs the queue holds: fewer arrived than
    are done, waiting and in flight. A new queue's statistics catch up with its first
    publishes a few seconds late; an arrival history begun there would place those jobs
    after its start, and their age would pass for an estimate where it is a lower bound.
    (Only differences of totals mean anything elsewhere; RabbitMQ's count from the queue's
    start, or from 0 again after a node restart, which the wait bounds.)"""
    arrived, done = snapshot.arrivals_total, snapshot.completions_total
    if snapshot.counts_observed_at is None or arrived is None or done is None:
        return False
    held = (snapshot.depth or 0) + (snapshot.in_flight or 0)
    return arrived - done < held
