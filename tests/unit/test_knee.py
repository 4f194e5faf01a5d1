"""The knee learned from the pool's own throughput: the fit recovers a USL curve, only
saturated samples count, the cap needs a conclusive fit and moves only past its hysteresis, and
the policy clamps at it only when the trigger asks."""

from __future__ import annotations

import math
import re

import pytest

from brokers.base import QueueSnapshot
from scaler.errors import InvalidMetadata
from scaler.knee import KneeState, WorkerCount, conclusive, fit_curve, learn
from scaler.metrics import Metrics
from scaler.policy import PolicyState, Reason, decide
from scaler.probe import render_table, report
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec
from tests.unit.test_policy import signals_of

SIGMA, KAPPA, SINGLE = 0.03, 0.002, 2.0  # N* = sqrt(0.97 / 0.002) = 22.0


def usl(workers: float) -> float:
    return SINGLE * workers / (1 + SIGMA * (workers - 1) + KAPPA * workers * (workers - 1))


def run_at(
    plan: list[tuple[int, float]], *, start: float = 0.0, depth: int = 50
) -> list[QueueSnapshot]:
    """Samples 1 s apart of a pool that ran each (workers, seconds) of ``plan`` saturated."""
    snapshots, now, done = [], start, 0.0
    for workers, seconds in plan:
        for _ in range(int(seconds)):
            done += usl(workers)
            now += 1.0
            snapshots.append(
                QueueSnapshot(
                    observed_at=now, depth=depth, in_flight=workers, consumers=workers,
                    completions_total=int(done), arrivals_total=int(done) + depth,
                )
            )  # fmt: skip
    return snapshots


def test_the_fit_recovers_the_usl_figures_and_the_peak() -> None:
    counts = [WorkerCount(n, 60.0, usl(n) * 60.0, 0.0) for n in (4, 8, 16, 32)]
    fit = fit_curve(counts, now=0.0)
    assert fit is not None
    assert fit.workers == pytest.approx(math.sqrt((1 - SIGMA) / KAPPA))
    assert (fit.sigma, fit.kappa, fit.single) == pytest.approx((SIGMA, KAPPA, SINGLE))
    assert fit.peak == pytest.approx(usl(fit.workers))
    assert conclusive(fit)  # 32 workers ran, past the peak
    assert "throughput peaks at 22.0 workers" in fit.describe()


def test_no_knee_where_the_throughput_still_rises_or_too_little_was_seen() -> None:
    linear = [WorkerCount(n, 60.0, 2.0 * n * 60.0, 0.0) for n in (4, 8, 16)]
    assert fit_curve(linear, now=0.0) is None
    assert fit_curve([WorkerCount(n, 60.0, usl(n) * 60, 0.0) for n in (4, 8)], now=0.0) is None
    short = [WorkerCount(n, 5.0, usl(n) * 5.0, 0.0) for n in (4, 8, 16, 32)]
    assert fit_curve(short, now=0.0) is None
    # a peak the pool never ran past (16 workers at most) is a guess: fitted, not conclusive
    before_the_peak = fit_curve([WorkerCount(n, 60.0, usl(n) * 60, 0.0) for n in (4, 8, 16)], 0.0)
    assert before_the_peak is not None and not conclusive(before_the_peak)


def test_the_cap_is_learned_from_saturated_samples_only() -> None:
    history = run_at([(4, 30), (8, 30), (16, 30), (32, 30)])
    state = learn(KneeState(), history, concurrency=1)
    assert state.cap == 22
    # the same workers idle half the time (no backlog) teach nothing
    idle = [
        QueueSnapshot(observed_at=s.observed_at, depth=0, in_flight=s.consumers,
                      consumers=s.consumers, completions_total=s.completions_total)
        for s in history
    ]  # fmt: skip
    assert learn(KneeState(), idle, concurrency=1).counts == ()
    # nor do workers with free job slots (in flight below their concurrency)
    assert learn(KneeState(), history, concurrency=4).counts == ()


