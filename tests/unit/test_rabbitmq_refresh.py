"""When the management figures were refreshed, told from replies every second."""

from __future__ import annotations

import pytest

from brokers.rabbitmq_management import DEFAULT_REFRESH_BOUND, RefreshClock


def replies(period: float, phase: float, seconds: int) -> list[tuple[float, dict[str, int]]]:
    """Replies at t = 0, 1, 2...: a busy queue (refreshed figures change) and a quiet one."""
    out = []
    for t in range(seconds):
        refreshes = int((t - phase) // period) + 1 if t >= phase else 0
        out.append((float(t), {"busy": refreshes, "quiet": 0}))
    return out


def test_a_change_is_placed_between_the_replies_around_it() -> None:
    clock = RefreshClock()
    seen = [
        clock.observe({"q": {"publish": publish}}, at)["q"]
        for at, publish in [(0.0, 1), (1.0, 1), (2.0, 5), (3.0, 5)]
    ]
    assert seen == [0.0, 0.0, 1.5, 1.5]  # no bound seen yet, and the default one is longer


def test_two_refreshes_bound_the_period_and_quiet_queues_follow_it() -> None:
    clock = RefreshClock()
    times: dict[str, list[float]] = {"busy": [], "quiet": []}
    for at, figures in replies(period=5.0, phase=0.4, seconds=30):
        refreshed = clock.observe({name: {"n": n} for name, n in figures.items()}, at)
        for name in times:
            times[name].append(refreshed[name])
    # refreshes at 0.4, 5.4, 10.4...: seen at 1, 6, 11... and placed half a second earlier
    assert times["busy"][6] == 5.5 and times["busy"][11] == 10.5
    assert clock.learned_bound == pytest.approx(6.0)  # two refreshes within (0, 6]
    # unchanged figures were refreshed (unchanged) within the bound
    assert times["quiet"][29] == pytest.approx(29 - clock.learned_bound)
    assert times["quiet"] == sorted(times["quiet"])


def test_a_refresh_seen_across_two_replies_is_one_refresh() -> None:
    # a refresh updates message_stats, and reductions 50 ms later: replies a second apart may
    # see one half each (at 1 and 2, then at 6 and 7)
    clock = RefreshClock()
    publish = [0, 1, 1, 1, 1, 1, 2, 2]
    reductions = [0, 0, 1, 1, 1, 1, 1, 2]
    seen = [
        clock.observe({"q": {"message_stats": {"publish": p}, "reductions": r}}, float(at))["q"]
        for at, (p, r) in enumerate(zip(publish, reductions, strict=True))
    ]
    assert seen[1] == seen[2] == 0.5  # the reductions half does not move the totals' time
    assert seen[6] == seen[7] == 5.5
    assert clock.learned_bound == 6.0  # from the first halves, not 2 s from the halves of one


def test_the_default_bound_holds_until_one_is_seen() -> None:
    clock = RefreshClock()
    clock.observe({"q": {"n": 1}}, 0.0)
    assert clock.observe({"q": {"n": 1}}, 10.0)["q"] == 10.0 - DEFAULT_REFRESH_BOUND


def test_a_change_after_a_gap_is_placed_within_the_bound() -> None:
    clock = RefreshClock()
    clock.observe({"q": {"n": 1}}, 0.0)
    assert clock.observe({"q": {"n": 2}}, 60.0)["q"] == 60.0 - DEFAULT_REFRESH_BOUND / 2
