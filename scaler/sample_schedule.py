"""How often a shared sampler reads its queue, and how much history it keeps.

Every trigger on a queue asks for a ``sampleInterval`` and a ``rateWindow``. The sampler follows
the *live* ones: the shortest interval and the longest window among the triggers asked about
recently. A trigger is live while it was asked within ``max(live_for, LIVE_INTERVALS x its
sampleInterval)`` (2 minutes by default, well above KEDA's 30 s polling and the HPA's 15 s).
So a trigger with a long interval cannot slow down another's queue, and a trigger with a short
one that goes away (its ScaledObject deleted or edited) stops costing broker round trips once its
liveness runs out.

While the queue's broker fails, the pause between samples doubles per failure in a row, up to
``BACKOFF_CAP`` (never shorter than the interval), and is back to the interval after a success.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a trigger is live while it was asked within this long ...
LIVE_FOR = 120.0
#: ... or this many of its own sample intervals, whichever is longer
LIVE_INTERVALS = 3
#: the longest pause between two samples of a failing source (unless its interval is longer)
BACKOFF_CAP = 30.0
#: failures in a row beyond this no longer double the pause (the cap is reached long before)
_MAX_DOUBLINGS = 32


@dataclass(frozen=True, slots=True)
class Demand:
    """What one or more triggers ask of a queue's sampler."""

    interval: float
    window: float


class Demands:
    """The demands of a queue's triggers, by when each was last asked for."""

    def __init__(self, first: Demand, now: float, *, live_for: float = LIVE_FOR) -> None:
        self.live_for = live_for
        self._asked: dict[Demand, float] = {first: now}

    def __len__(self) -> int:
        return len(self._asked)

    def ask(self, demand: Demand, now: float) -> None:
        self._asked[demand] = now

    def live(self, now: float) -> list[Demand]:
        """The live demands; the ones no longer live are forgotten. When none is live, the one
        asked last stays (it sets the pace until the sampler goes idle)."""
        expired = [d for d, asked in self._asked.items() if now - asked > self._lifetime(d)]
        if len(expired) == len(self._asked):
            newest = max(self._asked, key=self._asked.__getitem__)
            expired.remove(newest)
        for demand in expired:
            del self._asked[demand]
        return list(self._asked)

    def interval(self, now: float) -> float:
        """The shortest interval a live trigger asks for."""
        return min(d.interval for d in self.live(now))

    def window(self, now: float) -> float:
        """The longest rate window a live trigger asks for."""
        return max(d.window for d in self.live(now))

    def _lifetime(self, demand: Demand) -> float:
        return max(self.live_for, LIVE_INTERVALS * demand.interval)


def pause_after(interval: float, failures: int, cap: float = BACKOFF_CAP) -> float:
    """The pause before the next sample after ``failures`` failed samples in a row: the
    interval, doubled for each failure, at most ``cap`` (or the interval when that is longer)."""
    if failures <= 0:
        return interval
    return max(interval, min(cap, interval * 2.0 ** min(failures, _MAX_DOUBLINGS)))
