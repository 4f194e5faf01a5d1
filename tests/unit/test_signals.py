"""Signals from hand-built snapshot histories: oldest age, rates, time to drain."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import replace

import pytest

from brokers.base import Precision, QueueSnapshot, Reading, WorkerReadings
from scaler.arrival_history import ArrivalHistory
from scaler.signals import Figure, QueueSignals, compute_signals


def _history(
    count: int,
    *,
    arrivals_per_s: int = 5,
    completions_per_s: int = 4,
    depth: int = 10,
    inexact_at: frozenset[float] = frozenset(),
) -> list[QueueSnapshot]:
    """``count`` snapshots one second apart from t=0, counters growing at the given rates."""
    return [
        QueueSnapshot(
            observed_at=float(t),
            depth=depth,
            arrivals_total=1000 + arrivals_per_s * t,
            completions_total=2000 + completions_per_s * t,
            counts_exact=float(t) not in inexact_at,
            counts_source="counters",
        )
        for t in range(count)
    ]


def _check_figure_invariant(signals: QueueSignals) -> None:
    for figure in (
        signals.oldest_age,
        signals.arrival_rate,
        signals.completion_rate,
        signals.time_to_drain,
    ):
        assert (figure.value is None) == (figure.precision is Precision.UNKNOWN), figure


# --- oldest age ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        pytest.param(
            QueueSnapshot(
                observed_at=1000.0,
                depth=5,
                oldest_enqueued_at=970.0,
                oldest_precision=Precision.EXACT,
                oldest_source="payload",
            ),
            Figure(30.0, Precision.EXACT, "payload"),
            id="exact payload timestamp",
        ),
        pytest.param(
            QueueSnapshot(
                observed_at=1000.0,
                depth=5,
                oldest_enqueued_at=987.5,
                oldest_precision=Precision.ESTIMATE,
                oldest_source="arrival history",
            ),
            Figure(12.5, Precision.ESTIMATE, "arrival history"),
            id="estimate keeps its precision",
        ),
        pytest.param(
            QueueSnapshot(
                observed_at=1000.0,
                depth=5,
                oldest_enqueued_at=880.0,
                oldest_precision=Precision.LOWER_BOUND,
                oldest_source="arrival history",
            ),
            Figure(120.0, Precision.LOWER_BOUND, "arrival history"),
            id="lower bound keeps its precision",
        ),
        pytest.param(
            QueueSnapshot(
                observed_at=1000.0,
                depth=5,
                oldest_enqueued_at=1003.0,
                oldest_precision=Precision.EXACT,
                oldest_source="payload",
            ),
            Figure(0.0, Precision.EXACT, "payload"),
            id="enqueue time ahead of the clock is age 0, not negative",
        ),
        pytest.param(
            QueueSnapshot(observed_at=1000.0, depth=0),
            Figure(0.0, Precision.EXACT, "empty"),
            id="empty queue is exactly 0",
        ),
        pytest.param(
            QueueSnapshot(
                observed_at=1000.0,
                depth=0,
                oldest_enqueued_at=400.0,
                oldest_precision=Precision.EXACT,
            ),
            Figure(0.0, Precision.EXACT, "empty"),
            id="empty queue ignores a stale enqueue time",
        ),
        pytest.param(
            QueueSnapshot(observed_at=1000.0, depth=5, oldest_source="payload"),
            Figure(None, Precision.UNKNOWN, "payload"),
            id="jobs wait but enqueue time unknown",
        ),
        pytest.param(
            QueueSnapshot(observed_at=1000.0, depth=None),
            Figure(None, Precision.UNKNOWN, ""),
            id="depth and enqueue time unknown",
        ),
    ],
)
def test_oldest_age(snapshot: QueueSnapshot, expected: Figure) -> None:
    signals = compute_signals([snapshot], window=60.0)
    assert signals.oldest_age == expected
    _check_figure_invariant(signals)


def test_unknown_age_is_never_zero() -> None:
    signals = compute_signals([QueueSnapshot(observed_at=50.0, depth=3)], window=60.0)
    assert signals.oldest_age.value is None
    assert signals.oldest_age.precision is Precision.UNKNOWN


def test_latest_snapshot_fields_pass_through() -> None:
    history = [
        QueueSnapshot(observed_at=10.0, depth=1, in_flight=0, consumers=1),
        QueueSnapshot(observed_at=11.0, depth=7, in_flight=3, consumers=4),
    ]
    signals = compute_signals(history, window=60.0)
    assert (signals.observed_at, signals.depth, signals.in_flight, signals.consumers) == (
        11.0,
        7,
        3,
        4,
    )


# --- rates ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "span"),
    [
        pytest.param(5.0, 5.0, id="5 s window uses the snapshot at t=4"),
        pytest.param(4.5, 4.0, id="window between samples uses the first one inside it"),
        pytest.param(100.0, 9.0, id="window longer than history uses all of it"),
        pytest.param(1.0, 1.0, id="one interval"),
    ],
)
def test_rates_over_the_window(window: float, span: float) -> None:
    signals = compute_signals(_history(10), window=window)
    assert signals.rate_span == span
    assert signals.arrival_rate == Figure(5.0, Precision.EXACT, "counters")
    assert signals.completion_rate == Figure(4.0, Precision.EXACT, "counters")


def test_rates_use_the_earliest_snapshot_inside_the_window() -> None:
    # arrivals: 0 up to t=4, then 10/s: a 5 s window (t=4..9) must see only the 10/s part
    history = [
        QueueSnapshot(
            observed_at=float(t),
            depth=0,
            arrivals_total=0 if t <= 4 else 10 * (t - 4),
            completions_total=0 if t <= 4 else 10 * (t - 4),
        )
        for t in range(10)
    ]
    signals = compute_signals(history, window=5.0)
    assert signals.arrival_rate.value == pytest.approx(50 / 5)
    signals_all = compute_signals(history, window=60.0)
    assert signals_all.arrival_rate.value == pytest.approx(50 / 9)


@pytest.mark.parametrize(
    ("inexact_at", "precision"),
    [
        pytest.param(frozenset(), Precision.EXACT, id="all exact"),
        pytest.param(frozenset({7.0}), Precision.LOWER_BOUND, id="lost track inside window"),
        pytest.param(frozenset({9.0}), Precision.LOWER_BOUND, id="lost track at latest"),
        pytest.param(frozenset({4.0}), Precision.EXACT, id="window base's own interval is outside"),
        pytest.param(frozenset({1.0, 2.0}), Precision.EXACT, id="lost track before window"),
    ],
)
def test_inexact_counts_make_rates_lower_bounds(
    inexact_at: frozenset[float], precision: Precision
) -> None:
    signals = compute_signals(_history(10, inexact_at=inexact_at), window=5.0)
    assert signals.arrival_rate.precision is precision
    assert signals.completion_rate.precision is precision
    assert signals.arrival_rate.value == 5.0
    assert signals.completion_rate.value == 4.0


def test_one_snapshot_gives_unknown_rates() -> None:
    signals = compute_signals(_history(1), window=60.0)
    assert signals.rate_span == 0.0
    assert signals.arrival_rate.precision is Precision.UNKNOWN
    assert signals.arrival_rate.value is None
    assert signals.completion_rate.value is None
    assert signals.time_to_drain.value is None


def test_window_shorter_than_sample_spacing_gives_unknown_rates() -> None:
    signals = compute_signals(_history(10), window=0.5)
    assert signals.arrival_rate.value is None
    assert signals.completion_rate.value is None


@pytest.mark.parametrize(
    ("base", "latest", "arrivals_known", "completions_known"),
    [
        pytest.param((None, None), (None, None), False, False, id="no counters"),
        pytest.param((10, 20), (None, 30), False, True, id="arrivals missing now"),
        pytest.param((None, 20), (15, 30), False, True, id="arrivals missing at base"),
        pytest.param((10, None), (15, 30), True, False, id="completions missing at base"),
    ],
)
def test_missing_counters_give_unknown_rates(
    base: tuple[int | None, int | None],
    latest: tuple[int | None, int | None],
    arrivals_known: bool,
    completions_known: bool,
) -> None:
    history = [
        QueueSnapshot(observed_at=0.0, depth=4, arrivals_total=base[0], completions_total=base[1]),
        QueueSnapshot(
            observed_at=5.0, depth=4, arrivals_total=latest[0], completions_total=latest[1]
        ),
    ]
    signals = compute_signals(history, window=60.0)
    assert (signals.arrival_rate.value is not None) is arrivals_known
    assert (signals.completion_rate.value is not None) is completions_known
    if arrivals_known:
        assert signals.arrival_rate.value == 1.0
    if completions_known:
        assert signals.completion_rate.value == 2.0
    assert signals.time_to_drain.value is None
    _check_figure_invariant(signals)


def test_counter_going_backwards_is_not_an_exact_zero_rate() -> None:
    # a broker restart resets its counters: 500 -> 20 over 10 s says nothing exact about the rate
    history = [
        QueueSnapshot(observed_at=0.0, depth=50, arrivals_total=500, completions_total=480),
        QueueSnapshot(observed_at=10.0, depth=50, arrivals_total=20, completions_total=18),
    ]
    signals = compute_signals(history, window=60.0)
    for rate in (signals.arrival_rate, signals.completion_rate):
        assert rate.precision is not Precision.EXACT, rate


# --- time to drain -------------------------------------------------------------------------------


def _two(depth: int | None, arrivals: int | None, completions: int | None) -> list[QueueSnapshot]:
    """Two snapshots 10 s apart: ``arrivals`` and ``completions`` happen in between."""
    return [
        QueueSnapshot(observed_at=0.0, depth=depth, arrivals_total=0, completions_total=0),
        QueueSnapshot(
            observed_at=10.0,
            depth=depth,
            arrivals_total=arrivals,
            completions_total=completions,
        ),
    ]


@pytest.mark.parametrize(
    ("depth", "arrivals", "completions", "expected"),
    [
        pytest.param(100, 10, 30, Figure(50.0, Precision.ESTIMATE, "rates"), id="mu > lambda"),
        pytest.param(100, 20, 20, Figure(math.inf, Precision.ESTIMATE, "rates"), id="mu == lambda"),
        pytest.param(100, 30, 10, Figure(math.inf, Precision.ESTIMATE, "rates"), id="mu < lambda"),
        pytest.param(100, 0, 0, Figure(math.inf, Precision.ESTIMATE, "rates"), id="nothing moves"),
        pytest.param(0, 30, 10, Figure(0.0, Precision.EXACT, "empty"), id="empty"),
        pytest.param(100, None, 30, Figure(None, Precision.UNKNOWN, "rates"), id="lambda unknown"),
        pytest.param(100, 10, None, Figure(None, Precision.UNKNOWN, "rates"), id="mu unknown"),
        pytest.param(None, 10, 30, Figure(None, Precision.UNKNOWN, "rates"), id="depth unknown"),
    ],
)
def test_time_to_drain(
    depth: int | None, arrivals: int | None, completions: int | None, expected: Figure
) -> None:
    signals = compute_signals(_two(depth, arrivals, completions), window=60.0)
    assert signals.time_to_drain == expected
    _check_figure_invariant(signals)


def test_time_to_drain_with_window_rates() -> None:
    # lambda 5/s, mu 4/s from the 10-snapshot history: backlog grows, never drains
    signals = compute_signals(_history(10, depth=40), window=5.0)
    assert signals.time_to_drain.value == math.inf
    # mu 6/s, lambda 2/s, depth 40 -> 40 / 4 = 10 s
    faster = compute_signals(
        _history(10, arrivals_per_s=2, completions_per_s=6, depth=40), window=5.0
    )
    assert faster.time_to_drain.value == pytest.approx(10.0)


def test_time_to_drain_unknown_with_one_snapshot_even_if_jobs_wait() -> None:
    signals = compute_signals([QueueSnapshot(observed_at=0.0, depth=12)], window=60.0)
    assert signals.time_to_drain == Figure(None, Precision.UNKNOWN, "rates")


# --- counters that lag the sample (RabbitMQ management totals) ---------------------------------


def test_lagging_totals_give_rates_over_their_own_times() -> None:
    # totals refreshed every 5 s at 10 jobs/s, sampled every second
    history = [
        QueueSnapshot(
            observed_at=float(t),
            depth=7,
            arrivals_total=10 * 5 * (t // 5),
            completions_total=10 * 5 * (t // 5),
            counts_observed_at=5.0 * (t // 5),
        )
        for t in range(23)
    ]
    signals = compute_signals(history, window=60.0)
    assert signals.arrival_rate.value == pytest.approx(10.0)
    assert signals.rate_span == 20.0


def test_the_estimate_carries_lagging_totals_forward_to_the_depth() -> None:
    # 10 jobs/s since t=0, none taken; the totals were last refreshed at t=20 (200 jobs), the
    # depth is read at t=23 (230 jobs): the oldest waiting job is the first, from t=0
    arrivals = ArrivalHistory()
    for t in (0.0, 5.0, 10.0, 15.0, 20.0):
        arrivals.add(t, int(10 * t))
    latest = QueueSnapshot(observed_at=23.0, depth=230, arrivals_total=200, counts_observed_at=20.0)
    signals = compute_signals([latest], window=60.0, arrivals=arrivals)
    assert signals.oldest_age.precision is Precision.ESTIMATE
    assert signals.oldest_age.value == pytest.approx(23.0, abs=0.1)


def test_rates_start_from_the_first_snapshot_with_counts() -> None:
    # a broker whose counters were unreadable for a while (RabbitMQ's management API down)
    history = [
        QueueSnapshot(observed_at=0.0, depth=4),
        QueueSnapshot(observed_at=5.0, depth=4, arrivals_total=10, completions_total=0),
        QueueSnapshot(observed_at=10.0, depth=4, arrivals_total=30, completions_total=5),
    ]
    signals = compute_signals(history, window=60.0)
    assert (signals.arrival_rate.value, signals.completion_rate.value) == (4.0, 1.0)
    assert signals.rate_span == 5.0


@pytest.mark.parametrize(
    ("stamped", "history_start", "expected"),
    [
        # the broker's estimate (RabbitMQ's head while messages are in flight) gives way to the
        # one interpolated from live counts, when that reaches the job
        pytest.param(Precision.ESTIMATE, 0.0, Figure(19.5, Precision.ESTIMATE, "arrival-history")),
        # ...but not to a lower bound, and an exact or lower-bound stamp stands
        pytest.param(Precision.ESTIMATE, 15.0, Figure(26.0, Precision.ESTIMATE, "head")),
        pytest.param(Precision.EXACT, 0.0, Figure(26.0, Precision.EXACT, "head")),
        pytest.param(Precision.LOWER_BOUND, 0.0, Figure(26.0, Precision.LOWER_BOUND, "head")),
    ],
)
def test_a_stamped_estimate_gives_way_to_the_arrival_history(
    stamped: Precision, history_start: float, expected: Figure
) -> None:
    # 1 job/s since t=0: at t=30, 20 wait, the oldest (the 11th) arrived at t=10.5
    arrivals = ArrivalHistory()
    for t in range(int(history_start), 31):
        arrivals.add(float(t), t)
    snapshot = QueueSnapshot(
        observed_at=30.0,
        depth=20,
        oldest_enqueued_at=4.0,
        oldest_precision=stamped,
        oldest_source="head",
        arrivals_total=30,
    )
    age = compute_signals([snapshot], window=60.0, arrivals=arrivals).oldest_age
    assert age.source == expected.source and age.precision is expected.precision
    assert age.value == pytest.approx(expected.value, abs=0.6)


# --- the flow rate: arrivals before the oldest waiting job ---------------------------------------


def _with_oldest(
    history: list[QueueSnapshot], enqueued_at: float | None, **changes: object
) -> list[QueueSnapshot]:
    """``history`` whose newest snapshot has its oldest job enqueued at ``enqueued_at``."""
    oldest: dict[str, object] = {
        "oldest_enqueued_at": enqueued_at,
        "oldest_precision": Precision.EXACT if enqueued_at is not None else Precision.UNKNOWN,
        "oldest_source": "payload" if enqueued_at is not None else "",
    }
    latest = replace(history[-1], **(oldest | changes))  # type: ignore[arg-type]
    return [*history[:-1], latest]


def test_flow_rate_is_the_window_rate_under_steady_arrivals() -> None:
    history = _with_oldest(_history(61, arrivals_per_s=5), enqueued_at=58.0)
    signals = compute_signals(history, 60.0)
    assert signals.flow_rate == pytest.approx(5.0)
    assert signals.arrival_rate.value == pytest.approx(5.0)


def test_flow_rate_leaves_out_a_burst_that_came_with_the_oldest_job() -> None:
    # 2 jobs/s, then 5,000 at once at t=20.0 (seen by the snapshot at t=20), oldest waiting
    # job enqueued then: the window's rate is inflated by the burst, the flow before it is not
    history = [
        QueueSnapshot(
            observed_at=float(t),
            depth=100,
            arrivals_total=2 * t + (5000 if t >= 20 else 0),
            completions_total=0,
            counts_source="counters",
        )
        for t in range(61)
    ]
    # a deque, as the sampler keeps its history
    signals = compute_signals(deque(_with_oldest(history, enqueued_at=20.0)), 60.0)
    assert signals.arrival_rate.value == pytest.approx(2.0 + 5000 / 60)
    assert signals.flow_rate == pytest.approx(2.0)  # counted from t=0 to t=19


@pytest.mark.parametrize(
    ("enqueued_at", "changes", "inexact_at"),
    [
        pytest.param(None, {}, frozenset(), id="age unknown"),
        pytest.param(
            30.0, {"oldest_precision": Precision.LOWER_BOUND}, frozenset(), id="age a lower bound"
        ),
        pytest.param(30.0, {"depth": 0}, frozenset(), id="nothing waits"),
        pytest.param(-10.0, {}, frozenset(), id="oldest job older than the window"),
        pytest.param(4.0, {}, frozenset(), id="under a tenth of the window before it"),
        pytest.param(30.0, {}, frozenset({10.0}), id="inexact counts before it"),
    ],
)
def test_flow_rate_unknown_where_the_history_cannot_tell(
    enqueued_at: float | None, changes: dict[str, object], inexact_at: frozenset[float]
) -> None:
    history = _with_oldest(_history(61, inexact_at=inexact_at), enqueued_at, **changes)
    assert compute_signals(history, 60.0).flow_rate is None


def test_flow_rate_checks_every_snapshot_up_to_the_last_counted_one() -> None:
    # a sample without counts (a broker's statistics down) before the oldest job came: the flow
    # still runs to the last counted snapshot, and that one's counts must be exact too
    history = _history(61)
    history[10] = replace(history[10], arrivals_total=None, completions_total=None)
    assert compute_signals(_with_oldest(history, 30.0), 60.0).flow_rate == pytest.approx(5.0)
    history[29] = replace(history[29], counts_exact=False)
    assert compute_signals(_with_oldest(history, 30.0), 60.0).flow_rate is None


def test_the_workers_figures_reach_probe_with_their_precision_source_and_age() -> None:
    """The snapshot's slots and readings go through the signals to probe's report; a figure
    the format does not show is unknown there, with no source."""
    from scaler.policy import PolicyState, decide
    from scaler.probe import report
    from scaler.spec import parse_metadata

    # a Sidekiq 7 process of several capsules: its threads an estimate; its processes read as
    # every format's by default, exact
    stale, shared = Reading(Precision.ESTIMATE, "sidekiq-work", 2.5), Reading(Precision.ESTIMATE)
    readings = WorkerReadings(in_flight=stale, slots=shared)
    snapshot = QueueSnapshot(
        observed_at=10.0, depth=3, in_flight=12, consumers=2, slots=16, readings=readings
    )
    signals = compute_signals((snapshot,), 60.0)
    assert (signals.slots, signals.readings) == (16, readings)
    spec = parse_metadata(
        {"url": "redis://localhost", "queue": "q", "format": "sidekiq", "workerThroughput": "1"}
    )
    decision, _ = decide(signals, spec, 10.0, PolicyState())
    shown = report(spec, signals, decision, 1)
    assert (shown["in_flight"], shown["consumers"], shown["slots"]) == (12, 2, 16)
    assert shown["in_flight_precision"] == "estimate"
    assert shown["in_flight_source"] == "sidekiq-work"
    assert shown["in_flight_age_seconds"] == 2.5
    assert (shown["slots_precision"], shown["consumers_precision"]) == ("estimate", "exact")
    assert shown["utilisation"] == 0.75  # 12 jobs in 16 threads
    bare = compute_signals((QueueSnapshot(observed_at=10.0, depth=3),), 60.0)
    shown = report(spec, bare, decide(bare, spec, 10.0, PolicyState())[0], 1)
    assert (shown["slots"], shown["slots_precision"], shown["slots_source"]) == (
        None,
        "unknown",
        None,
    )


def test_recent_rate_counts_from_where_the_counts_became_exact_again() -> None:
    # a list empty at the samples until t=20 (the marker lost count), then 5,000 jobs at once
    # and 2/s after: the window's rate is a lower bound inflated by the burst, and no snapshot
    # before the oldest job is exact; the 40 s counted exactly since say 2/s (the burst scenario
    # in a list format counted its 5,000 jobs as a rate without it: 1.8x the cheapest's cost)
    history = [
        QueueSnapshot(
            observed_at=float(t),
            depth=0 if t < 20 else 3000,
            arrivals_total=(t if t < 20 else 5020 + 2 * (t - 20)),
            completions_total=0,
            counts_exact=t > 20,
            counts_source="list-marker",
        )
        for t in range(61)
    ]
    signals = compute_signals(_with_oldest(history, 20.0), 60.0)
    assert signals.arrival_rate.precision is Precision.LOWER_BOUND
    assert signals.flow_rate is None
    assert signals.recent_rate == pytest.approx(2.0)
    exact = compute_signals(_with_oldest(_history(61), 30.0), 60.0)
    assert exact.recent_rate is None  # every count exact: the window's rate says it


def _counted(arrivals: list[int], *, exact: bool = True) -> list[QueueSnapshot]:
    """Snapshots one second apart from t=0 with these arrival totals."""
    return [
        QueueSnapshot(
            observed_at=float(t),
            depth=5,
            arrivals_total=total,
            completions_total=0,
            counts_exact=exact,
            counts_source="counters",
        )
        for t, total in enumerate(arrivals)
    ]


def test_fast_rate_is_the_median_rate_of_the_newest_quarter_window_at_most_its_mean() -> None:
    # 10/s for 50 s, then 40/s for 10 s: the window's rate is 15/s, the newest 15 s (a quarter
    # of 60) have 10 intervals at 40/s and 5 at 10/s, median 40, mean 450 / 15 = 30
    totals = [10 * t if t <= 50 else 500 + 40 * (t - 50) for t in range(61)]
    signals = compute_signals(_counted(totals), 60.0)
    assert signals.arrival_rate.value == pytest.approx(900 / 60)
    assert signals.fast_rate == pytest.approx(30.0)
    assert signals.fast_span == pytest.approx(15.0)
    # once the quarter is all at 40/s, both are 40
    longer = [10 * t if t <= 50 else 500 + 40 * (t - 50) for t in range(71)]
    assert compute_signals(_counted(longer), 60.0).fast_rate == pytest.approx(40.0)


def test_a_slow_flow_read_every_second_is_not_a_fast_rate_of_one_job_a_second() -> None:
    # about 0.25 jobs/s read every second, and 8 jobs in the newest 15 s, one in each of 8
    # intervals (broad-253): the median interval is 1/s, four times the flow, which read as a
    # step to 5.5 workers where 1.7 kept up; the quarter's mean, 8 / 15, bounds it
    totals = [t // 4 for t in range(46)]
    for got in (1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1):
        totals.append(totals[-1] + got)
    signals = compute_signals(_counted(totals), 60.0)
    assert signals.fast_rate == pytest.approx(8 / 15)
    assert signals.fast_span == pytest.approx(15.0)


def test_fast_rate_leaves_out_jobs_that_came_at_once() -> None:
    # 2/s, and 3,000 jobs at t=55: the window's rate counts them, the median interval does not
    totals = [2 * t + (3000 if t >= 55 else 0) for t in range(61)]
    signals = compute_signals(_counted(totals), 60.0)
    assert signals.arrival_rate.value == pytest.approx(3120 / 60)
    assert signals.fast_rate == pytest.approx(2.0)


def test_fast_rate_unknown_on_inexact_counts_or_too_few_samples() -> None:
    assert (
        compute_signals(_counted([2 * t for t in range(61)], exact=False), 60.0).fast_rate is None
    )
    sparse = [replace(s, observed_at=s.observed_at * 15) for s in _counted([0, 30, 60, 90, 120])]
    signals = compute_signals(sparse, 60.0)  # one interval inside the newest 15 s
    assert (signals.fast_rate, signals.fast_span) == (None, 0.0)
