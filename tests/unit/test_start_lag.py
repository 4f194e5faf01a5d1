"""How long asked-for workers take to show, and the flow's recent peak."""

from __future__ import annotations

from scaler.start_lag import (
    FLOW_BUCKET,
    FLOW_MEMORY,
    NO_LAG,
    learn_lag,
    remember_flow,
    slow_start,
)


def test_a_start_is_timed_from_the_first_answer_that_asked_for_more() -> None:
    lag = learn_lag(NO_LAG, consumers=6, desired=8, now=100.0)
    assert (lag.asked_at, lag.asked_for, lag.seen_then) == (100.0, 8, 6)
    lag = learn_lag(lag, consumers=6, desired=9, now=130.0)  # still waiting: the first ask counts
    assert (lag.asked_at, lag.asked_for, lag.shortest) == (100.0, 9, None)
    lag = learn_lag(lag, consumers=7, desired=9, now=280.0)
    assert (lag.asked_at, lag.shortest) == (None, 180.0)


def test_an_answer_that_falls_back_before_its_workers_show_is_still_timed_from() -> None:
    # the pods it started still boot: timing from a later answer would read them as quick
    lag = learn_lag(NO_LAG, consumers=6, desired=7, now=100.0)
    lag = learn_lag(lag, consumers=6, desired=6, now=115.0)
    lag = learn_lag(lag, consumers=6, desired=7, now=250.0)
    lag = learn_lag(lag, consumers=7, desired=7, now=280.0)
    assert lag.shortest == 180.0


def test_the_late_pods_of_a_timed_answer_do_not_time_a_new_one() -> None:
    lag = learn_lag(NO_LAG, consumers=6, desired=9, now=0.0)
    lag = learn_lag(lag, consumers=7, desired=9, now=180.0)  # the first of three shows
    assert (lag.shortest, lag.filled_to, lag.asked_at) == (180.0, 9, None)
    lag = learn_lag(lag, consumers=9, desired=9, now=195.0)  # the other two, 15 s later
    assert (lag.shortest, lag.filled_to, lag.asked_at) == (180.0, 0, None)
    # a later answer past them is timed anew, and the shortest start counts
    lag = learn_lag(lag, consumers=9, desired=12, now=600.0)
    lag = learn_lag(lag, consumers=10, desired=12, now=760.0)
    assert lag.shortest == 160.0


def test_no_start_is_timed_where_the_broker_shows_no_workers_or_the_hpa_would_not_scale() -> None:
    assert learn_lag(NO_LAG, consumers=None, desired=5, now=0.0) == NO_LAG
    # 33 asked of 32 is within the HPA's 10% tolerance: no pod starts
    assert learn_lag(NO_LAG, consumers=32, desired=33, now=0.0).asked_at is None
    assert learn_lag(NO_LAG, consumers=32, desired=36, now=0.0).asked_at == 0.0


def test_the_flow_peak_is_the_largest_need_of_the_last_quarter_hour() -> None:
    lag = remember_flow(NO_LAG, 5.3, now=0.0)
    lag = remember_flow(lag, 0.0, now=FLOW_BUCKET)
    lag = remember_flow(lag, 1.0, now=FLOW_MEMORY - 1)
    assert lag.peak_flow == 5.3
    lag = remember_flow(lag, 0.0, now=FLOW_MEMORY + 1)  # its span is over a quarter hour old
    assert lag.peak_flow == 1.0
    assert remember_flow(lag, None, now=FLOW_MEMORY + 2) == lag


def test_a_start_is_slow_once_the_shortest_timed_is_longer_than_the_share_of_the_target() -> None:
    assert not slow_start(NO_LAG, target_age=15.0)
    timed = learn_lag(learn_lag(NO_LAG, 6, 7, 0.0), 7, 7, 175.0)
    assert slow_start(timed, target_age=15.0)
    assert not slow_start(timed, target_age=300.0)
