"""The running totals RQ's and Resque's adapters report (``brokers.running_totals``): each
interval's counts are the workers' counters', unless the list marker is exact and counts more
arrivals; the marker's where the counters cannot tell."""

from __future__ import annotations

from brokers.base import QueueSnapshot
from brokers.running_totals import RunningTotals

MARKER, COUNTERS = "list-marker", "worker-counters"


def listed(arrivals: int | None, completions: int | None, exact: bool = True) -> QueueSnapshot:
    return QueueSnapshot(
        observed_at=0.0,
        depth=0,
        arrivals_total=arrivals,
        completions_total=completions,
        counts_exact=exact,
        counts_source=MARKER,
    )


def totals(snapshot: QueueSnapshot) -> tuple[int | None, int | None, bool, str]:
    return (
        snapshot.arrivals_total,
        snapshot.completions_total,
        snapshot.counts_exact,
        snapshot.counts_source,
    )


def test_the_first_sample_starts_the_totals_by_the_marker() -> None:
    first = RunningTotals().add(listed(100, 90, exact=False), (5, 5, True), COUNTERS)
    assert totals(first) == (0, 0, False, MARKER)


def test_the_counters_counts_stand_where_they_count_at_least_the_markers_arrivals() -> None:
    running = RunningTotals()
    running.add(listed(100, 90), None, COUNTERS)
    # the marker saw 2 arrivals (the list emptied between), the counters 7
    assert totals(running.add(listed(102, 92), (7, 6, False), COUNTERS)) == (7, 6, False, COUNTERS)
    assert totals(running.add(listed(103, 93), (1, 1, True), COUNTERS)) == (8, 7, True, COUNTERS)


def test_an_exact_marker_that_counts_more_arrivals_stands() -> None:
    running = RunningTotals()
    running.add(listed(0, 0), None, COUNTERS)
    # a worker came and went between the samples: its jobs are not in the counters read
    assert totals(running.add(listed(9, 9), (4, 4, True), COUNTERS)) == (9, 9, True, MARKER)


def test_an_inexact_marker_does_not_override_the_counters() -> None:
    running = RunningTotals()
    running.add(listed(0, 0), None, COUNTERS)
    assert totals(running.add(listed(9, 9, exact=False), (4, 4, True), COUNTERS)) == (
        4,
        4,
        True,
        COUNTERS,
    )


def test_without_counts_from_the_counters_the_markers_stand() -> None:
    running = RunningTotals()
    running.add(listed(10, 10), None, COUNTERS)
    assert totals(running.add(listed(13, 12, exact=False), None, COUNTERS)) == (3, 2, False, MARKER)
    # a sample without the marker's totals: by the marker, none since its last; the counters' stand
    assert totals(running.add(listed(None, None), (5, 5, True), COUNTERS)) == (
        8,
        7,
        True,
        COUNTERS,
    )
    assert totals(running.add(listed(14, 12), None, COUNTERS)) == (9, 7, True, MARKER)
