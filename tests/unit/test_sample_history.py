"""The arrival history a queue's samples feed (scaler.sample_history): where it begins."""

from __future__ import annotations

from brokers.base import QueueSnapshot
from scaler.sample_history import LAGGING_TOTALS_WAIT, SampleHistory


def rabbit(at: float, arrived: int, depth: int, done: int = 0) -> QueueSnapshot:
    """A RabbitMQ sample: live depth, the management's totals counted a second earlier."""
    return QueueSnapshot(
        observed_at=at,
        depth=depth,
        in_flight=0,
        arrivals_total=arrived,
        completions_total=done,
        consumers=0,
        counts_observed_at=at - 1.0,
    )


def add(history: SampleHistory, snapshot: QueueSnapshot) -> None:
    history.append(snapshot, window=60.0, interval=1.0)


def test_the_history_begins_once_the_broker_s_totals_count_the_jobs_it_holds() -> None:
    # six jobs wait in a new queue whose statistics show one publish, then all six
    history = SampleHistory()
    add(history, rabbit(100.0, arrived=1, depth=6))
    add(history, rabbit(101.0, arrived=1, depth=6))
    assert len(history.arrivals) == 0
    add(history, rabbit(102.0, arrived=6, depth=6))
    assert history.arrivals.points(10) == [(101.0, 6)]
    # every waiting job came no later than the history's start: a lower bound, not an estimate
    estimate = history.arrivals.enqueue_time(arrivals_total=6, depth=6)
    assert estimate is not None and estimate.precision.value == "lower-bound"


def test_totals_that_never_catch_up_begin_the_history_after_the_wait() -> None:
    # after a node restart the totals start again from 0 beside a backlog of 1,000
    history = SampleHistory()
    add(history, rabbit(100.0, arrived=3, depth=1000))
    add(history, rabbit(100.0 + LAGGING_TOTALS_WAIT - 1, arrived=5, depth=1000))
    assert len(history.arrivals) == 0
    add(history, rabbit(100.0 + LAGGING_TOTALS_WAIT, arrived=8, depth=1000))
    assert len(history.arrivals) == 1


def test_totals_kept_by_the_adapter_start_the_history_at_once() -> None:
    # a list marker's totals count from the first sample: only their differences mean anything
    history = SampleHistory()
    add(history, QueueSnapshot(observed_at=100.0, depth=500, arrivals_total=0, completions_total=0))
    assert history.arrivals.points(10) == [(100.0, 0)]