def test_the_cap_holds_within_its_hysteresis_and_on_an_inconclusive_fit() -> None:
    history = run_at([(4, 30), (8, 30), (16, 30), (32, 30)])
    state = learn(KneeState(), history, concurrency=1)
    assert state.cap == 22
    # each pair is learned once: the same history again changes nothing
    assert learn(state, history, concurrency=1) == state
    # a knee that moves by one worker (less than 10%) keeps the cap
    nudged = KneeState(counts=state.counts, seen_until=state.seen_until, cap=21)
    assert learn(nudged, history[-2:], concurrency=1).cap == 21
    # a cap set early (on noise) rises once the pool did better above it, no higher than seen
    early = KneeState(cap=10)
    assert learn(early, run_at([(4, 30), (8, 30), (14, 30)]), concurrency=1).cap == 14
    # a fit that is no longer conclusive keeps the cap it had
    held = KneeState(counts=(), seen_until=None, cap=22)
    assert learn(held, run_at([(20, 30)]), concurrency=1).cap == 22


def spec_with(**metadata: str) -> TriggerSpec:
    base = {"url": "redis://localhost", "queue": "q", "format": "rq", "jobDuration": "0.5s"}
    return parse_metadata(base | metadata)


def test_the_policy_clamps_at_the_knee_only_when_the_trigger_asks() -> None:
    history = tuple(run_at([(4, 30), (8, 30), (16, 30), (32, 30)], depth=5000))
    signals = signals_of(
        depth=5000, consumers=32, in_flight=32, age=600, arrivals=40, completions=30
    )
    learning = spec_with(learnKnee="true", maxWorkers="60")
    decision, state = decide(signals, learning, 0.0, PolicyState(), None, history)
    assert (decision.desired_workers, decision.reason, decision.limited_by) == (
        22,
        Reason.CLAMPED,
        "knee",
    )
    assert decision.reason_text.startswith("clamped by knee (learned: throughput peaks at 22.")
    assert state.knee is not None and state.knee.cap == 22
    assert decision.ceiling_parts is not None
    assert [(p.name, p.workers, p.source) for p in decision.ceiling_parts.each] == [
        ("maxWorkers", 60, "static"),
        ("knee", 22, "knee"),
    ]
    # a tighter limit still wins; and without learnKnee the history is not looked at
    decision, _ = decide(
        signals, spec_with(learnKnee="true", maxWorkers="10"), 0.0, PolicyState(), None, history
    )
    assert (decision.desired_workers, decision.limited_by) == (10, "maxWorkers")
    decision, state = decide(signals, spec_with(maxWorkers="60"), 0.0, PolicyState(), None, history)
    assert (decision.desired_workers, decision.limited_by, state.knee) == (60, "maxWorkers", None)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"learnKnee": "yes"}, "learnKnee: got 'yes'; expected true or false"),
        ({"learnKnee": "true", "format": "huey"}, "format huey does not report attached workers"),
        ({"learnKnee": "true", "dependencies": "knee=10/1"}, "'knee' names the learned knee's part"),
    ],
)  # fmt: skip
def test_learn_knee_is_a_flag_that_needs_the_attached_workers(
    metadata: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidMetadata, match=message):
        spec_with(**metadata)
    assert spec_with(learnKnee="false").learn_knee is False


def test_the_knee_is_exported_with_its_figures_and_shown_by_probe() -> None:
    history = tuple(run_at([(4, 30), (8, 30), (16, 30), (32, 30)], depth=5000))
    signals = signals_of(
        depth=5000, consumers=32, in_flight=32, age=600, arrivals=40, completions=30
    )
    spec = spec_with(learnKnee="true")
    decision, _ = decide(signals, spec, 0.0, PolicyState(), None, history)
    metrics = Metrics()
    metrics.record_decision("shop", "orders", spec, signals, decision)
    labels = {"namespace": "shop", "scaled_object": "orders", "queue": "q", "metric": "workers"}
    value = metrics.registry.get_sample_value
    knee_ceiling = labels | {"dependency": "knee", "source": "knee"}
    assert value("queue_age_scaler_dependency_ceiling_workers", knee_ceiling) == 22
    assert value("queue_age_scaler_knee", labels | {"figure": "workers"}) == pytest.approx(
        22.1, abs=0.05
    )
    assert value("queue_age_scaler_knee", labels | {"figure": "sigma"}) == pytest.approx(
        SIGMA, rel=0.02
    )
    shown = report(spec, signals, decision, len(history), {})
    assert shown["knee"]["cap"] == 22
    assert shown["knee"]["kappa"] == pytest.approx(KAPPA, rel=0.01)
    assert [c["workers"] for c in shown["knee"]["observed"]] == [4, 8, 16, 32]
    assert re.search(r"^knee +cap 22 \(throughput peaks at 22\.", render_table(shown), re.M)
