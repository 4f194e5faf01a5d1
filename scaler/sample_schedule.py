"""How often a shared sampler reads its queue, and how much history it keeps.

Pure: the sampler (:mod:`scaler.sampler`) and its broker's pacer feed it what they saw and get
intervals back; nothing here reads a clock or a broker.

Every trigger on a queue asks for a ``sampleInterval`` and a ``rateWindow``. The sampler follows
the *live* ones: the shortest interval and the longest window among the triggers asked about
recently. A trigger is live while it was asked within ``max(live_for, LIVE_INTERVALS x its
sampleInterval)`` (2 minutes by default, well above KEDA's 30 s polling and the HPA's 15 s).
So a trigger with a long interval cannot slow down another's queue, and a trigger with a short
one that goes away (its ScaledObject deleted or edited) stops costing broker round trips once its
liveness runs out.

**Adaptive intervals.** The live triggers' shortest ``sampleInterval`` is the *fast* interval;
``serve --slow-sample-interval`` (:data:`SLOW_INTERVAL`, never below the fast one) the *slow*
bound. After each sample the queue gets an :class:`Urgency`, and its next interval is the fast
one while it is urgent (watched by a StreamIsActive, just changed, or asked about by KEDA after
a pause); otherwise the interval doubles per sample, up to the slow bound (idle: nothing waits
or runs; steady: work, unchanged, and then, while work flows through it, at most a quarter of
the live triggers' longest ``rateWindow``, so the rates keep samples across the window they are
measured over; a steady queue where nothing moved at all relaxes to the slow bound, but not
past the moment its oldest job will be near the target). A queue whose oldest age is near or
over the smallest live ``targetAge`` is read when KEDA asks (:attr:`Urgency.read_on_ask`: the
sampler reads it for a call that finds its newest sample older than the fast interval) and
relaxes in the background as a flowing steady queue does.
So a queue that nobody needs fast costs one read per slow interval, one near its target one
read per KEDA call at most, and one that starts to move is back to the fast interval after one
sample.

**A broker's budget** (``serve --broker-command-budget``, commands per second per broker URL):
:func:`allocate` stretches intervals, least urgent queues first, until the samples of the broker
fit (at the broker's measured commands per sample); up to the slow bound first, then, if that is
not enough, up to :data:`BUDGET_MAX_INTERVAL`.

**Staleness follows the actual interval**: a sample is too old after
``STALE_AFTER_INTERVALS`` times the interval the scheduler planned after it (or the one in force
now, if longer), never the configured minimum.

While the queue's broker fails, the pause between samples doubles per failure in a row from the
fast interval (whatever the queue had relaxed to), up to ``BACKOFF_CAP``, and is back to the
interval after a success; until then the newest sample is judged by the fast interval too, so a
failed read of an idle queue is an error within seconds, not after three slow intervals.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from brokers.base import QueueSnapshot

#: a trigger is live while it was asked within this long ...
LIVE_FOR = 120.0
#: ... or this many of its own sample intervals, whichever is longer
LIVE_INTERVALS = 3
#: the longest pause between two samples of a failing source (unless its interval is longer)
BACKOFF_CAP = 30.0
#: failures in a row beyond this no longer double the pause (the cap is reached long before)
_MAX_DOUBLINGS = 32


#: the slow bound on a queue's interval while nobody needs it fast (serve's default): KEDA's
#: default pollingInterval, so an idle queue is read about as often as KEDA asks about it
SLOW_INTERVAL = 30.0
#: a queue that is not urgent has its interval multiplied by this after each sample
RELAX_FACTOR = 2.0
#: an oldest age at least this share of the target is "near the target"
NEAR_TARGET = 0.5
#: KEDA asking about a queue after this long without asking is "after a pause" ...
ASK_PAUSE = 60.0
#: ... and the queue stays fast for this long after (one KEDA poll)
FAST_AFTER_ASK = 30.0
#: a change: the depth moved by at least this share of the larger of the two depths ...
CHANGE_SHARE = 0.1
#: ... and by at least this many jobs
CHANGE_MIN = 2
#: a steady queue is read at least this many times per rate window (idle ones: up to the slow
#: bound)
SAMPLES_PER_WINDOW = 4
#: a broker's budget may stretch an interval up to this (past the slow bound, when all its
#: queues at the slow bound still do not fit)
BUDGET_MAX_INTERVAL = 120.0


class Urgency(enum.IntEnum):
    """How much a queue needs fresh samples, least first: a budget slows the least urgent
    queues first. CHANGING and above keep the fast interval."""

    IDLE = 0
    STEADY = 1
    CHANGING = 2
    ASKED = 3
    NEAR_TARGET = 4
    WATCHED = 5

    @property
    def fast(self) -> bool:
        """Sampled at the fast interval in the background."""
        return self >= Urgency.CHANGING and self is not Urgency.NEAR_TARGET

    @property
    def read_on_ask(self) -> bool:
        """Read when KEDA asks, if the newest sample is older than the fast interval; in the
        background relaxed as a steady queue is (between KEDA's calls nothing reads it)."""
        return self is Urgency.NEAR_TARGET


@dataclass(frozen=True, slots=True)
class Demand:
    """What one or more triggers ask of a queue's sampler."""

    interval: float
    window: float
    #: the trigger's targetAge (None: not given, as in tests of the sampler alone)
    target_age: float | None = None
    #: the trigger's slowSampleInterval (None: the server's slow bound)
    slow: float | None = None


class Demands:
    """The demands of a queue's triggers, by when each was last asked for.

    KEDA's every call asks, and reads the pace, of its queue: what is live, and the pace it
    sets, is worked out again only when a demand not live before is asked for or the first live
    one may have expired, not on each call."""

    def __init__(self, first: Demand, now: float, *, live_for: float = LIVE_FOR) -> None:
        self.live_for = live_for
        self._asked: dict[Demand, float] = {first: now}
        #: the live demands and their (interval, window, target age) as last worked out ...
        self._live: tuple[Demand, ...] = ()
        self._pace: tuple[float, float, float | None] = (first.interval, first.window, None)
        #: ... and the shortest slow bound they name (None: none names one), and whether any
        #: names none (it takes the server's)
        self._slow_bounds: tuple[float | None, bool] = (None, True)
        #: ... good until then (a demand may expire just after), or a new demand is asked for
        self._recheck_at = -math.inf

    def __len__(self) -> int:
        return len(self._asked)

    def ask(self, demand: Demand, now: float) -> None:
        known = len(self._asked)
        self._asked[demand] = now
        if len(self._asked) != known:  # a demand not live before
            self._recheck_at = -math.inf

    def live(self, now: float) -> list[Demand]:
        """The live demands; the ones no longer live are forgotten. When none is live, the one
        asked last stays (it sets the pace until the sampler goes idle)."""
        return list(self._current(now))

    def interval(self, now: float) -> float:
        """The shortest interval a live trigger asks for."""
        self._current(now)
        return self._pace[0]

    def window(self, now: float) -> float:
        """The longest rate window a live trigger asks for."""
        self._current(now)
        return self._pace[1]

    def slow(self, now: float, default: float | None) -> float | None:
        """The shortest slow bound a live trigger asks for, ``default`` (the server's) for one
        that names none; None when that is None (no slow bound: the fast interval always)."""
        self._current(now)
        named, unnamed = self._slow_bounds
        if not unnamed:
            return named
        if default is None:
            return None
        return default if named is None else min(named, default)

    def target_age(self, now: float) -> float | None:
        """The smallest targetAge a live trigger asks for."""
        self._current(now)
        return self._pace[2]

    def _current(self, now: float) -> tuple[Demand, ...]:
        if now <= self._recheck_at:
            return self._live
        expired = [d for d, asked in self._asked.items() if now - asked > self._lifetime(d)]
        if len(expired) == len(self._asked):
            newest = max(self._asked, key=self._asked.__getitem__)
            expired.remove(newest)
        for demand in expired:
            del self._asked[demand]
        live = self._live = tuple(self._asked)
        targets = [d.target_age for d in live if d.target_age is not None]
        self._pace = (
            min(d.interval for d in live),
            max(d.window for d in live),
            min(targets) if targets else None,
        )
        named = [d.slow for d in live if d.slow is not None]
        self._slow_bounds = (min(named) if named else None, len(named) < len(live))
        # live while now - asked <= lifetime; the one kept past its lifetime stays until
        # another is asked for
        ends = [e for d, asked in self._asked.items() if (e := asked + self._lifetime(d)) >= now]
        self._recheck_at = min(ends) if ends else math.inf
        return live

    def _lifetime(self, demand: Demand) -> float:
        return max(self.live_for, LIVE_INTERVALS * demand.interval)


def pause_after(interval: float, failures: int, cap: float = BACKOFF_CAP) -> float:
    """The pause before the next sample after ``failures`` failed samples in a row: the
    interval, doubled for each failure, at most ``cap`` (or the interval when that is longer)."""
    if failures <= 0:
        return interval
    return max(interval, min(cap, interval * 2.0 ** min(failures, _MAX_DOUBLINGS)))


def changed(previous: QueueSnapshot | None, newest: QueueSnapshot) -> bool:
    """Whether the queue moved between two samples in a way the decision may follow: work
    appeared or went (waiting or running), the depth moved by :data:`CHANGE_SHARE` (at least
    :data:`CHANGE_MIN` jobs), the workers or the pause changed."""
    if previous is None:
        return True
    if (previous.depth is None) != (newest.depth is None):
        return True
    if previous.depth is not None and newest.depth is not None:
        before, after = previous.depth, newest.depth
        if (before == 0) != (after == 0):
            return True
        if abs(after - before) >= max(CHANGE_MIN, CHANGE_SHARE * max(before, after)):
            return True
    if bool(previous.in_flight) != bool(newest.in_flight):
        return True
    return previous.consumers != newest.consumers or previous.paused != newest.paused


def urgency(
    *,
    watched: bool,
    age: float | None,
    target_age: float | None,
    asked_after_pause: bool,
    moved: bool,
    busy: bool,
) -> Urgency:
    """A queue's urgency from what its newest sample showed and who asks about it: ``age`` the
    oldest waiting job's (exact or estimated), ``moved`` from :func:`changed`, ``busy`` whether
    jobs wait or run."""
    if watched:
        return Urgency.WATCHED
    if age is not None and target_age is not None and age >= NEAR_TARGET * target_age:
        return Urgency.NEAR_TARGET
    if asked_after_pause:
        return Urgency.ASKED
    if moved:
        return Urgency.CHANGING
    return Urgency.STEADY if busy else Urgency.IDLE


def next_interval(
    previous: float,
    level: Urgency,
    fast: float,
    slow: float,
    window: float | None = None,
    *,
    flowing: bool = True,
    until_near: float | None = None,
) -> float:
    """The interval after a sample: ``fast`` while urgent, else ``previous`` relaxed by
    :data:`RELAX_FACTOR`, within ``fast`` and ``slow`` (``slow`` below ``fast`` is ``fast``).
    A steady queue through which work flows (``flowing``, from :func:`flowing`) and one near
    its target (read on KEDA's asks besides) keep :data:`SAMPLES_PER_WINDOW` samples in the live
    triggers' rate ``window``: their rates, and a knee learned from them, are measured over the
    window the triggers asked for. An idle queue, and a steady one where nothing moved at all,
    relax to ``slow``, but no further than ``until_near`` (the seconds until its oldest job is
    near the target, at its age now), so a waiting job is not near its target unseen."""
    if level.fast:
        return fast
    steady = level is Urgency.STEADY and flowing
    if (steady or level.read_on_ask) and window is not None:
        slow = min(slow, window / SAMPLES_PER_WINDOW)
    if until_near is not None:
        slow = min(slow, until_near)
    return max(fast, min(slow, previous * RELAX_FACTOR))


def flowing(previous: QueueSnapshot | None, newest: QueueSnapshot) -> bool:
    """Whether work moved through the queue between two samples: jobs run, arrived or
    finished; also where the counts that would tell are unknown (a first sample, a format
    without them)."""
    if previous is None or newest.in_flight:
        return True
    counts = (newest.arrivals_total, newest.completions_total)
    if None in counts:
        return True
    return counts != (previous.arrivals_total, previous.completions_total)


@dataclass(frozen=True, slots=True)
class Wanted:
    """What one queue of a broker wants of the broker's budget."""

    interval: float
    slow: float
    urgency: Urgency


def allocate(queues: Sequence[Wanted], samples_per_second: float) -> list[float]:
    """Intervals no shorter than each queue wants, whose samples fit ``samples_per_second``
    (a broker's budget of commands over its commands per sample), stretched least urgent queues
    first: each urgency level in turn gets a common floor on its intervals, up to each queue's
    slow bound; when every level at its slow bounds still does not fit, the same again up to
    :data:`BUDGET_MAX_INTERVAL`. What cannot fit even then stays at that ceiling."""
    intervals = [q.interval for q in queues]
    if _rate(intervals) <= samples_per_second:
        return intervals
    levels = sorted({q.urgency for q in queues})
    for ceiling in (None, BUDGET_MAX_INTERVAL):
        for level in levels:
            members = [i for i, q in enumerate(queues) if q.urgency == level]
            caps = {i: _cap(queues[i], ceiling) for i in members}
            rest = _rate([x for i, x in enumerate(intervals) if i not in caps])
            room = samples_per_second - rest
            floor = _floor_within(
                [(intervals[i], caps[i]) for i in members], room, max(caps.values())
            )
            for i in members:
                intervals[i] = min(caps[i], max(intervals[i], floor))
            if _rate(intervals) <= samples_per_second * (1 + 1e-9):
                return intervals
    return intervals


def _cap(queue: Wanted, ceiling: float | None) -> float:
    slow = max(queue.slow, queue.interval)
    return slow if ceiling is None else max(slow, ceiling)


def _rate(intervals: Sequence[float]) -> float:
    return math.fsum(1.0 / x for x in intervals)


def _floor_within(members: Sequence[tuple[float, float]], room: float, top: float) -> float:
    """The shortest common floor ``t`` such that the members' intervals ``min(cap, max(own,
    t))`` take at most ``room`` samples per second (``top`` when none does)."""

    def rate(t: float) -> float:
        return math.fsum(1.0 / min(cap, max(own, t)) for own, cap in members)

    if room <= 0 or rate(top) > room:
        return top
    low, high = 0.0, top
    for _ in range(48):
        middle = (low + high) / 2
        if rate(middle) > room:
            low = middle
        else:
            high = middle
    return high
