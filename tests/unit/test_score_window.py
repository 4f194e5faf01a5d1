"""Score-window counting, against a simulated arq queue (a sorted set taken oldest due first)."""

from __future__ import annotations

from dataclasses import dataclass, field

from brokers.score_window import SETTLE_MS, ScoreWindow, WindowCounts


@dataclass
class FakeArqQueue:
    """Job id -> score, as arq's ZADD writes it; running jobs stay in the set until finished."""

    scores: dict[int, float] = field(default_factory=dict)
    running: set[int] = field(default_factory=set)
    next_id: int = 0
    #: what really happened, to compare the tracker with
    arrived: int = 0
    finished: int = 0

    def enqueue(self, score: float) -> int:
        job_id = self.next_id
        self.next_id += 1
        self.scores[job_id] = score
        return job_id

    def take(self, now: float, count: int = 1) -> None:
        """Start the ``count`` oldest due jobs that are not running (as arq's worker does)."""
        waiting = sorted(
            (s, j) for j, s in self.scores.items() if s <= now and j not in self.running
        )
        self.running.update(job_id for _, job_id in waiting[:count])

    def finish_all_running(self) -> None:
        for job_id in self.running:
            del self.scores[job_id]
            self.finished += 1
        self.running.clear()

    def sample(self, window: ScoreWindow, now: int) -> WindowCounts:
        cutoff = window.cutoff(now)
        since = window.previous_cutoff
        due = sum(1 for s in self.scores.values() if s <= cutoff)
        arrivals = None
        if since is not None:
            arrivals = sum(1 for s in self.scores.values() if since < s <= cutoff)
        waiting = [s for j, s in self.scores.items() if s <= now and j not in self.running]
        return window.observe(cutoff, due, arrivals, min(waiting, default=None))


def test_first_sample_sets_the_baseline() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    for score in (1_000, 2_000, 3_000):
        queue.enqueue(score)
    assert queue.sample(window, 10_000) == WindowCounts(0, 0, exact=True)
    assert window.previous_cutoff == 10_000 - SETTLE_MS


def test_backlog_counts_are_exact() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    for i in range(50):  # a backlog, oldest 10 s before the first sample
        queue.enqueue(i * 100)
    now = 10_000
    queue.sample(window, now)
    arrived = finished = 0
    for _ in range(20):  # 10 arrive and 8 finish per second: the backlog never drains
        for i in range(10):
            queue.enqueue(now + i * 100 + 50)
        arrived += 10
        queue.take(now + 1_000, 8)
        queue.finish_all_running()
        finished += 8
        now += 1_000
        counts = queue.sample(window, now)
        assert counts.exact
    # arrivals trail by SETTLE_MS: the last second's jobs are counted at the next sample
    assert counts.arrivals_total == arrived - 10
    assert counts.completions_total == finished


def test_running_jobs_are_not_completions() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    for i in range(3):
        queue.enqueue(i)
    queue.sample(window, 5_000)
    queue.take(5_000, 2)
    assert queue.sample(window, 6_000) == WindowCounts(0, 0, exact=True)
    queue.finish_all_running()
    assert queue.sample(window, 7_000) == WindowCounts(0, 2, exact=True)


def test_jobs_that_come_and_go_within_an_interval_make_lower_bounds() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    queue.sample(window, 10_000)
    queue.enqueue(9_500)
    queue.enqueue(9_600)
    queue.take(9_700)  # one arrives and finishes between the samples: never seen
    queue.finish_all_running()
    counts = queue.sample(window, 11_000)
    assert counts == WindowCounts(arrivals_total=1, completions_total=0, exact=False)


def test_counts_become_exact_once_a_settled_job_still_waits() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    queue.sample(window, 10_000)
    queue.enqueue(9_500)  # settled by the next sample, and waits on
    assert not queue.sample(window, 11_000).exact  # it arrived in this very interval
    queue.enqueue(10_500)
    assert queue.sample(window, 12_000) == WindowCounts(2, 0, exact=True)
    queue.take(12_500)  # takes the older job only: the newer one, settled before, waits
    queue.finish_all_running()
    assert queue.sample(window, 13_000) == WindowCounts(2, 1, exact=True)


def test_a_deferred_job_arrives_when_due() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    queue.enqueue(4_000)
    queue.enqueue(20_000)  # deferred: due at 20 s
    queue.sample(window, 10_000)
    assert queue.sample(window, 15_000).arrivals_total == 0
    counts = queue.sample(window, 25_000)
    assert (counts.arrivals_total, counts.completions_total, counts.exact) == (1, 0, True)


def test_the_cutoff_never_moves_back() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    queue.enqueue(1_000)
    queue.sample(window, 10_000)
    assert window.cutoff(8_000) == 10_000 - SETTLE_MS  # the clock stepped back 2 s
    assert queue.sample(window, 8_000) == WindowCounts(0, 0, exact=True)


def test_a_job_scored_behind_the_cutoff_is_not_a_negative_completion() -> None:
    queue, window = FakeArqQueue(), ScoreWindow()
    queue.enqueue(1_000)
    queue.sample(window, 10_000)
    queue.enqueue(2_000)  # landed after the sample with a score long past: a slow clock
    counts = queue.sample(window, 11_000)
    assert counts == WindowCounts(arrivals_total=0, completions_total=0, exact=False)
