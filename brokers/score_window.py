"""Arrivals and completions of a queue kept in a sorted set scored by "ready at" time (arq).

Pure logic; the adapter runs the Redis commands. A job counts for this tracker once it is due,
i.e. once its score is at or before the sample's *cutoff*. Between two samples:

- arrivals = members whose score lies in ``(previous cutoff, cutoff]``: jobs enqueued in the
  interval, and deferred jobs that fell due in it;
- completions = jobs that left the set: ``previous due + arrivals - due``, where *due* is the
  number of members scored at or before the cutoff (waiting and running alike: a running arq
  job stays in the set until it finishes).

The cutoff trails the scaler's clock by :data:`SETTLE_MS`. Producers score jobs with their own
clock and their ``ZADD`` lands a little after they read it; a job whose score is already behind
the cutoff when it lands would never fall inside a window. Settling covers producer clocks up to
that far behind the scaler's, at the price of counts that lag by as much. The cutoff never moves
back, so a scaler clock stepping back only makes an interval empty.

A job that arrived and finished within one interval is never seen, so both counts are lower
bounds, unless the queue was consumed strictly oldest first (as arq's workers take due jobs:
``ZRANGEBYSCORE -inf now`` in ``arq/worker.py``) and a job that was already due at the previous
cutoff still waits: then nothing newer can have been taken, and the counts are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

SETTLE_MS = 1000


@dataclass(frozen=True, slots=True)
class WindowCounts:
    """Running totals; ``exact`` is False when this interval's additions are lower bounds."""

    arrivals_total: int
    completions_total: int
    exact: bool


class ScoreWindow:
    """Tracks one sorted-set queue from sample to sample."""

    def __init__(self, settle_ms: int = SETTLE_MS) -> None:
        self.settle_ms = settle_ms
        self.arrivals_total = 0
        self.completions_total = 0
        #: the previous sample's cutoff and due count; None before the first sample
        self.previous_cutoff: int | None = None
        self._previous_due = 0

    def cutoff(self, now_ms: int) -> int:
        """The score up to which jobs count as arrived, for a sample taken at ``now_ms``."""
        cutoff = now_ms - self.settle_ms
        if self.previous_cutoff is not None:
            cutoff = max(cutoff, self.previous_cutoff)
        return cutoff

    def observe(
        self, cutoff: int, due: int, arrivals: int | None, oldest_waiting: float | None
    ) -> WindowCounts:
        """Account for one sample.

        ``cutoff`` is :meth:`cutoff`'s answer; ``due`` counts members scored at or before it;
        ``arrivals`` counts members scored in ``(previous_cutoff, cutoff]`` (None on the first
        sample); ``oldest_waiting`` is the score of the oldest due job not running (None when
        none waits, or it is not known). The first sample only sets the baseline.
        """
        exact = True
        if self.previous_cutoff is not None:
            arrived = arrivals or 0
            left = self._previous_due + arrived - due
            still_waiting = oldest_waiting is not None and oldest_waiting <= self.previous_cutoff
            # left < 0: a job landed behind the cutoff (a producer clock further behind than
            # SETTLE_MS, or enqueued with a past defer time): it was never counted as arrived
            exact = still_waiting and left >= 0
            self.arrivals_total += arrived
            self.completions_total += max(0, left)
        self.previous_cutoff = cutoff
        self._previous_due = due
        return WindowCounts(self.arrivals_total, self.completions_total, exact)
