"""Signals from a queue's recent snapshots: oldest age, arrival and completion rates, time to drain.

Each figure carries its precision and its source. Pure: the snapshots and the window go in.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from brokers.base import Precision, QueueSnapshot, WorkerReadings
from scaler.arrival_history import ArrivalHistory

#: the counts' source where the "completions" are the jobs taken from a list, not finished
LIST_MARKER = "list-marker"
#: the flow rate needs arrivals counted over at least this share of the rate window
MIN_FLOW_SHARE = 0.1
#: the fast rate covers the newest samples within this share of the rate window ...
FAST_SHARE = 0.25
#: ... and needs at least this many intervals between them
FAST_MIN_INTERVALS = 4


@dataclass(frozen=True, slots=True)
class Figure:
    """A value with how far to trust it. ``value`` is None exactly when the precision is unknown."""

    value: float | None
    precision: Precision
    source: str = ""

    @classmethod
    def unknown(cls, source: str = "") -> Figure:
        return cls(None, Precision.UNKNOWN, source)


@dataclass(frozen=True, slots=True)
class QueueSignals:
    observed_at: float
    depth: int | None
    in_flight: int | None
    consumers: int | None
    oldest_age: Figure
    arrival_rate: Figure
    completion_rate: Figure
    time_to_drain: Figure
    #: how much history the rates cover, in seconds
    rate_span: float
    #: arrivals per second inside the window from its start until the last sample before the
    #: oldest waiting job arrived: in a FIFO queue all of them have been taken, so this is the
    #: flow that keeps coming, without the backlog (nor a burst that arrived with the oldest
    #: job); None where the age, the counts or the span do not tell it
    flow_rate: float | None = None
    #: whether the library holds the queue paused (BullMQ); None where not known
    paused: bool | None = None
    #: the consumers' job slots, where the library records their concurrency (Sidekiq)
    slots: int | None = None
    #: how in_flight, consumers and slots were read (precision, source, age)
    readings: WorkerReadings = field(default_factory=WorkerReadings)
    #: where the window's counts are a lower bound (a list empty at the samples loses count),
    #: arrivals per second since they became exact again: what comes now, without a burst that
    #: came while they were not; None where the whole window is exact or too little of it is
    recent_rate: float | None = None
    #: jobs in flight on average over the rate window (each sample held until the next): by
    #: Little's law, the busy job slots, and with the completions the time a job holds one;
    #: None where the format does not show what runs
    mean_in_flight: float | None = None
    #: jobs finished over the window (``rate_span``), from exact counts: the completions
    #: counted, or where the list marker counts the jobs taken, those less the growth of the
    #: jobs in flight; None where not known
    jobs_finished: float | None = None
    #: arrivals per second over the newest quarter of the rate window: the median of the
    #: rates between consecutive samples, so that jobs that came at once (a burst) do not move
    #: it, and never more than the quarter's mean, so that a slow flow read every second (0 or
    #: 1 job an interval) does not read as one job a second; what a step in the flow looks
    #: like long before the window's rate shows it. None where the counts there are not exact
    #: or fewer than ``FAST_MIN_INTERVALS`` intervals
    fast_rate: float | None = None
    #: the seconds ``fast_rate`` covers
    fast_span: float = 0.0


def compute_signals(
    history: Sequence[QueueSnapshot], window: float, arrivals: ArrivalHistory | None = None
) -> QueueSignals:
    """Signals as of the newest snapshot in ``history`` (oldest first), rates over ``window``.

    ``arrivals``, the queue's longer arrival history, estimates the oldest age where the
    snapshot has no enqueue time.
    """
    latest = history[-1]
    base_index = _window_start(history, window)
    arrival_rate, completion_rate, span = _rates(history, base_index)
    age = oldest_age(latest, arrivals)
    fast_rate, fast_span = _fast_rate(list(itertools.islice(history, base_index, None)), window)
    return QueueSignals(
        observed_at=latest.observed_at,
        depth=latest.depth,
        in_flight=latest.in_flight,
        consumers=latest.consumers,
        oldest_age=age,
        arrival_rate=arrival_rate,
        completion_rate=completion_rate,
        time_to_drain=_time_to_drain(latest.depth, arrival_rate, completion_rate),
        rate_span=span,
        flow_rate=_flow_rate(list(itertools.islice(history, base_index, None)), age, window),
        paused=latest.paused,
        slots=latest.slots,
        readings=latest.readings,
        recent_rate=_recent_rate(list(itertools.islice(history, base_index, None)), window),
        mean_in_flight=_mean_in_flight(history, base_index),
        jobs_finished=_jobs_finished(history[base_index], latest, completion_rate),
        fast_rate=fast_rate,
        fast_span=fast_span,
    )


def oldest_age(snapshot: QueueSnapshot, arrivals: ArrivalHistory | None) -> Figure:
    """The age of ``snapshot``'s oldest waiting job: its enqueue time, or the estimate from
    ``arrivals`` (the queue's arrival history, with the snapshot in it)."""
    if snapshot.depth == 0:
        return Figure(0.0, Precision.EXACT, "empty")
    stamped = None
    if snapshot.oldest_enqueued_at is not None:
        age = max(0.0, snapshot.observed_at - snapshot.oldest_enqueued_at)
        stamped = Figure(age, snapshot.oldest_precision, snapshot.oldest_source)
        if stamped.precision is not Precision.ESTIMATE:
            return stamped
    estimated = _estimated_age(snapshot, arrivals)
    # a broker's own estimate (RabbitMQ's head timestamp while messages are in flight, read
    # seconds ago) gives way to one interpolated from live counts, when that reaches the job
    if estimated is not None and (stamped is None or estimated.precision is Precision.ESTIMATE):
        return estimated
    return stamped or Figure.unknown(snapshot.oldest_source)


def _estimated_age(snapshot: QueueSnapshot, arrivals: ArrivalHistory | None) -> Figure | None:
    """The arrival-history estimate, where the snapshot has the counts it needs."""
    if arrivals is None or snapshot.depth is None or snapshot.arrivals_total is None:
        return None
    # counters that lag the depth are carried forward at the recent pace, so that both
    # describe the same moment
    lag = snapshot.observed_at - snapshot.counted_at
    arrived = snapshot.arrivals_total + lag * arrivals.recent_rate()
    estimate = arrivals.enqueue_time(arrived, snapshot.depth)
    if estimate is None:
        return None
    age = max(0.0, snapshot.observed_at - estimate.enqueued_at)
    return Figure(age, estimate.precision, "arrival-history")


def _window_start(history: Sequence[QueueSnapshot], window: float) -> int:
    """The earliest snapshot inside the window with counts (a broker may have had none for a
    while), so that the rates cover as much of it as we have."""
    start = history[-1].counted_at - window
    return next(
        (i for i, s in enumerate(history) if s.counted_at >= start and _has_counts(s)),
        len(history) - 1,
    )


def _rates(history: Sequence[QueueSnapshot], base_index: int) -> tuple[Figure, Figure, float]:
    latest = history[-1]
    base = history[base_index]
    span = latest.counted_at - base.counted_at
    exact = all(s.counts_exact for s in itertools.islice(history, base_index + 1, None))
    precision = Precision.EXACT if exact else Precision.LOWER_BOUND
    source = latest.counts_source
    return (
        _rate(base.arrivals_total, latest.arrivals_total, span, precision, source),
        _rate(base.completions_total, latest.completions_total, span, precision, source),
        span,
    )


def _flow_rate(snapshots: Sequence[QueueSnapshot], age: Figure, window: float) -> float | None:
    """Arrivals per second from the first of ``snapshots`` (those inside the rate window) to the
    last one counted before the oldest waiting job arrived, over at least a tenth of the window,
    from exact counts."""
    base, latest = snapshots[0], snapshots[-1]
    if age.value is None or age.precision is Precision.LOWER_BOUND or not latest.depth:
        return None
    arrived_at = latest.observed_at - age.value
    counted_before = (
        i
        for i, s in enumerate(snapshots)
        if s.counted_at < arrived_at and s.arrivals_total is not None
    )
    last = max(counted_before, default=None)
    if base.arrivals_total is None or last is None:
        return None
    counted = snapshots[last].arrivals_total
    seconds = snapshots[last].counted_at - base.counted_at
    if seconds < MIN_FLOW_SHARE * window or counted is None or counted < base.arrivals_total:
        return None
    if not all(s.counts_exact for s in snapshots[1 : last + 1]):
        return None
    return (counted - base.arrivals_total) / seconds


def _recent_rate(snapshots: Sequence[QueueSnapshot], window: float) -> float | None:
    """Arrivals per second since the counts became exact again inside the window (the list
    marker loses count while a list is empty at the samples), over at least a tenth of the
    window; None where every count in the window is exact (the window's rate is) or none is."""
    inexact = [i for i, s in enumerate(snapshots) if i > 0 and not s.counts_exact]
    if not inexact:
        return None
    start, latest = snapshots[inexact[-1]], snapshots[-1]
    seconds = latest.counted_at - start.counted_at
    if seconds < MIN_FLOW_SHARE * window:
        return None
    if start.arrivals_total is None or latest.arrivals_total is None:
        return None
    return max(0, latest.arrivals_total - start.arrivals_total) / seconds


def _fast_rate(snapshots: Sequence[QueueSnapshot], window: float) -> tuple[float | None, float]:
    """The median arrival rate between consecutive samples of the newest ``FAST_SHARE`` of
    the window (``snapshots``: those inside it), at most their mean, and the seconds it
    covers. The median leaves a burst out; the mean bounds it where the intervals are too
    short to count a slow flow in (0.25 jobs a second read every second: the median of 15
    intervals is 0 or 1 job a second, and 1 reads as a step to four times the flow)."""
    start = snapshots[-1].counted_at - FAST_SHARE * window
    newest = [s for s in snapshots if s.counted_at >= start]
    if len(newest) <= FAST_MIN_INTERVALS or not all(s.counts_exact for s in newest[1:]):
        return None, 0.0
    rates, counted = [], 0
    for before, after in itertools.pairwise(newest):
        seconds = after.counted_at - before.counted_at
        if before.arrivals_total is None or after.arrivals_total is None or seconds <= 0:
            return None, 0.0
        if after.arrivals_total < before.arrivals_total:
            return None, 0.0  # the counter was reset
        arrived = after.arrivals_total - before.arrivals_total
        counted += arrived
        rates.append(arrived / seconds)
    span = newest[-1].counted_at - newest[0].counted_at
    return min(statistics.median(rates), counted / span), span


def _mean_in_flight(history: Sequence[QueueSnapshot], base_index: int) -> float | None:
    """The in-flight count averaged over time from ``history[base_index]`` to the newest
    snapshot, each count held until the next; the newest alone where the span is empty."""
    snapshots = list(itertools.islice(history, base_index, None))
    if any(s.in_flight is None for s in snapshots):
        return None
    span = snapshots[-1].observed_at - snapshots[0].observed_at
    if span <= 0:
        return float(snapshots[-1].in_flight or 0)
    held = sum(
        (after.observed_at - before.observed_at) * (before.in_flight or 0)
        for before, after in itertools.pairwise(snapshots)
    )
    return held / span


def _jobs_finished(base: QueueSnapshot, latest: QueueSnapshot, completions: Figure) -> float | None:
    """Jobs finished between ``base`` and ``latest``, where the counts are exact."""
    if completions.precision is not Precision.EXACT or completions.value is None:
        return None
    if base.completions_total is None or latest.completions_total is None:
        return None
    counted = latest.completions_total - base.completions_total
    if latest.counts_source != LIST_MARKER:
        return float(counted)
    if base.in_flight is None or latest.in_flight is None:
        return None
    return float(max(0, counted - (latest.in_flight - base.in_flight)))


def _has_counts(snapshot: QueueSnapshot) -> bool:
    return snapshot.arrivals_total is not None or snapshot.completions_total is not None


def _rate(
    before: int | None, after: int | None, span: float, precision: Precision, source: str
) -> Figure:
    if before is None or after is None or span <= 0:
        return Figure.unknown(source)
    if after < before:  # the counter was reset (broker restart, queue re-created)
        return Figure.unknown(f"{source}: counter reset")
    return Figure((after - before) / span, precision, source)


def _time_to_drain(depth: int | None, arrivals: Figure, completions: Figure) -> Figure:
    """``depth / (μ − λ)``: 0 when nothing waits, infinite when completions lag arrivals."""
    if depth == 0:
        return Figure(0.0, Precision.EXACT, "empty")
    if depth is None or arrivals.value is None or completions.value is None:
        return Figure.unknown("rates")
    # a forecast from past rates: an estimate however exact the counts were
    net = completions.value - arrivals.value
    if net <= 0:
        return Figure(math.inf, Precision.ESTIMATE, "rates")
    return Figure(depth / net, Precision.ESTIMATE, "rates")
