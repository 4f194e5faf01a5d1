"""The arrival-history age estimate, on histories with known arrival times."""

from __future__ import annotations

import pytest

from brokers.base import Precision
from scaler.arrival_history import ArrivalHistory


def steady(
    rate: float, seconds: int, interval: float = 1.0, start: float = 1000.0
) -> ArrivalHistory:
    """Arrivals at ``rate`` per second since ``start``, sampled every ``interval``."""
    history = ArrivalHistory()
    steps = int(seconds / interval)
    for i in range(steps + 1):
        t = start + i * interval
        history.add(t, int(rate * (t - start)))
    return history


def test_oldest_of_a_fifo_backlog_is_found_by_its_arrival_number() -> None:
    history = steady(rate=10.0, seconds=300)  # 3000 arrivals by t=1300
    # 500 still wait: the oldest is arrival 2501, which came at about t = 1000 + 250
    estimate = history.enqueue_time(arrivals_total=3000, depth=500)
    assert estimate is not None
    assert estimate.precision is Precision.ESTIMATE
    assert estimate.enqueued_at == pytest.approx(1250.0, abs=1.0)


def test_interpolates_inside_a_sample_interval() -> None:
    history = ArrivalHistory()
    history.add(0.0, 0)
    history.add(10.0, 100)  # 100 jobs spread over 10 s
    estimate = history.enqueue_time(arrivals_total=100, depth=50)  # oldest is arrival 51
    assert estimate is not None
    assert estimate.enqueued_at == pytest.approx(5.05, abs=0.01)


def test_a_job_older_than_the_history_gives_a_lower_bound() -> None:
    history = ArrivalHistory()
    history.add(100.0, 0)
    history.add(160.0, 30)
    # 50 wait but only 30 arrived since the history began: the oldest predates it
    estimate = history.enqueue_time(arrivals_total=30, depth=50)
    assert estimate is not None
    assert estimate.precision is Precision.LOWER_BOUND
    assert estimate.enqueued_at == 100.0


def test_nothing_waiting_or_no_history_gives_nothing() -> None:
    assert ArrivalHistory().enqueue_time(arrivals_total=10, depth=3) is None
    assert steady(rate=1.0, seconds=10).enqueue_time(arrivals_total=10, depth=0) is None


def test_a_counter_reset_starts_a_new_history() -> None:
    history = steady(rate=5.0, seconds=100)
    history.add(1101.0, 3)  # the count went down: a restart
    assert len(history) == 1
    estimate = history.enqueue_time(arrivals_total=3, depth=3)
    assert estimate is not None and estimate.precision is Precision.LOWER_BOUND


def test_thinning_keeps_hours_in_few_points_within_two_percent() -> None:
    history = steady(rate=2.0, seconds=4 * 3600)  # four hours at one sample a second
    assert len(history) < 600
    assert history.span == pytest.approx(4 * 3600, abs=1)
    now_count = int(2.0 * 4 * 3600)
    for age in (30.0, 300.0, 3000.0, 3 * 3600.0):
        depth = int(2.0 * age)  # jobs that arrived in the last `age` seconds still wait
        estimate = history.enqueue_time(now_count, depth)
        assert estimate is not None
        true_time = 1000.0 + 4 * 3600 - age
        assert estimate.enqueued_at == pytest.approx(true_time, abs=1.0 + 0.02 * age), age


def test_repeated_or_earlier_times_are_ignored() -> None:
    history = ArrivalHistory()
    history.add(10.0, 5)
    history.add(10.0, 6)
    history.add(9.0, 7)
    assert len(history) == 1


def test_recent_rate_spans_ten_seconds_so_a_repeated_count_is_not_a_stop() -> None:
    history = ArrivalHistory()
    for t, count in ((0.0, 0), (5.0, 50), (10.0, 100), (10.5, 100)):  # 10.5: refreshed late
        history.add(t, count)
    assert history.recent_rate() == pytest.approx(100 / 10.5)
    assert ArrivalHistory().recent_rate() == 0.0
