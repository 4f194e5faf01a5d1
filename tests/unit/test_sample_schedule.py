"""The pace of a shared sampler: the live triggers' fastest interval and longest window, and the
backoff of a failing source."""

from __future__ import annotations

import functools

import pytest

from brokers.base import QueueSnapshot
from scaler.sample_schedule import (
    BACKOFF_CAP,
    BUDGET_MAX_INTERVAL,
    Demand,
    Demands,
    Urgency,
    Wanted,
    allocate,
    changed,
    flowing,
    next_interval,
    pause_after,
    urgency,
)

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


# -- adaptive intervals -------------------------------------------------------------------------


def snapshot(
    depth: int | None,
    *,
    in_flight: int | None = None,
    consumers: int | None = None,
    paused: bool | None = None,
) -> QueueSnapshot:
    return QueueSnapshot(
        observed_at=0.0, depth=depth, in_flight=in_flight, consumers=consumers, paused=paused
    )


def test_a_queue_changes_when_work_comes_or_goes_or_its_depth_moves_by_a_tenth() -> None:
    assert changed(None, snapshot(0))  # the first sample
    assert changed(snapshot(0), snapshot(1))  # work appeared
    assert changed(snapshot(3), snapshot(0))  # and went
    assert changed(snapshot(0, in_flight=0), snapshot(0, in_flight=2))  # jobs started
    assert changed(snapshot(100), snapshot(112))  # 12 >= 10% of 112
    assert not changed(snapshot(100), snapshot(111))  # 11 < 11.1
    assert not changed(snapshot(5), snapshot(6))  # fewer than CHANGE_MIN jobs
    assert changed(snapshot(5), snapshot(7))
    assert changed(snapshot(5, consumers=2), snapshot(5, consumers=3))
    assert changed(snapshot(5, paused=False), snapshot(5, paused=True))
    assert changed(snapshot(None), snapshot(0))  # known again
    assert not changed(snapshot(0), snapshot(0))


def level(**given: object) -> Urgency:
    facts: dict[str, object] = {
        "watched": False,
        "age": None,
        "target_age": 60.0,
        "asked_after_pause": False,
        "moved": False,
        "busy": False,
    }
    facts.update(given)
    return urgency(**facts)  # type: ignore[arg-type]


def test_urgency_ranks_watched_over_near_target_over_asked_over_changing_over_steady() -> None:
    assert level() is Urgency.IDLE
    assert level(busy=True) is Urgency.STEADY
    assert level(busy=True, moved=True) is Urgency.CHANGING
    assert level(moved=True, asked_after_pause=True) is Urgency.ASKED
    assert level(age=29.9, busy=True) is Urgency.STEADY  # under half of the 60 s target
    assert level(age=30.0, busy=True) is Urgency.NEAR_TARGET
    assert level(age=300.0, busy=True) is Urgency.NEAR_TARGET  # over it
    assert level(age=300.0, target_age=None) is Urgency.IDLE  # no target known: not near one
    assert level(age=300.0, watched=True) is Urgency.WATCHED
    # near its target, a queue is read on KEDA's asks and relaxed in the background
    assert [u.fast for u in Urgency] == [False, False, True, True, False, True]
    assert [u.read_on_ask for u in Urgency] == [False, False, False, False, True, False]


def test_an_idle_queue_slows_down_by_doubling_and_is_fast_again_after_one_urgent_sample() -> None:
    interval, seen = 1.0, []
    for _ in range(6):
        interval = next_interval(interval, Urgency.IDLE, fast=1.0, slow=15.0)
        seen.append(interval)
    assert seen == [2.0, 4.0, 8.0, 15.0, 15.0, 15.0]
    assert next_interval(15.0, Urgency.CHANGING, fast=1.0, slow=15.0) == 1.0
    assert next_interval(15.0, Urgency.STEADY, fast=1.0, slow=15.0) == 15.0
    # a slow bound below the trigger's own interval is that interval: no adaptation
    assert next_interval(30.0, Urgency.IDLE, fast=30.0, slow=15.0) == 30.0
    # the fast interval is a floor even when the relaxed one was shorter (a slower trigger now)
    assert next_interval(1.0, Urgency.IDLE, fast=5.0, slow=15.0) == 5.0


# -- a broker's budget --------------------------------------------------------------------------


def rate(intervals: list[float]) -> float:
    return sum(1.0 / x for x in intervals)


def test_within_the_budget_every_queue_keeps_the_interval_it_wants() -> None:
    wanted = [Wanted(1.0, 15.0, Urgency.CHANGING)] * 10 + [Wanted(15.0, 15.0, Urgency.IDLE)] * 90
    assert allocate(wanted, samples_per_second=20.0) == [w.interval for w in wanted]


def test_the_budget_slows_the_idle_queues_first_then_the_steady_ones() -> None:
    hot = [Wanted(1.0, 15.0, Urgency.NEAR_TARGET)] * 5  # 5 samples/s
    steady = [Wanted(2.0, 15.0, Urgency.STEADY)] * 10  # 5 samples/s
    idle = [Wanted(4.0, 15.0, Urgency.IDLE)] * 20  # 5 samples/s
    intervals = allocate([*hot, *steady, *idle], samples_per_second=12.0)
    assert rate(intervals) == pytest.approx(12.0, rel=1e-6)
    assert intervals[:5] == [1.0] * 5  # the urgent queues untouched
    assert intervals[5:15] == [2.0] * 10  # steady ones untouched: stretching the idle was enough
    assert intervals[15:] == pytest.approx([10.0] * 20)  # 20 / 10 s = 2 samples/s left for them

    intervals = allocate([*hot, *steady, *idle], samples_per_second=7.0)
    assert rate(intervals) == pytest.approx(7.0, rel=1e-6)
    assert intervals[15:] == [15.0] * 20  # idle at the slow bound: 1.33 samples/s
    assert intervals[5:15] == pytest.approx([10 / (7 - 5 - 20 / 15)] * 10)  # steady next
    assert intervals[:5] == [1.0] * 5


