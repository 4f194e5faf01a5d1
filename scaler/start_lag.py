"""How long the workers an answer asks for take to show, learned where the broker shows the
workers; and the flow's recent peak, which a fleet that starts that slowly keeps between rises.

A scale-up is KEDA's poll, the HPA's sync, a pod scheduled, its image pulled and its process
booted: where that takes longer than the target age, a fleet scaled in between two rises of
the flow meets the next one late, by the whole start, however soon it is asked. The lag is
measured from the first answer that asked for more workers than the broker showed (past the
HPA's tolerance) to the first sample that shows more of them; the shortest measured counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scaler.draining import hpa_holds

#: a start is slow where it takes longer than the target age and at least this many seconds:
#: KEDA's poll and the HPA's sync alone take up to 45 s, so a start under a minute is the pods'
#: own, and a target shorter than that would read every start as slow (``mixes-177``: pods that
#: boot for 16 s, a 15 s target, held for 1.2x the cheapest)
SLOW_START = 60.0
#: where starts are slow, the flow's largest need of this many seconds is kept ...
FLOW_MEMORY = 900.0
#: ... as the largest of each span this long ...
FLOW_BUCKET = 300.0
#: ... while the flow's need now is at most this share of it: the flow stopped (on-off
#: traffic, a batch between runs), not a trough the fleet follows down and up again in time
#: (``broad-035``: a sine, 33.6 busy workers at its peak, met at 1.37x the cost held at 1/4)
IDLE_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class StartLag:
    #: when an answer first asked for more workers than the broker showed, how many it asked
    #: for and how many were shown then; None while no such answer waits for its workers
    asked_at: float | None = None
    asked_for: int = 0
    seen_then: int = 0
    #: the workers the last measured answer asked for: more shown up to that count are its
    #: late pods, not a new answer's
    filled_to: int = 0
    #: the shortest time measured from such an answer to more workers shown
    shortest: float | None = None
    #: the largest flow need (workers, a fraction) of each ``FLOW_BUCKET`` seconds of the last
    #: ``FLOW_MEMORY``: (the bucket's number, its largest need), oldest first
    flow_peaks: tuple[tuple[int, float], ...] = ()

    @property
    def peak_flow(self) -> float:
        """The largest flow need of the last ``FLOW_MEMORY`` seconds or so."""
        return max((peak for _, peak in self.flow_peaks), default=0.0)


NO_LAG = StartLag()


def learn_lag(lag: StartLag, consumers: int | None, desired: int, now: float) -> StartLag:
    """``lag`` after an answer of ``desired`` workers, with ``consumers`` shown now. An answer
    that falls back before its workers show stays the one measured from: the pods it started
    still boot, and show later, so a start never reads shorter than it took."""
    if consumers is None:
        return lag
    if lag.asked_at is not None and consumers > lag.seen_then:
        seconds = now - lag.asked_at
        shortest = seconds if lag.shortest is None else min(lag.shortest, seconds)
        lag = replace(lag, asked_at=None, filled_to=lag.asked_for, shortest=shortest)
    if lag.filled_to and (consumers >= lag.filled_to or desired <= consumers):
        lag = replace(lag, filled_to=0)
    asks_more = desired > max(consumers, lag.filled_to) and not hpa_holds(desired, consumers)
    if asks_more and lag.asked_at is None:
        return replace(lag, asked_at=now, asked_for=desired, seen_then=consumers)
    if asks_more:
        return replace(lag, asked_for=max(lag.asked_for, desired))
    return lag


def remember_flow(lag: StartLag, flow: float | None, now: float) -> StartLag:
    """``lag`` with the flow's need ``flow`` (workers) seen at ``now``."""
    if flow is None:
        return lag
    bucket = int(now // FLOW_BUCKET)
    oldest = bucket - int(FLOW_MEMORY // FLOW_BUCKET)
    held = lag.flow_peaks
    if held and held[-1][0] == bucket and held[-1][1] >= flow and held[0][0] > oldest:
        return lag  # nothing to add nor to forget: most calls, with nothing allocated
    peaks = [(b, peak) for b, peak in held if b > oldest]
    if peaks and peaks[-1][0] == bucket:
        peaks[-1] = (bucket, max(peaks[-1][1], flow))
    else:
        peaks.append((bucket, flow))
    return replace(lag, flow_peaks=tuple(peaks))


def slow_start(lag: StartLag, target_age: float) -> bool:
    """Whether the workers asked for took longer than the target age, and at least
    ``SLOW_START``, to show."""
    return lag.shortest is not None and lag.shortest > max(target_age, SLOW_START - 1e-9)


def held_flow(lag: StartLag, flow: float, target_age: float) -> int:
    """The workers kept for the next rise of the flow, whose need now is ``flow``: the flow's
    recent peak, rounded up, where starts are slow and the flow stopped (see ``IDLE_SHARE``);
    else 0."""
    if not slow_start(lag, target_age) or flow > IDLE_SHARE * lag.peak_flow:
        return 0
    return math.ceil(lag.peak_flow - 1e-9)
