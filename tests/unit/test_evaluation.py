"""The one evaluation step and the history it reads: one decision per sample and probe figures,
the policy state carried between samples, an immutable view of the history, the trimming."""

from __future__ import annotations

import pytest

from brokers.base import QueueSnapshot
from scaler.ceilings.headroom import ProbeFigure
from scaler.evaluation import Evaluator
from scaler.policy import Reason
from scaler.sample_history import SampleHistory
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec


def spec_of(**metadata: str) -> TriggerSpec:
    base = {"url": "redis://localhost", "queue": "q", "format": "rq", "workerThroughput": "2"}
    return parse_metadata(base | metadata, {"orders-pg": "postgresql://db:5432/orders"})


def snapshot(
    t: float, depth: int, arrivals: int, completions: int = 0, in_flight: int | None = None
) -> QueueSnapshot:
    return QueueSnapshot(
        observed_at=t,
        depth=depth,
        in_flight=in_flight,
        arrivals_total=arrivals,
        completions_total=completions,
        counts_source="counters",
    )


def test_the_same_sample_is_decided_once_and_a_new_one_again() -> None:
    spec = spec_of(rateWindow="10s", targetDrainTime="10s")
    evaluator = Evaluator()
    history = (snapshot(0.0, 0, 100), snapshot(1.0, 20, 120))
    first = evaluator.evaluate(history, spec)
    assert first.fresh
    # 20 jobs/s arrive, none taken: 20/2 workers keep up, 20 jobs / 10 s / 2 more drain them
    assert first.decision.desired_workers == 11
    state = evaluator.state
    again = evaluator.evaluate(history, spec)
    assert not again.fresh
    assert (again.signals, again.decision) == (first.signals, first.decision)
    assert evaluator.state is state  # the policy did not run again on the same sample
    # nothing waits nor runs: idle (where running jobs are not shown, the 10/s that came
    # would be kept up with: they may run unseen)
    later = evaluator.evaluate((*history, snapshot(2.0, 0, 120, 40, in_flight=0)), spec)
    assert later.fresh
    assert later.decision.desired_workers == 0
    assert later.decision.reason is Reason.IDLE


def test_new_probe_figures_on_the_same_sample_are_decided_again() -> None:
    spec = spec_of(dependencies="postgres=probe:orders-pg|20/1")
    evaluator = Evaluator()
    history = (snapshot(0.0, 0, 0), snapshot(1.0, 50, 50))
    down = {"orders-pg": ProbeFigure("postgres", None, None, "connection refused")}
    assert evaluator.evaluate(history, spec, figures=down).fresh
    assert not evaluator.evaluate(history, spec, figures=down).fresh
    assert evaluator.evaluate(history, spec).fresh  # the figures changed: no probe at all


def test_the_history_view_is_one_tuple_until_the_next_sample() -> None:
    history = SampleHistory(max_samples=3)
    history.append(snapshot(0.0, 1, 10), window=60.0, interval=1.0)
    view = history.view
    assert history.view is view
    history.append(snapshot(1.0, 1, 11), window=60.0, interval=1.0)
    assert view == (snapshot(0.0, 1, 10),)  # what a reader holds does not change under it
    assert [s.observed_at for s in history.view] == [0.0, 1.0]
    for t in range(2, 6):
        history.append(snapshot(float(t), 1, 10 + t), window=60.0, interval=1.0)
    assert [s.observed_at for s in history.view] == [3.0, 4.0, 5.0]  # at most max_samples
    assert len(history.arrivals) == 6  # the arrival history keeps every count


def test_the_history_keeps_the_window_and_two_intervals_more() -> None:
    history = SampleHistory()
    for t in range(20):
        history.append(snapshot(float(t), 0, t), window=10.0, interval=1.0)
    # newest 19: the window and two intervals reach back to 7, the oldest kept
    assert [s.observed_at for s in history.view][:2] == [7.0, 8.0]
    assert history.view[-1].observed_at == 19.0


def test_a_history_needs_two_samples_at_least() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        SampleHistory(max_samples=1)