def test_past_every_slow_bound_the_budget_stretches_up_to_its_ceiling() -> None:
    wanted = [Wanted(1.0, 15.0, Urgency.WATCHED)] * 100 + [Wanted(15.0, 15.0, Urgency.IDLE)] * 900
    intervals = allocate(wanted, samples_per_second=10.0)
    assert rate(intervals) == pytest.approx(10.0, rel=1e-6)
    assert intervals[100:] == [BUDGET_MAX_INTERVAL] * 900  # the idle ones first, to the ceiling
    assert all(15.0 <= x <= BUDGET_MAX_INTERVAL for x in intervals[:100])  # then the watched
    # a budget too small for everyone at the ceiling leaves them there
    assert allocate(wanted, samples_per_second=1.0) == [BUDGET_MAX_INTERVAL] * 1000


def test_the_pace_worked_out_once_still_follows_a_new_demand_and_an_expiry_at_once() -> None:
    demands = Demands(SLOW, now=0.0, live_for=10.0)
    for second in range(5):  # KEDA asking again and again: the same pace
        demands.ask(SLOW, now=float(second))
        assert demands.interval(float(second)) == 600.0
    demands.ask(FAST, now=5.0)  # a faster trigger, while the pace was cached
    assert demands.interval(5.0) == 1.0
    assert demands.interval(15.0) == 1.0  # FAST lives until 15 ...
    assert demands.interval(15.001) == 600.0  # ... and not a moment longer


def test_a_steady_queue_keeps_four_samples_in_its_rate_window_and_an_idle_one_relaxes_fully() -> (
    None
):
    # a backlog draining steadily under a 5 s rateWindow: at most 1.25 s apart, so the rates
    # (and a knee learned from them) still see the window; an empty queue goes to the slow bound
    steady, idle = 0.25, 0.25
    for _ in range(10):
        steady = next_interval(steady, Urgency.STEADY, fast=0.25, slow=30.0, window=5.0)
        idle = next_interval(idle, Urgency.IDLE, fast=0.25, slow=30.0, window=5.0)
    assert (steady, idle) == (1.25, 30.0)
    # with KEDA-like defaults (60 s window) a steady queue is read every 15 s, not 30 s
    assert next_interval(30.0, Urgency.STEADY, fast=1.0, slow=30.0, window=60.0) == 15.0


def test_a_still_queue_relaxes_to_the_slow_bound_but_not_past_its_target() -> None:
    """Steady with work flowing: a quarter of the window; nothing moved at all: the slow bound,
    but no later than the moment its oldest job is near the target; near it: the window's."""
    steady = functools.partial(next_interval, 30.0, Urgency.STEADY, 1.0, 30.0, 60.0)
    assert steady(flowing=True) == 15.0
    assert steady(flowing=False) == 30.0
    assert steady(flowing=False, until_near=12.5) == 12.5
    assert steady(flowing=False, until_near=0.2) == 1.0  # never below the fast interval
    assert next_interval(30.0, Urgency.NEAR_TARGET, 1.0, 30.0, 60.0) == 15.0
    assert next_interval(1.0, Urgency.NEAR_TARGET, 1.0, 30.0, 60.0) == 2.0  # relaxed


def test_work_flows_where_jobs_run_arrive_or_finish_or_the_counts_are_unknown() -> None:
    def counted(arrivals: int | None, completions: int | None, running: int = 0) -> QueueSnapshot:
        return QueueSnapshot(
            observed_at=0.0,
            depth=3,
            in_flight=running,
            arrivals_total=arrivals,
            completions_total=completions,
        )

    assert not flowing(counted(5, 2), counted(5, 2))
    assert flowing(counted(5, 2), counted(6, 2))
    assert flowing(counted(5, 2), counted(5, 3))
    assert flowing(counted(5, 2), counted(5, 2, running=1))
    assert flowing(counted(None, None), counted(None, None))
    assert flowing(None, counted(5, 2))


def test_the_slow_bound_is_the_shortest_a_live_trigger_asks_the_servers_for_the_others() -> None:
    demands = Demands(Demand(1.0, 60.0, slow=10.0), now=0.0)
    assert demands.slow(0.0, default=30.0) == 10.0
    assert demands.slow(0.0, default=5.0) == 10.0  # its own bound, whatever the server's
    demands.ask(Demand(1.0, 60.0), now=1.0)  # a trigger without one: the server's
    assert demands.slow(1.0, default=30.0) == 10.0
    assert demands.slow(1.0, default=5.0) == 5.0
    assert demands.slow(1.0, default=None) is None  # the server reads it fast always
    later = 1.0 + demands.live_for + 1.0  # the trigger that named 10 s stopped asking
    assert demands.slow(later, default=30.0) == 30.0
    demands.ask(Demand(1.0, 60.0, slow=20.0), now=later)  # a new one names its own again
    assert demands.slow(later, default=30.0) == 20.0
