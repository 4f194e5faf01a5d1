"""A queue's recent snapshots and its longer arrival history: what a sampler keeps.

Pure: the sampler (and the simulator) append what they read, with the rate window and the sample
interval in force; readers get an immutable view, the same tuple until the next append.
"""

from __future__ import annotations

import collections

from brokers.base import QueueSnapshot
from scaler.arrival_history import ArrivalHistory


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
        if snapshot.arrivals_total is not None:
            self.arrivals.add(snapshot.counted_at, snapshot.arrivals_total)
        self._view = None
