"""The pace of a shared sampler: the live triggers' fastest interval and longest window, and the
backoff of a failing source."""

from __future__ import annotations

from scaler.sample_schedule import BACKOFF_CAP, Demand, Demands, pause_after

SLOW = Demand(interval=600.0, window=60.0)
FAST = Demand(interval=1.0, window=30.0)


def test_the_fastest_interval_and_longest_window_of_the_live_demands_rule() -> None:
    demands = Demands(SLOW, now=0.0)
    demands.ask(FAST, now=1.0)
    assert demands.interval(2.0) == 1.0
    assert demands.window(2.0) == 60.0
    demands.ask(Demand(interval=5.0, window=3600.0), now=3.0)
    assert demands.interval(4.0) == 1.0
    assert demands.window(4.0) == 3600.0


def test_a_demand_not_asked_for_its_lifetime_stops_setting_the_pace() -> None:
    demands = Demands(SLOW, now=0.0, live_for=10.0)
    demands.ask(FAST, now=0.0)
    assert demands.interval(10.0) == 1.0  # live for max(10 s, 3 x 1 s)
    assert demands.interval(10.5) == 600.0  # gone: the slow one (live 1800 s) rules again
    assert len(demands) == 1
    demands.ask(FAST, now=11.0)  # back: at once
    assert demands.interval(11.0) == 1.0


def test_a_slow_demand_lives_three_of_its_intervals() -> None:
    demands = Demands(Demand(interval=100.0, window=60.0), now=0.0, live_for=10.0)
    demands.ask(FAST, now=0.0)
    demands.ask(FAST, now=290.0)
    assert demands.window(299.0) == 60.0  # the slow one, asked at 0, lives until 300
    assert demands.window(301.0) == 30.0


def test_when_no_demand_is_live_the_last_asked_one_stays() -> None:
    demands = Demands(SLOW, now=0.0, live_for=10.0)
    demands.ask(FAST, now=5.0)
    assert demands.live(10_000.0) == [FAST]
    assert demands.interval(10_000.0) == 1.0


def test_the_pause_doubles_per_failure_up_to_the_cap_and_is_the_interval_after_a_success() -> None:
    assert [pause_after(1.0, n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert pause_after(0.25, 3) == 2.0
    assert pause_after(1.0, 10_000) == BACKOFF_CAP  # no overflow after days of failures


def test_the_backoff_never_samples_faster_than_the_interval() -> None:
    assert pause_after(600.0, 0) == 600.0
    assert pause_after(600.0, 5) == 600.0  # longer than the cap already
