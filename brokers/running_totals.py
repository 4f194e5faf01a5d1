"""Running totals of arrivals and completions for an adapter that counts each interval two ways:
by the list marker (the totals in the list's snapshot, ``brokers.redis_queues``) and by its
workers' own counters, read with the list (RQ's ``successful_job_count`` and
``failed_job_count``, Resque's ``stat:processed:<id>``).

Each interval's counts are the workers' where they can tell, except where the marker is exact and
counts more arrivals: a worker that came and went between two samples is never seen, and the
marker's counts stand. Otherwise, and for the intervals before the marker's first totals, the
marker's (none: the totals start at the first sample with them).
"""

from __future__ import annotations

from dataclasses import replace

from brokers.base import QueueSnapshot

#: the arrivals and jobs ended in one interval by the workers' counters, and whether both are exact
Counted = tuple[int, int, bool]


class RunningTotals:
    """The totals an adapter reports, kept over its samples."""

    def __init__(self) -> None:
        self._arrivals = self._completions = 0
        #: the list marker's totals at the last sample
        self._marker: tuple[int, int] | None = None

    def add(self, snapshot: QueueSnapshot, counted: Counted | None, source: str) -> QueueSnapshot:
        """``snapshot``, the list's, with the totals after its interval: the workers' ``counted``
        (None where they cannot tell), labelled ``source``, or the marker's counts and label."""
        marker = self._marker
        if snapshot.arrivals_total is not None and snapshot.completions_total is not None:
            self._marker = (snapshot.arrivals_total, snapshot.completions_total)
        exact, label = snapshot.counts_exact, snapshot.counts_source
        if marker is not None and self._marker is not None:
            arrived = self._marker[0] - marker[0]
            done = self._marker[1] - marker[1]
            if counted is not None and not (snapshot.counts_exact and arrived > counted[0]):
                (arrived, done, exact), label = counted, source
            self._arrivals += arrived
            self._completions += done
        return replace(
            snapshot,
            arrivals_total=self._arrivals,
            completions_total=self._completions,
            counts_exact=exact,
            counts_source=label,
        )
