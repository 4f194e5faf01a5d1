"""The arrival-history age estimate: the enqueue time of the oldest waiting job, with no
timestamp in the job and without touching a message.

Keep the cumulative arrivals count over time. In a FIFO queue that has taken ``A − depth`` of
its ``A`` arrivals, the oldest waiting job is arrival number ``A − depth + 1``; the moment the
count reached that number is its enqueue time, interpolated between the two samples around it
(as if arrivals were spread evenly over the interval). If the history does not reach back that
far, the job is older than the history: the age is then a lower bound, the history's span.

Old points are thinned so the gap between two kept points is at most :data:`RESOLUTION` of their
age (and never less than the sampling interval): a few hundred points cover hours, and the
interpolation error stays within a few percent of the age.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from brokers.base import Precision

#: the largest gap between kept points, as a share of their age
RESOLUTION = 0.02
#: points older than this are dropped
MAX_SPAN = 6 * 3600.0
#: the shortest span the recent arrival rate is taken over
RECENT_SPAN = 10.0
#: thin when the history has grown by this many points since the last thinning
THIN_EVERY = 64


@dataclass(frozen=True, slots=True)
class EnqueueEstimate:
    enqueued_at: float
    precision: Precision


class ArrivalHistory:
    """Cumulative arrivals of one queue over time (oldest first)."""

    def __init__(self, *, resolution: float = RESOLUTION, max_span: float = MAX_SPAN) -> None:
        self.resolution = resolution
        self.max_span = max_span
        self._times: list[float] = []
        self._counts: list[int] = []
        self._since_thinning = 0

    def __len__(self) -> int:
        return len(self._times)

    @property
    def span(self) -> float:
        return self._times[-1] - self._times[0] if self._times else 0.0

    def add(self, observed_at: float, arrivals_total: int) -> None:
        """Record the count at a sample. A count that went down (a reset) starts a new history."""
        if self._times and (arrivals_total < self._counts[-1] or observed_at <= self._times[-1]):
            if arrivals_total < self._counts[-1]:
                self._times.clear()
                self._counts.clear()
            else:
                return
        self._times.append(observed_at)
        self._counts.append(arrivals_total)
        self._since_thinning += 1
        if self._since_thinning >= THIN_EVERY:
            self._thin()

    def recent_rate(self) -> float:
        """Arrivals per second over the last :data:`RECENT_SPAN` seconds or more (0 with fewer
        than two points): long enough that a point repeating the count (counters refreshed
        late) does not read as a stop."""
        if len(self._times) < 2:
            return 0.0
        start = bisect.bisect_right(self._times, self._times[-1] - RECENT_SPAN) - 1
        start = min(max(start, 0), len(self._times) - 2)
        return (self._counts[-1] - self._counts[start]) / (self._times[-1] - self._times[start])

    def enqueue_time(self, arrivals_total: float, depth: int) -> EnqueueEstimate | None:
        """When the oldest of ``depth`` waiting jobs arrived, given ``arrivals_total`` now."""
        if not self._times or depth <= 0:
            return None
        wanted = arrivals_total - depth + 1  # the oldest waiting job's arrival number
        if wanted <= self._counts[0]:
            # it arrived at or before the first point: all we know is "no later than that"
            return EnqueueEstimate(self._times[0], Precision.LOWER_BOUND)
        i = bisect.bisect_left(self._counts, wanted)  # first point whose count reaches it
        if i >= len(self._counts):
            i = len(self._counts) - 1
        before_t, before_n = self._times[i - 1], self._counts[i - 1]
        after_t, after_n = self._times[i], self._counts[i]
        share = (wanted - before_n - 0.5) / max(after_n - before_n, 1)
        share = min(max(share, 0.0), 1.0)
        return EnqueueEstimate(before_t + share * (after_t - before_t), Precision.ESTIMATE)

    def points(self, most: int) -> list[tuple[float, int]]:
        """At most ``most`` (at least 2) of the history's points, oldest first: the newest, the
        oldest, and between them points spread evenly over the counts (a checkpoint of it)."""
        if len(self._times) <= most:
            return list(zip(self._times, self._counts, strict=True))
        step = (len(self._times) - 1) / (most - 1)
        picked = sorted({round(i * step) for i in range(most)})
        return [(self._times[i], self._counts[i]) for i in picked]

    def restore(self, points: list[tuple[float, int]]) -> None:
        """Put ``points`` (oldest first; from a checkpoint, already in this history's count)
        before the history's own: those at or after its first point, or whose count is above
        its first count, are left out."""
        if not self._times:
            return
        first_t, first_n = self._times[0], self._counts[0]
        older = [(t, n) for t, n in points if t < first_t and n <= first_n]
        kept_t: list[float] = []
        kept_n: list[int] = []
        for t, n in older:  # strictly increasing times, counts that never go down
            if kept_t and (t <= kept_t[-1] or n < kept_n[-1]):
                continue
            kept_t.append(t)
            kept_n.append(n)
        self._times[:0] = kept_t
        self._counts[:0] = kept_n

    def _thin(self) -> None:
        self._since_thinning = 0
        newest = self._times[-1]
        keep_t, keep_n = [self._times[-1]], [self._counts[-1]]
        for t, n in zip(reversed(self._times[:-1]), reversed(self._counts[:-1]), strict=True):
            if newest - t > self.max_span:
                break
            if keep_t[-1] - t >= self.resolution * (newest - t):
                keep_t.append(t)
                keep_n.append(n)
        oldest_kept = keep_t[-1]
        # keep the oldest point within the span, so the history's reach does not shrink
        first = next(
            (i for i, t in enumerate(self._times) if newest - t <= self.max_span),
            len(self._times) - 1,
        )
        if self._times[first] < oldest_kept:
            keep_t.append(self._times[first])
            keep_n.append(self._counts[first])
        self._times = keep_t[::-1]
        self._counts = keep_n[::-1]
