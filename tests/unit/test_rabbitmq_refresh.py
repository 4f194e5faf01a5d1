"""The management API's figures: the totals a queue entry gives, and when they were refreshed,
told from replies every second."""

from __future__ import annotations

from typing import Any

import pytest

from brokers.rabbitmq_management import DEFAULT_REFRESH_BOUND, RefreshClock, totals


def entry(publish: int, **other: Any) -> dict[str, Any]:
    return {"message_stats": {"publish": publish}, **other}


def test_a_change_is_placed_between_the_replies_around_it() -> None:
    clock = RefreshClock()
    seen = [
        clock.observe({"q": entry(publish)}, at)["q"]
        for at, publish in [(0.0, 1), (1.0, 1), (2.0, 5), (3.0, 5)]
    ]
    assert seen == [0.0, 0.0, 1.5, 1.5]  # no bound seen yet, and the default one is longer


def test_two_refreshes_bound_the_period_and_quiet_queues_follow_it() -> None:
    # refreshes at 0.4, 5.4, 10.4...: seen in the replies at 1, 6, 11...
    clock = RefreshClock()
    busy, quiet = [], []
    for t in range(30):
        refreshes = int((t - 0.4) // 5.0) + 1 if t >= 0.4 else 0
        refreshed = clock.observe({"busy": entry(refreshes), "quiet": entry(0)}, float(t))
        busy.append(refreshed["busy"])
        quiet.append(refreshed["quiet"])
    assert busy[6] == 5.5 and busy[11] == 10.5  # placed half a second before they were seen
    assert clock.learned_bound == pytest.approx(6.0)  # two refreshes within (0, 6]
    # unchanged figures were refreshed (unchanged) within the period: the default, 5 s, which
    # the bound agrees with
    assert quiet[29] == 24.0
    assert quiet == sorted(quiet)


def test_a_bound_longer_than_the_default_period_replaces_it() -> None:
    clock = RefreshClock()  # collect_statistics_interval = 10 s: refreshes at 0.4, 10.4, 20.4
    for t in range(30):
        refreshes = int((t - 0.4) // 10.0) + 1 if t >= 0.4 else 0
        clock.observe({"q": entry(refreshes), "quiet": entry(0)}, float(t))
    assert clock.bound == clock.learned_bound == 11.0
    assert clock.observe({"q": entry(3), "quiet": entry(0)}, 30.0)["quiet"] == 19.0


def test_collectors_on_other_phases_neither_move_the_totals_nor_shorten_the_bound() -> None:
    # publish refreshes at 0.5, 5.5...; ack two seconds later; reductions one second later
    clock = RefreshClock()
    seen = []
    for t in range(13):
        publish = (t + 4) // 5  # changes in the replies at 1, 6, 11
        ack = (t + 2) // 5  # at 3, 8
        reductions = t // 5  # at 5, 10
        figures = {"message_stats": {"publish": publish, "ack": ack}, "reductions": reductions}
        seen.append(clock.observe({"q": figures}, float(t))["q"])
    assert seen[1:6] == [0.5] * 5
    assert seen[6:11] == [5.5] * 5
    assert clock.learned_bound == 6.0  # from one figure's changes, not 2 s from two figures'


def test_the_default_bound_holds_until_one_is_seen() -> None:
    clock = RefreshClock()
    clock.observe({"q": entry(1)}, 0.0)
    assert clock.observe({"q": entry(1)}, 10.0)["q"] == 10.0 - DEFAULT_REFRESH_BOUND


def test_a_change_after_a_gap_is_placed_within_the_bound() -> None:
    clock = RefreshClock()
    clock.observe({"q": entry(1)}, 0.0)
    assert clock.observe({"q": entry(2)}, 60.0)["q"] == 60.0 - DEFAULT_REFRESH_BOUND / 2


@pytest.mark.parametrize(
    ("queue_entry", "expected"),
    [
        pytest.param(
            {"message_stats": {"publish": 9, "ack": 4, "deliver_no_ack": 1}, "messages_ready": 4},
            (9, 5),
            id="publish and acks",
        ),
        pytest.param({"messages_ready": 0}, (0, 0), id="nothing published yet"),
        pytest.param({"message_stats": {"ack": 2}}, (0, 2), id="a figure left out is 0"),
        pytest.param(
            {"messages_ready": 6}, (None, None), id="messages the statistics do not show yet"
        ),
        pytest.param(
            {"message_stats": {}, "messages_unacknowledged": 2},
            (None, None),
            id="held messages, no publish figure",
        ),
    ],
)
def test_totals(queue_entry: dict[str, Any], expected: tuple[int | None, int | None]) -> None:
    assert totals(queue_entry) == expected
