"""Resque's per-worker counters between two samples (``brokers.redis_resque.since``): the jobs of
a queue are counted from the workers that listen to it alone, exact only while every job that
ended is in a counter the scaler read."""

from __future__ import annotations

from brokers.redis_resque import Counters, since

ALONE, OTHER, SHARED = "h:1:images", "h:2:mail", "h:3:images,mail"


def reading(
    length: int, in_flight: int, total: int, with_shared: bool = True, **processed: int
) -> Counters:
    counts = {ALONE: processed.get("alone", 0), OTHER: processed.get("other", 0)}
    if with_shared:
        counts[SHARED] = processed.get("shared", 0)
    return Counters(
        length,
        in_flight,
        counts,
        total,
        frozenset({ALONE}),
        frozenset({SHARED} if with_shared else ()),
    )


def test_jobs_of_the_queue_alone_are_exact_whatever_other_queues_workers_did() -> None:
    before = reading(3, 1, total=10, alone=4, other=6)
    after = reading(1, 0, total=19, alone=9, other=10)
    # 5 ended here (4 of the other queue's); the list fell by 2 and in flight by 1: 2 arrived
    assert since(before, after) == (2, 5, True)


def test_a_worker_of_several_queues_that_ended_jobs_makes_the_counts_unattributable() -> None:
    before = reading(0, 0, total=0)
    assert since(before, reading(0, 0, total=2, alone=1, shared=1)) is None
    # idle in the interval, it is no obstacle
    assert since(before, reading(0, 0, total=1, alone=1)) == (1, 1, True)


def test_a_restarted_worker_counts_from_zero_and_the_interval_is_not_exact() -> None:
    before = reading(0, 0, total=20, alone=20)
    after = reading(0, 0, total=23, alone=3)  # unregistered, came back under its id
    assert since(before, after) == (3, 3, False)


def test_jobs_that_ended_in_a_counter_gone_before_the_sample_make_it_inexact() -> None:
    before = reading(2, 0, total=5, with_shared=False, alone=5)
    gone = Counters(0, 0, {OTHER: 0}, 8, frozenset(), frozenset())  # 3 more, then unregistered
    assert since(before, gone) == (0, 0, False)


def test_a_job_taken_before_its_worker_wrote_it_is_never_a_negative_arrival() -> None:
    before = reading(1, 0, total=0)
    after = reading(0, 0, total=0)  # popped, worker:<id> not written yet
    assert since(before, after) == (0, 0, False)
