"""The pure policy: signals and a trigger spec in, a decision with its reason out."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import pytest

from brokers.base import Precision
from scaler.draining import Released
from scaler.policy import (
    LEARNED_FLOOR_SHARE,
    LEARNING_RATE,
    PRIOR_JOBS,
    UNBOUNDED_SECONDS,
    WARM_IDLE,
    Decision,
    PolicyState,
    Reason,
    decide,
    is_active,
    stepped_rate,
)
from scaler.signals import Figure, QueueSignals
from scaler.spec import parse_metadata
from scaler.start_lag import FLOW_BUCKET, FLOW_MEMORY, StartLag
from scaler.trigger_spec import Metric, TriggerSpec

NOW = 1000.0


def spec_of(**metadata: str) -> TriggerSpec:
    """An RQ trigger (RQ reports its workers, so capacity keys may be left out)."""
    return parse_metadata({"url": "redis://localhost", "queue": "q", "format": "rq"} | metadata)


def _figure(value: float | None, precision: Precision, source: str) -> Figure:
    return Figure.unknown(source) if value is None else Figure(value, precision, source)


def signals_of(
    *,
    depth: int | None,
    in_flight: int | None = None,
    consumers: int | None = None,
    age: float | None = None,
    age_precision: Precision = Precision.EXACT,
    arrivals: float | None = None,
    completions: float | None = None,
    rate_precision: Precision = Precision.EXACT,
    flow: float | None = None,
    paused: bool | None = None,
    slots: int | None = None,
    mean_in_flight: float | None = None,
    finished: float | None = None,
    recent: float | None = None,
) -> QueueSignals:
    """Signals as compute_signals would give them; time to drain follows from depth and rates."""
    if depth == 0:
        oldest, drain = Figure(0.0, Precision.EXACT, "empty"), Figure(0.0, Precision.EXACT, "empty")
    else:
        oldest = _figure(age, age_precision, "test")
        if depth is None or arrivals is None or completions is None:
            drain = Figure.unknown("rates")
        elif completions <= arrivals:
            drain = Figure(math.inf, Precision.ESTIMATE, "rates")
        else:
            drain = Figure(depth / (completions - arrivals), Precision.ESTIMATE, "rates")
    return QueueSignals(
        observed_at=NOW,
        depth=depth,
        in_flight=in_flight,
        consumers=consumers,
        oldest_age=oldest,
        arrival_rate=_figure(arrivals, rate_precision, "test"),
        completion_rate=_figure(completions, rate_precision, "test"),
        time_to_drain=drain,
        rate_span=60.0,
        flow_rate=flow,
        paused=paused,
        slots=slots,
        mean_in_flight=mean_in_flight,
        jobs_finished=finished,
        recent_rate=recent,
    )


def run(
    spec: TriggerSpec, signals: QueueSignals, state: PolicyState | None = None
) -> tuple[Decision, PolicyState]:
    return decide(signals, spec, NOW, state or PolicyState())


@dataclass(frozen=True)
class Case:
    metadata: dict[str, str]
    signals: QueueSignals
    desired: int
    reason: Reason
    limited_by: str | None = None
    state: PolicyState = field(default_factory=PolicyState)


CASES = {
    "keeping up: 10/s at 2/s per worker": Case(
        {"workerThroughput": "2"},
        signals_of(depth=10, consumers=5, arrivals=10.0, completions=10.0),
        6,  # 10/2 + 10/60/2 = 5.08
        Reason.KEEPING_UP,
    ),
    "draining backlog: 600 jobs in 60 s at 1/s": Case(
        {"workerThroughput": "1", "targetDrainTime": "60s"},
        signals_of(depth=600, arrivals=0.0, completions=0.0),
        10,
        Reason.DRAINING_BACKLOG,
    ),
    "draining backlog: targetDrainTime 2m halves the need": Case(
        {"workerThroughput": "1", "targetDrainTime": "2m"},
        signals_of(depth=600, arrivals=0.0, completions=0.0),
        5,
        Reason.DRAINING_BACKLOG,
    ),
    "age over target: 120 s vs 60 s with 3 consumers": Case(
        {"workerThroughput": "1"},
        signals_of(depth=5, consumers=3, age=120.0, arrivals=0.5, completions=0.5),
        6,
        Reason.AGE_OVER_TARGET,
    ),
    "age over target from a lower-bound age": Case(
        {"workerThroughput": "1"},
        signals_of(
            depth=5, consumers=3, age=180.0, age_precision=Precision.LOWER_BOUND, arrivals=0.5
        ),
        9,
        Reason.AGE_OVER_TARGET,
    ),
    "age at target is not over it": Case(
        {"workerThroughput": "1"},
        signals_of(depth=5, consumers=3, age=60.0, arrivals=0.5, completions=0.5),
        1,
        Reason.KEEPING_UP,
    ),
    "age over target needs observed consumers": Case(
        {"workerThroughput": "1"},
        signals_of(depth=5, consumers=None, age=600.0, arrivals=0.5, completions=0.5),
        1,
        Reason.KEEPING_UP,
    ),
    "clamped by postgres: needs 50, postgres=100/5 allows 20": Case(
        {"workerThroughput": "1", "dependencies": "postgres=100/5"},
        signals_of(depth=3000, arrivals=0.0, completions=0.0),
        20,
        Reason.CLAMPED,
        "postgres",
    ),
    "clamped by the tightest dependency": Case(
        {"workerThroughput": "1", "dependencies": "postgres=100/5,payments-api=20/2"},
        signals_of(depth=3000, arrivals=0.0, completions=0.0),
        10,
        Reason.CLAMPED,
        "payments-api",
    ),
    "clamped by maxWorkers": Case(
        {"workerThroughput": "1", "maxWorkers": "8"},
        signals_of(depth=600, arrivals=0.0, completions=0.0),
        8,
        Reason.CLAMPED,
        "maxWorkers",
    ),
    "age rule clamped too": Case(
        {"workerThroughput": "1", "maxWorkers": "4"},
        signals_of(depth=5, consumers=3, age=600.0, arrivals=0.0, completions=0.0),
        4,
        Reason.CLAMPED,
        "maxWorkers",
    ),
    "under the ceiling is not clamped": Case(
        {"workerThroughput": "1", "maxWorkers": "20", "dependencies": "postgres=100/5"},
        signals_of(depth=600, arrivals=0.0, completions=0.0),
        10,
        Reason.DRAINING_BACKLOG,
    ),
    "idle: nothing waits or runs": Case(
        {"workerThroughput": "1"},
        signals_of(depth=0, in_flight=0, consumers=2, arrivals=0.0, completions=0.0),
        0,
        Reason.IDLE,
    ),
    "idle with throughput unknown": Case(
        {},
        signals_of(depth=0, in_flight=0, consumers=0),
        0,
        Reason.IDLE,
    ),
    "at least 1 while a job runs": Case(
        {"workerThroughput": "2"},
        signals_of(depth=0, in_flight=1, arrivals=0.0, completions=0.0),
        1,
        Reason.KEEPING_UP,
    ),
    "at least 1 while a job waits and throughput is unknown": Case(
        {},
        signals_of(depth=1, in_flight=0, consumers=0),
        1,
        Reason.LEARNING_THROUGHPUT,
    ),
    "one waiting job at high throughput rounds up to 1": Case(
        {"workerThroughput": "100"},
        signals_of(depth=1, arrivals=0.0, completions=0.0),
        1,
        Reason.DRAINING_BACKLOG,
    ),
    "minWorkers when idle": Case(
        {"workerThroughput": "1", "minWorkers": "3"},
        signals_of(depth=0, in_flight=0, arrivals=0.0, completions=0.0),
        3,
        Reason.MIN_WORKERS,
    ),
    "minWorkers above the need": Case(
        {"workerThroughput": "1", "minWorkers": "3"},
        signals_of(depth=60, arrivals=0.0, completions=0.0),
        3,
        Reason.MIN_WORKERS,
    ),
    "minWorkers below the need": Case(
        {"workerThroughput": "1", "minWorkers": "2"},
        signals_of(depth=600, arrivals=0.0, completions=0.0),
        10,
        Reason.DRAINING_BACKLOG,
    ),
    "rates unknown: depth only": Case(
        {"workerThroughput": "1"},
        signals_of(depth=120),
        2,
        Reason.DRAINING_BACKLOG,
    ),
    "age unknown: no age rule": Case(
        {"workerThroughput": "1"},
        signals_of(depth=60, consumers=3, age=None, arrivals=0.0, completions=0.0),
        1,
        Reason.DRAINING_BACKLOG,
    ),
    "throughput unknown, not learnable: holds observed consumers": Case(
        {},
        signals_of(depth=50, consumers=4),
        4,
        Reason.LEARNING_THROUGHPUT,
    ),
    "throughput unknown, no consumers observed": Case(
        {},
        signals_of(depth=50, consumers=None, arrivals=3.0),
        1,
        Reason.LEARNING_THROUGHPUT,
    ),
    "throughput unknown but age over target": Case(
        {},
        signals_of(depth=50, consumers=4, age=90.0),
        6,
        Reason.AGE_OVER_TARGET,
    ),
    "learned throughput from an earlier call": Case(
        {},
        signals_of(depth=100, consumers=4, arrivals=10.0),
        6,  # 10/2 + 100/60/2 = 5.83
        Reason.KEEPING_UP,
        state=PolicyState(learned_throughput=2.0),
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_decide(case: Case) -> None:
    spec = spec_of(**case.metadata)
    decision, _ = run(spec, case.signals, case.state)
    assert decision.desired_workers == case.desired
    assert decision.reason is case.reason
    assert decision.limited_by == case.limited_by
    assert decision.metric_value == float(case.desired)
    if case.reason is Reason.CLAMPED:
        assert decision.reason_text == f"clamped by {case.limited_by}"
        assert decision.ceiling == case.desired
    else:
        assert decision.reason_text == case.reason.value


def test_keeping_up_needed_before_rounding() -> None:
    spec = spec_of(workerThroughput="2")
    decision, _ = run(spec, signals_of(depth=10, consumers=5, arrivals=10.0, completions=10.0))
    assert decision.needed == pytest.approx(10 / 2 + 10 / 60 / 2)
    assert decision.throughput == 2.0


def test_clamped_decision_reports_the_dependency() -> None:
    spec = spec_of(workerThroughput="1", dependencies="postgres=100/5")
    decision, _ = run(spec, signals_of(depth=3000, arrivals=0.0, completions=0.0))
    assert decision.needed == pytest.approx(50.0)
    assert (decision.desired_workers, decision.ceiling) == (20, 20)
    assert decision.limited_by == "postgres"
    assert decision.reason_text == "clamped by postgres"


def test_jobs_in_flight_with_worker_concurrency() -> None:
    # 20 jobs run on workers that take 4 each and nothing waits: the flow keeps 5 workers busy
    spec = spec_of(workerThroughput="10", workerConcurrency="4")
    decision, _ = run(spec, signals_of(depth=0, in_flight=20, arrivals=0.0, completions=0.0))
    assert decision.desired_workers == 5


def test_busy_workers_from_the_threads_the_library_records() -> None:
    """Sidekiq records each process's threads: 3 processes with 30 slots in all run 10 each, so
    the 25 jobs in flight keep 2.5 processes busy, whatever workerConcurrency says; the
    utilisation is over those 30 slots."""
    spec = spec_of(workerThroughput="10", workerConcurrency="4")
    signals = signals_of(
        depth=0, in_flight=25, consumers=3, slots=30, arrivals=0.0, completions=0.0
    )
    decision, _ = run(spec, signals)
    assert decision.needed == pytest.approx(2.5)
    assert decision.desired_workers == 3
    assert decision.utilisation == pytest.approx(25 / 30)
    # without workerConcurrency the library's threads still count the busy processes
    decision, _ = run(spec_of(workerThroughput="10"), signals)
    assert decision.needed == pytest.approx(2.5)


def test_busy_slots_do_not_hold_the_fleet_while_a_backlog_drains() -> None:
    # 15 workers of 10 slots drain 20,000 jobs with 15 minutes to go: every slot is busy because
    # jobs wait, which says how many slots there are, not how many the flow needs. Holding the
    # fleet at its busy slots kept 15 workers until the backlog was gone (io-bound-backlog in
    # formats that show what runs: 1.38x the cheapest policy's worker-seconds)
    spec = spec_of(jobDuration="5.5s", workerConcurrency="10", targetAge="15m")
    backlog = signals_of(depth=7887, in_flight=150, consumers=15, age=601.0, arrivals=4.8,
                         completions=27.0, flow=4.8)  # fmt: skip
    decision, _ = run(spec, backlog)
    throughput = 10 / 5.5
    # the flow 30 s ahead: of the 15 workers' jobs running now almost none still run then
    decay = math.exp(-30 / 5.5)
    flow = 15 * decay + 4.8 / throughput * (1 - decay)
    # the flow's arrivals over a quarter of the target may wait (4.8/s for 225 s: 1,080 jobs),
    # the rest drains within the target less one job
    assert decision.needed == pytest.approx(flow + (7887 - 1080) / (900 - 5.5) / throughput)
    assert decision.desired_workers == 7


def test_a_backlog_the_flow_holds_for_a_quarter_of_the_target_is_not_drained() -> None:
    """A fleet that keeps up holds its backlog steady: each job waits the backlog over the flow's
    rate. Up to a quarter of the target's arrivals wait without workers added to drain them,
    where the broker shows what runs and a job is short against the target; elsewhere every
    waiting job is drained within the target."""
    spec = spec_of(jobDuration="1s", workerConcurrency="1", targetAge="60s")
    # 10 jobs a second need 10 workers; 150 may wait (10/s over 15 s)
    held = signals_of(depth=120, in_flight=10, consumers=10, age=11.0, arrivals=10.0,
                      completions=10.0, flow=10.0)  # fmt: skip
    decision, _ = run(spec, held)
    assert decision.needed == pytest.approx(10.0, abs=0.01)
    assert decision.desired_workers == 10
    more = replace(held, depth=270)  # 120 beyond what may wait: drained in 59 s at 1/s a worker
    decision, _ = run(spec, more)
    assert decision.needed == pytest.approx(10.0 + 120 / 59, abs=0.01)
    blind = replace(
        held, in_flight=None, consumers=None
    )  # the rate a lower bound, what runs unseen
    decision, _ = run(spec, blind)
    assert decision.needed == pytest.approx(10.0 + 120 / 59, abs=0.01)
    long_jobs = spec_of(jobDuration="20s", workerConcurrency="20", targetAge="60s")
    decision, _ = run(long_jobs, held)  # 20-second jobs, a third of the target: all 120 drain
    decay = math.exp(-30 / 20)  # 1 job/s a worker; the 10 running jobs hold half a worker
    keep_up = 0.5 * decay + 10.0 * (1 - decay)
    assert decision.needed == pytest.approx(keep_up + 120 / 40)


def test_decide_is_pure() -> None:
    spec = spec_of()
    signals = signals_of(depth=100, consumers=4, arrivals=10.0, completions=8.0)
    state = PolicyState(learned_throughput=1.5)
    first = run(spec, signals, state)
    second = run(spec, signals, state)
    assert first == second
    assert state == PolicyState(learned_throughput=1.5)


# --- learning per-worker throughput --------------------------------------------------------------


def test_learns_throughput_from_saturated_consumers() -> None:
    spec = spec_of()
    signals = signals_of(depth=100, consumers=4, arrivals=10.0, completions=8.0)
    decision, state = run(spec, signals)
    assert state.learned_throughput == pytest.approx(2.0)
    assert decision.throughput == pytest.approx(2.0)
    assert decision.desired_workers == 6  # 10/2 + 100/60/2 = 5.83
    assert decision.reason is Reason.KEEPING_UP


def test_learned_throughput_blends_new_observations() -> None:
    spec = spec_of()
    signals = signals_of(depth=100, consumers=4, arrivals=10.0, completions=12.0)  # 3/s each
    _, state = run(spec, signals, PolicyState(learned_throughput=2.0))
    assert state.learned_throughput == pytest.approx(2.0 + LEARNING_RATE * (3.0 - 2.0))


@pytest.mark.parametrize(
    ("metadata", "signals", "before"),
    [
        pytest.param(
            {},
            signals_of(
                depth=100,
                consumers=4,
                arrivals=10.0,
                completions=8.0,
                rate_precision=Precision.LOWER_BOUND,
            ),
            None,
            id="lower-bound completion rate",
        ),
        pytest.param(
            {},
            signals_of(depth=0, in_flight=4, consumers=4, arrivals=8.0, completions=8.0),
            None,
            id="nothing waits: consumers may be idle",
        ),
        pytest.param(
            {},
            signals_of(depth=0, in_flight=4, consumers=4, arrivals=8.0, completions=8.0),
            1.5,
            id="nothing waits keeps the earlier figure",
        ),
        pytest.param(
            {},
            signals_of(depth=100, consumers=None, arrivals=10.0, completions=8.0),
            None,
            id="consumers unknown",
        ),
        pytest.param(
            {},
            signals_of(depth=100, consumers=0, arrivals=10.0, completions=8.0),
            None,
            id="no consumers",
        ),
        pytest.param(
            {},
            signals_of(depth=100, consumers=4, arrivals=10.0, completions=0.0),
            1.5,
            id="zero completions teach nothing",
        ),
        pytest.param(
            {},
            signals_of(depth=100, consumers=4),
            None,
            id="completion rate unknown",
        ),
        pytest.param(
            {"workerThroughput": "5"},
            signals_of(depth=100, consumers=4, arrivals=10.0, completions=8.0),
            None,
            id="workerThroughput set",
        ),
    ],
)
def test_throughput_not_learned(
    metadata: dict[str, str], signals: QueueSignals, before: float | None
) -> None:
    spec = spec_of(**metadata)
    decision, state = run(spec, signals, PolicyState(learned_throughput=before))
    assert state.learned_throughput == before
    assert decision.throughput == (spec.worker_throughput or before)


def test_lower_bound_rate_leaves_policy_learning() -> None:
    spec = spec_of()
    signals = signals_of(
        depth=100, consumers=4, arrivals=10.0, completions=8.0, rate_precision=Precision.LOWER_BOUND
    )
    decision, _ = run(spec, signals)
    assert decision.reason is Reason.LEARNING_THROUGHPUT
    assert decision.needed is None
    assert decision.desired_workers == 4


# --- metric values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "signals", "value"),
    [
        pytest.param(
            {"metric": "age"},
            signals_of(depth=5, consumers=2, age=90.0),
            90.0,
            id="age in seconds",
        ),
        pytest.param(
            {"metric": "age"},
            signals_of(depth=0, in_flight=0, consumers=2),
            0.0,
            id="age of an empty queue",
        ),
        pytest.param(
            {"metric": "drainTime"},
            signals_of(depth=100, consumers=2, arrivals=1.0, completions=3.0),
            50.0,
            id="drain time in seconds",
        ),
        pytest.param(
            {"metric": "age", "maxWorkers": "10"},
            signals_of(depth=500, consumers=5, age=300.0),
            120.0,  # 60 s x 10 / 5 consumers
            id="age capped through observed consumers",
        ),
        pytest.param(
            {"metric": "age", "maxWorkers": "10"},
            signals_of(depth=500, consumers=5, age=90.0),
            90.0,
            id="age under the cap is untouched",
        ),
        pytest.param(
            {"metric": "age", "maxWorkers": "10"},
            signals_of(depth=500, consumers=0, age=3000.0),
            600.0,  # no consumers: counts as 1
            id="age cap with no consumers",
        ),
        pytest.param(
            {"metric": "drainTime", "targetDrainTime": "30s", "dependencies": "postgres=100/5"},
            signals_of(depth=100, consumers=4, arrivals=5.0, completions=2.0),
            150.0,  # infinite, capped to 30 s x 20 / 4
            id="infinite drain time capped by the dependency",
        ),
        pytest.param(
            {"metric": "drainTime"},
            signals_of(depth=100, consumers=4, arrivals=5.0, completions=2.0),
            UNBOUNDED_SECONDS,
            id="infinite drain time sent as UNBOUNDED_SECONDS",
        ),
        pytest.param(
            {"metric": "age"},
            signals_of(depth=5, consumers=2, age=None),
            None,
            id="age unknown",
        ),
        pytest.param(
            {"metric": "drainTime"},
            signals_of(depth=5, consumers=2),
            None,
            id="drain time unknown",
        ),
    ],
)
def test_metric_value(metadata: dict[str, str], signals: QueueSignals, value: float | None) -> None:
    spec = spec_of(**metadata)
    decision, _ = run(spec, signals)
    if value is None:
        assert decision.metric_value is None
    else:
        assert decision.metric_value is not None
        assert decision.metric_value == pytest.approx(value)
        assert math.isfinite(decision.metric_value)


@pytest.mark.parametrize("consumers", [1, 2, 3, 5, 7, 10])
@pytest.mark.parametrize("metric", ["age", "drainTime"])
def test_metric_value_never_scales_past_the_ceiling(metric: str, consumers: int) -> None:
    spec = spec_of(metric=metric, maxWorkers="10", targetAge="60s")
    signals = signals_of(
        depth=10_000, consumers=consumers, age=5000.0, arrivals=9.0, completions=1.0
    )
    decision, _ = run(spec, signals)
    assert decision.metric_value is not None
    ceiling = 10
    assert decision.metric_value <= spec.metric_target * ceiling / consumers + 1e-9
    # what KEDA's Value metric type does with it: ceil(replicas x value / target)
    assert math.ceil(consumers * decision.metric_value / spec.metric_target - 1e-9) <= ceiling


def test_workers_metric_is_desired_workers_with_target_1() -> None:
    spec = spec_of(workerThroughput="1")
    decision, _ = run(spec, signals_of(depth=600, arrivals=0.0, completions=0.0))
    assert spec.metric_target == 1.0
    assert decision.metric_value == 10.0


# --- activation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "signals", "active"),
    [
        pytest.param({}, signals_of(depth=0, in_flight=0), False, id="empty and nothing runs"),
        pytest.param({}, signals_of(depth=0, in_flight=2), True, id="jobs in flight"),
        pytest.param({}, signals_of(depth=1, age=1.0), True, id="one job waits"),
        pytest.param({}, signals_of(depth=1, age=None), True, id="one job of unknown age"),
        pytest.param(
            {"activationDepth": "5"}, signals_of(depth=5, age=500.0), False, id="depth at threshold"
        ),
        pytest.param(
            {"activationDepth": "5"}, signals_of(depth=6, age=1.0), True, id="depth above threshold"
        ),
        pytest.param(
            {"activationDepth": "5"},
            signals_of(depth=2, in_flight=1),
            True,
            id="below depth threshold but a job runs",
        ),
        pytest.param(
            {"activationAge": "30s"}, signals_of(depth=3, age=10.0), False, id="young jobs"
        ),
        pytest.param(
            {"activationAge": "30s"}, signals_of(depth=3, age=30.0), False, id="age at threshold"
        ),
        pytest.param(
            {"activationAge": "30s"}, signals_of(depth=3, age=45.0), True, id="old enough"
        ),
        pytest.param(
            {"activationAge": "30s"}, signals_of(depth=3, age=None), True, id="age unknown"
        ),
        pytest.param(
            {"activationAge": "30s"},
            signals_of(depth=3, age=10.0, age_precision=Precision.LOWER_BOUND),
            True,
            id="age at least 10 s: may be older than the threshold",
        ),
        pytest.param(
            {"activationAge": "30s", "activationDepth": "5"},
            signals_of(depth=10, age=10.0),
            False,
            id="deep but young",
        ),
        pytest.param(
            {"activationAge": "30s", "activationDepth": "5"},
            signals_of(depth=3, age=100.0),
            False,
            id="old but shallow",
        ),
        pytest.param(
            {"activationAge": "30s", "activationDepth": "5"},
            signals_of(depth=10, age=40.0),
            True,
            id="deep and old",
        ),
    ],
)
def test_is_active(metadata: dict[str, str], signals: QueueSignals, active: bool) -> None:
    spec = spec_of(workerThroughput="1", **metadata)
    assert is_active(signals, spec) is active
    decision, _ = run(spec, signals)
    assert decision.active is active


# --- unknown depth -------------------------------------------------------------------------------


def test_unknown_depth_is_not_idle() -> None:
    # an adapter may report depth=None; unknown is never zero, so it must not be read as
    # "nothing waits" and answered with 0 workers (KEDA only falls back on errors)
    spec = spec_of(workerThroughput="1")
    decision, _ = run(spec, signals_of(depth=None, in_flight=None, consumers=3, arrivals=2.0))
    assert decision.reason is not Reason.IDLE
    assert decision.metric_value != 0.0


# --- learning once per sample, and scale-in on lower-bound arrivals ------------------------------


def test_a_sample_is_learned_from_once() -> None:
    """GetMetrics and IsActive both decide on the same sample: the second must not learn again."""
    spec = spec_of()
    first = signals_of(depth=100, consumers=4, arrivals=10.0, completions=12.0)
    _, state = run(spec, first, PolicyState(learned_throughput=2.0))
    _, again = run(spec, first, state)
    assert again.learned_throughput == state.learned_throughput


def lower_bound_signals(depth: int, in_flight: int | None = None) -> QueueSignals:
    return signals_of(
        depth=depth,
        in_flight=in_flight,
        arrivals=1.0,
        completions=1.0,
        rate_precision=Precision.LOWER_BOUND,
    )


def test_lower_bound_arrivals_scale_in_one_step_per_rate_window() -> None:
    # where the broker shows the jobs that run (3 here): one step per rate window
    spec = spec_of(workerThroughput="1", rateWindow="60s")
    state = PolicyState(last_desired=20)
    decision, state = decide(lower_bound_signals(depth=1, in_flight=3), spec, NOW, state)
    # the lower bound asks for 4 workers; the fleet steps down by 10% (2 workers) instead
    assert decision.desired_workers == 18
    assert decision.reason is Reason.SCALING_IN_SLOWLY
    held, state = decide(lower_bound_signals(depth=1, in_flight=3), spec, NOW + 30, state)
    assert held.desired_workers == 18  # within the same rateWindow: hold
    stepped, state = decide(lower_bound_signals(depth=1, in_flight=3), spec, NOW + 61, state)
    assert stepped.desired_workers == 17  # floor(10% of 18) = 1


def test_in_the_dark_the_fleet_steps_down_once_per_ten_minutes() -> None:
    # a plain list shows neither the arrivals nor the jobs that run: a step waits 600 s for the
    # last one's effect (jobs that wait) to show, whatever the rate window
    spec = spec_of(workerThroughput="1", rateWindow="60s")
    state = PolicyState(last_desired=20)
    decision, state = decide(lower_bound_signals(depth=1), spec, NOW, state)
    assert (decision.desired_workers, decision.reason) == (18, Reason.SCALING_IN_SLOWLY)
    for later in (61, 300, 599):
        held, state = decide(lower_bound_signals(depth=1), spec, NOW + later, state)
        assert held.desired_workers == 18
    stepped, state = decide(lower_bound_signals(depth=1), spec, NOW + 601, state)
    assert stepped.desired_workers == 17
    # a rate window longer than that sets the pace
    slow = spec_of(workerThroughput="1", rateWindow="15m")
    _, state = decide(lower_bound_signals(depth=1), slow, NOW, PolicyState(last_desired=20))
    assert decide(lower_bound_signals(depth=1), slow, NOW + 601, state)[0].desired_workers == 18


def test_small_fleets_step_down_one_worker() -> None:
    spec = spec_of(workerThroughput="1")
    decision, _ = decide(lower_bound_signals(depth=1), spec, NOW, PolicyState(last_desired=5))
    assert decision.desired_workers == 4


def test_exact_arrivals_scale_in_at_once() -> None:
    spec = spec_of(workerThroughput="1")
    exact = signals_of(depth=1, arrivals=1.0, completions=1.0)
    decision, _ = decide(exact, spec, NOW, PolicyState(last_desired=20))
    assert decision.desired_workers == 2
    assert decision.reason is Reason.KEEPING_UP


def test_observed_idle_queue_scales_in_at_once_despite_lower_bounds() -> None:
    spec = spec_of(workerThroughput="1")
    idle = signals_of(
        depth=0, in_flight=0, arrivals=0.0, completions=0.0, rate_precision=Precision.LOWER_BOUND
    )
    decision, _ = decide(idle, spec, NOW, PolicyState(last_desired=20))
    assert decision.desired_workers == 0
    assert decision.reason is Reason.IDLE


def test_lower_bound_arrivals_never_block_scale_up() -> None:
    spec = spec_of(workerThroughput="1")
    decision, state = decide(lower_bound_signals(depth=600), spec, NOW, PolicyState(last_desired=3))
    assert decision.desired_workers == 11  # 1/s + 600/60 s
    assert state.last_desired == 11


def test_stays_active_while_stepping_down_on_lower_bounds() -> None:
    # an empty list whose flow is unseen (no in-flight count): KEDA must not take the fleet to
    # zero while the step-down still holds workers (found by the simulator's step scenario)
    spec = spec_of(workerThroughput="1")
    unseen = signals_of(
        depth=0, arrivals=0.2, completions=0.2, rate_precision=Precision.LOWER_BOUND
    )
    decision, _ = decide(unseen, spec, NOW, PolicyState(last_desired=5))
    assert decision.reason is Reason.SCALING_IN_SLOWLY
    assert (decision.desired_workers, decision.active) == (4, True)
    # and of itself: 12 jobs arrived in the window, taken between samples
    assert is_active(unseen, spec) is True
    assert (
        is_active(replace(unseen, arrival_rate=Figure(0.0, Precision.LOWER_BOUND)), spec) is False
    )


def test_unknown_arrivals_scale_in_one_step_and_stay_active() -> None:
    # RabbitMQ with its management API down: AMQP gives the depth (0 ready) but not the rates nor
    # what runs; five consumers were busy. Reading the unknown rate as 0 took them to zero.
    spec = spec_of(workerThroughput="1")
    blind = signals_of(depth=0, consumers=5, arrivals=None, completions=None)
    decision, state = decide(blind, spec, NOW, PolicyState(last_desired=5))
    assert decision.reason is Reason.SCALING_IN_SLOWLY
    assert (decision.desired_workers, decision.active) == (4, True)
    backlog = signals_of(depth=30, consumers=5, arrivals=None, completions=None)
    # 30/60 s asks for 1: one step down, not to 1, and in the dark (nothing shows what runs)
    # the next step waits BLIND_STEP_DOWN
    decision, state = decide(backlog, spec, NOW + 61, state)
    assert decision.desired_workers == 4
    decision, _ = decide(backlog, spec, NOW + 601, state)
    assert decision.desired_workers == 3


# --- the arrival rate to keep up with -------------------------------------------------------------


def test_a_burst_in_the_backlog_is_not_counted_again_as_a_rate() -> None:
    # 5,000 jobs enqueued at once 15 s ago on top of 2/s: the window's rate says 85/s, but those
    # jobs are the backlog, which the drain term already counts
    spec = spec_of(workerThroughput="16", targetAge="2m")
    burst = signals_of(depth=5000, consumers=1, age=15.0, arrivals=85.0, completions=2.0)
    decision, _ = run(spec, burst)
    rate_before_backlog = (85.0 * 60 - 5000) / (60 - 15)
    assert decision.needed == pytest.approx((rate_before_backlog + 5000 / 120) / 16)
    assert decision.desired_workers == 3  # was 8 when the burst counted twice


def test_a_burst_partly_taken_counts_only_the_flow_before_it() -> None:
    # 46 s after the burst, 1,555 of its jobs were taken: the window's arrivals less the depth
    # count them as arrivals before the oldest waiting job (they came at the same instant), which
    # said 85/s (8 workers); the snapshots counted before the burst say 2/s
    spec = spec_of(workerThroughput="16", targetAge="2m")
    burst = signals_of(depth=3569, consumers=3, age=46.0, arrivals=85.4, completions=26.0, flow=2.0)
    decision, _ = run(spec, burst)
    assert decision.needed == pytest.approx((2.0 + 3569 / 120) / 16)
    assert decision.desired_workers == 2


def test_the_flow_rate_never_raises_the_window_rate() -> None:
    spec = spec_of(workerThroughput="2")
    slowing = signals_of(
        depth=100, consumers=10, age=5.0, arrivals=10.0, completions=10.0, flow=30.0
    )
    decision, _ = run(spec, slowing)
    assert decision.needed == pytest.approx((10.0 + 100 / 60) / 2)


def test_steady_arrivals_with_a_backlog_keep_their_rate() -> None:
    # 20/s with 100 jobs waiting for 5 s: the 1,100 jobs that came before were all taken
    spec = spec_of(workerThroughput="2")
    steady = signals_of(depth=100, consumers=10, age=5.0, arrivals=20.0, completions=20.0)
    decision, _ = run(spec, steady)
    assert decision.needed == pytest.approx((20.0 + 100 / 60) / 2)


@pytest.mark.parametrize(
    "age",
    [
        pytest.param(None, id="age unknown"),
        pytest.param(90.0, id="backlog older than the window"),
    ],
)
def test_window_rate_stands_without_an_age_inside_the_window(age: float | None) -> None:
    spec = spec_of(workerThroughput="2")
    signals = signals_of(depth=100, age=age, arrivals=20.0, completions=20.0)
    decision, _ = run(spec, signals)
    assert decision.needed is not None
    assert decision.needed >= (20.0 + 100 / 60) / 2


# --- utilisation: the busy share of the observed workers ------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "in_flight", "consumers", "expected"),
    [
        pytest.param({}, 3, 4, 0.75, id="one slot per worker"),
        pytest.param(
            {"workerConcurrency": "8", "jobDuration": "1s"}, 16, 4, 0.5, id="8 slots each"
        ),
        pytest.param({}, 9, 4, 1.0, id="prefetched messages count: at most 1"),
        pytest.param({}, 0, 4, 0.0, id="all idle"),
        pytest.param({}, 3, 0, None, id="no worker seen"),
        pytest.param({}, None, 4, None, id="in flight unknown"),
        pytest.param({}, 3, None, None, id="workers unknown"),
    ],
)
def test_utilisation(
    metadata: dict[str, str], in_flight: int | None, consumers: int | None, expected: float | None
) -> None:
    spec = (
        spec_of(workerThroughput="1", **metadata)
        if "jobDuration" not in metadata
        else spec_of(**metadata)
    )
    signals = signals_of(
        depth=2, in_flight=in_flight, consumers=consumers, arrivals=1.0, completions=1.0
    )
    decision, _ = run(spec, signals)
    assert decision.utilisation == (pytest.approx(expected) if expected is not None else None)


# --- paused queues --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signals", "state", "workers"),
    [
        # a backlog far over target: more workers would take nothing
        (
            signals_of(
                paused=True, depth=500, consumers=4, age=900.0, arrivals=5.0, completions=0.0
            ),
            None,
            4,
        ),
        # idle with jobs in flight: scaling to zero would stop them
        (
            signals_of(
                paused=True, depth=0, in_flight=3, consumers=3, arrivals=0.0, completions=0.0
            ),
            None,
            3,
        ),
        # workers not shown: the previous answer is held
        (signals_of(paused=True, depth=50, age=100.0), PolicyState(last_desired=6), 6),
        # nothing runs, none known: stays at zero, however many wait
        (signals_of(paused=True, depth=50, consumers=0, age=100.0), None, 0),
    ],
)
def test_a_paused_queue_holds_the_current_workers(
    signals: QueueSignals, state: PolicyState | None, workers: int
) -> None:
    decision, _ = run(spec_of(workerThroughput="1"), signals, state)
    assert decision.desired_workers == workers
    assert decision.reason is Reason.PAUSED
    assert decision.metric_value == workers
    assert decision.active is (workers > 0)


def test_a_paused_queue_still_obeys_the_bounds() -> None:
    signals = signals_of(paused=True, depth=10, consumers=9, age=5.0)
    assert run(spec_of(workerThroughput="1", maxWorkers="5"), signals)[0].desired_workers == 5
    low = signals_of(paused=True, depth=10, consumers=1, age=5.0)
    assert run(spec_of(workerThroughput="1", minWorkers="2"), low)[0].desired_workers == 2


def test_a_paused_queue_holds_the_replicas_on_the_age_metric() -> None:
    spec = spec_of(workerThroughput="1", metric="age", targetAge="30s")
    decision, _ = run(spec, signals_of(paused=True, depth=10, consumers=4, age=600.0))
    assert decision.metric_value == spec.metric_target  # KEDA: ceil(4 × 30 / 30) = 4


# --- the job time learned by Little's law ---------------------------------------------------------


def _busy(observed_at: float, *, in_flight: float, finished: float, depth: int = 0) -> QueueSignals:
    """20 jobs/s of jobs that hold a slot ``in_flight / 20`` s each, over a 60 s window."""
    return replace(
        signals_of(depth=depth, in_flight=round(in_flight), arrivals=20.0, completions=20.0,
                   mean_in_flight=in_flight, finished=finished),
        observed_at=observed_at,
    )  # fmt: skip


def test_a_job_duration_30_percent_short_is_corrected_from_the_first_window() -> None:
    # jobDuration says 1.4 s; 20 jobs/s keep 40 slots busy (Little's law: 2 s a job)
    spec = spec_of(jobDuration="1.4s", workerConcurrency="4")
    assert spec.worker_throughput == pytest.approx(4 / 1.4)
    state = PolicyState()
    decision, state = decide(_busy(NOW, in_flight=40.0, finished=1200.0), spec, NOW, state)
    # the given 1.4 s weighs as 20 jobs against the 1,200 x 5 windows just seen
    learned = (PRIOR_JOBS * 1.4 + 5 * 40.0 * 60) / (PRIOR_JOBS + 5 * 1200.0)
    assert decision.throughput == pytest.approx(4 / learned)
    assert learned == pytest.approx(2.0, rel=0.01)
    # the fleet for 20 jobs/s of 2 s jobs on 4 slots: 10 workers, not 7 (20 / (4 / 1.4) = 7.0)
    assert decision.desired_workers == 10


def test_a_job_duration_30_percent_long_is_corrected_as_well() -> None:
    spec = spec_of(jobDuration="2.6s", workerConcurrency="4")
    state = PolicyState()
    for second in range(10):  # ten samples of the same window figures, a second apart
        at = NOW + second
        decision, state = decide(_busy(at, in_flight=40.0, finished=1200.0), spec, at, state)
    assert decision.throughput == pytest.approx(2.0, rel=0.01)
    assert decision.needed == pytest.approx(10.0, rel=0.01)  # not 13 (20 / (4 / 2.6))


def test_a_job_time_learned_far_under_the_given_one_stops_at_its_floor() -> None:
    # jobDuration says 5 s; a rising flow's first windows see its short jobs finish, 1 s each
    spec = spec_of(jobDuration="5s", workerConcurrency="4")
    decision, _ = decide(_busy(NOW, in_flight=20.0, finished=1200.0), spec, NOW, PolicyState())
    assert decision.throughput == pytest.approx(4 / (LEARNED_FLOOR_SHARE * 5))  # 3 s, not 1 s
    assert decision.desired_workers == 15  # 20 jobs/s of 3 s jobs on 4 slots, not 5
    # without a jobDuration there is nothing to stop at: 1 s is what the windows show
    bare, _ = decide(_busy(NOW, in_flight=20.0, finished=1200.0), spec_of(workerConcurrency="4"),
                     NOW, PolicyState())  # fmt: skip
    assert bare.throughput == pytest.approx(4.0)


def test_a_few_jobs_do_not_overturn_the_given_job_duration() -> None:
    # a sparse queue: 2 jobs finished in the window, 10 s each, against a given 25 s
    spec = spec_of(jobDuration="25s", workerConcurrency="2")
    decision, _ = decide(_busy(NOW, in_flight=1 / 3, finished=2.0), spec, NOW, PolicyState())
    assert decision.throughput is not None
    learned = 2 / decision.throughput
    assert learned == pytest.approx((PRIOR_JOBS * 25 + 5 * 20.0) / (PRIOR_JOBS + 5 * 2.0))
    assert 18 < learned < 25


def test_the_job_time_is_learned_where_no_job_duration_is_given() -> None:
    spec = spec_of(workerConcurrency="4")  # rq shows its workers; no capacity keys
    decision, state = decide(_busy(NOW, in_flight=40.0, finished=1200.0), spec, NOW, PolicyState())
    assert decision.throughput == pytest.approx(2.0)
    again, _ = decide(_busy(NOW, in_flight=40.0, finished=1200.0), spec, NOW, state)
    assert again.throughput == decision.throughput  # the same sample is learned from once


def test_lower_bound_arrivals_scale_in_at_once_to_the_load_seen_in_flight() -> None:
    # an rq list empty at every sample: the marker's arrivals are a lower bound (0.5/s), but
    # 27 jobs of 10 slots run on average: the flow keeps 3 workers busy, so 15 go to 3 at once
    # rather than one step per rateWindow (io-bound-backlog, after its backlog: 1.38x the cost)
    spec = spec_of(jobDuration="5.5s", workerConcurrency="10")
    empty = signals_of(depth=0, in_flight=27, consumers=15, arrivals=0.5, completions=0.5,
                       rate_precision=Precision.LOWER_BOUND, mean_in_flight=27.0)  # fmt: skip
    decision, _ = decide(empty, spec, NOW, PolicyState(last_desired=15))
    assert decision.desired_workers == 3
    assert decision.reason is Reason.KEEPING_UP
    unseen = replace(empty, in_flight=None, mean_in_flight=None)  # a format that hides them
    decision, _ = decide(unseen, spec, NOW, PolicyState(last_desired=15))
    assert (decision.desired_workers, decision.reason) == (14, Reason.SCALING_IN_SLOWLY)


def test_a_burst_counted_while_the_list_was_empty_is_not_a_rate() -> None:
    # the list marker lost count while the list was empty, then 5,000 jobs came at once: the
    # window's lower-bound rate (85/s) holds the burst; since the counts are exact again 2/s came
    spec = spec_of(jobDuration="0.5s", workerConcurrency="8", targetAge="2m")
    burst = signals_of(depth=3569, consumers=3, age=46.0, arrivals=84.8, completions=26.0,
                       rate_precision=Precision.LOWER_BOUND, recent=2.0)  # fmt: skip
    decision, _ = run(spec, burst)
    assert decision.needed == pytest.approx((2.0 + 3569 / (120 - 0.5)) / 16)
    assert decision.desired_workers == 2


def test_a_saturated_fleet_with_jobs_waiting_keeps_its_workers_on_lower_bound_arrivals() -> None:
    # Sidekiq as the simulator shows it: arrivals a lower bound (1.2/s seen where 10/s come, 40
    # after the step in step.yaml); every one of 16 slots busy and 23 jobs waiting in the step's
    # first second. The rate says 0.4 workers; the running jobs say the 4 are all needed, and
    # the backlog is drained on top of them (before: a step in to 3 as the step came, 20-33 s
    # over a 30 s target where KEDA's messageRate had 1-24)
    spec = spec_of(jobDuration="1.2s", workerConcurrency="4", targetAge="30s")
    saturated = signals_of(depth=23, in_flight=16, consumers=4, age=1.0, arrivals=1.2,
                           completions=1.2, rate_precision=Precision.LOWER_BOUND)  # fmt: skip
    throughput = 4 / 1.2
    decision, _ = decide(saturated, spec, NOW, PolicyState(last_desired=4))
    flow = (1.2 * 60 - 23) / (60 - 1.0)  # the window's arrivals before the oldest waiting job
    waiting = 23 - flow * 30 / 4  # less the backlog the flow holds (a quarter of the target's)
    assert decision.needed == pytest.approx(4 + waiting / (30 - 1.2) / throughput)
    assert decision.desired_workers == 5
    # more than four rounds of the running jobs waiting is a burst: the drain plan alone
    burst, _ = decide(replace(saturated, depth=500), spec, NOW, PolicyState(last_desired=4))
    assert burst.needed == pytest.approx(500 / (30 - 1.2) / throughput)
    # where the counts are exact, the rate is the flow's
    exact = replace(saturated, arrival_rate=Figure(1.2, Precision.EXACT, "test"))
    counted, _ = decide(exact, spec, NOW, PolicyState(last_desired=4))
    assert counted.needed is not None and counted.needed < 1
    # Celery shows no workers, and counts its workers' prefetched messages in flight (64 for 16
    # slots at the default multiplier of 4): never more than the fleet answered before
    prefetched = replace(saturated, in_flight=64, consumers=None)
    held, _ = decide(prefetched, spec, NOW, PolicyState(last_desired=4))
    assert held.needed is not None and 4 < held.needed < 5
    assert held.desired_workers == 5


def test_the_backlog_drains_in_the_target_less_one_job() -> None:
    # 18 jobs of 25 s on workers of 2 slots, 2 minutes to start them all: the last start 25 s
    # before their slot is free again, so the plan is 18 jobs in 95 s, not 120 s (sporadic in
    # the stream format: 37 s over the target with the 120 s plan)
    spec = spec_of(jobDuration="25s", workerConcurrency="2", targetAge="2m")
    decision, _ = run(spec, signals_of(depth=18, consumers=1, age=1.0, arrivals=0.0,
                                       completions=0.0))  # fmt: skip
    assert decision.needed == pytest.approx(18 / 95 / (2 / 25))
    assert decision.desired_workers == 3
    # never under half the target: 60 s jobs drain in 60 s
    half = spec_of(jobDuration="60s", workerConcurrency="2", targetAge="2m")
    decision, _ = run(half, signals_of(depth=2, consumers=1, age=1.0, arrivals=0.0,
                                       completions=0.0))  # fmt: skip
    assert decision.needed == pytest.approx(2 / 60 / (2 / 60))
    # a mean job as long as the target is a mix's few long jobs: the target again (the mixed
    # scenario: 1.29x the cheapest policy's worker-seconds when it drained in half the target)
    # (on 5 workers whose running jobs are not shown: under the cap of a slot for each waiting
    # job on top of them, 5 + 1)
    slow = spec_of(jobDuration="10m", workerConcurrency="2", targetAge="2m")
    decision, _ = run(slow, signals_of(depth=2, consumers=5, age=1.0, arrivals=0.0,
                                       completions=0.0))  # fmt: skip
    assert decision.needed == pytest.approx(2 / 120 / (2 / 600))


def test_workers_still_draining_count_against_the_ceiling_on_a_scale_up() -> None:
    # the answer was 6 and the broker still sees 10 workers: 4 drain their long jobs and hold
    # the dependency until they stop, so under a ceiling of 12 the fleet may grow to 8, not 12
    # (a family of long-job mixes went above the ceiling for most of an hour without this)
    spec = spec_of(workerThroughput="1", dependencies="postgres=48/4")
    backlog = signals_of(depth=3000, consumers=10, arrivals=0.0, completions=0.0)
    decision, _ = decide(backlog, spec, NOW, PolicyState(last_desired=6))
    assert (decision.desired_workers, decision.reason) == (8, Reason.CLAMPED)
    settled = replace(backlog, consumers=6)  # they are gone: the whole ceiling again
    decision, _ = decide(settled, spec, NOW, PolicyState(last_desired=6))
    assert decision.desired_workers == 12
    # never a scale-in because of them: the answer holds what it was
    decision, _ = decide(replace(backlog, consumers=16), spec, NOW, PolicyState(last_desired=6))
    assert decision.desired_workers == 6


def test_a_step_up_in_the_flow_is_kept_up_with_before_the_window_shows_it() -> None:
    # 10/s went to 40/s 15 s ago: the window's rate says 17.5/s, the fast rate 40/s (20.8
    # sigmas over the 262 jobs 17.5/s expects in 15 s); 1.2 s jobs on 4 slots: 3.33/s a worker
    spec = spec_of(jobDuration="1.2s", workerConcurrency="4")
    stepped = replace(
        signals_of(depth=450, consumers=6, age=14.0, arrivals=17.5, completions=10.0, flow=10.0),
        fast_rate=40.0,
        fast_span=15.0,
    )
    decision, _ = run(spec, stepped)
    assert decision.needed == pytest.approx((40.0 + 450 / (60 - 1.2)) / (4 / 1.2))
    assert decision.desired_workers == 15
    # without the fast rate: the flow before the oldest job, 10/s
    decision, _ = run(spec, replace(stepped, fast_rate=None, fast_span=0.0))
    assert decision.needed == pytest.approx((10.0 + 450 / (60 - 1.2)) / (4 / 1.2))
    assert decision.desired_workers == 6


@pytest.mark.parametrize(
    ("fast", "expected"),
    [
        pytest.param(13.0, None, id="1.3x the window's rate: noise"),
        pytest.param(17.0, 17.0, id="1.7x and 8.6 sigmas: a step"),
        pytest.param(5.0, None, id="below the window's rate: kept"),
    ],
)
def test_the_fast_rate_counts_only_where_it_departs_upward(
    fast: float, expected: float | None
) -> None:
    signals = replace(
        signals_of(depth=5, consumers=2, arrivals=10.0, completions=10.0),
        fast_rate=fast,
        fast_span=15.0,
    )
    assert stepped_rate(signals) == expected


def test_a_small_flow_needs_more_than_a_few_jobs_to_step() -> None:
    # 0.1/s expects 1.5 jobs in 15 s, and the deviation is floored at one job's: 0.4/s (6 jobs,
    # 4.5 over) is 4x the rate but under 4 sigmas (4.9 jobs); 0.5/s (7.5 jobs, 6 over) steps
    quiet = replace(signals_of(depth=1, consumers=1, arrivals=0.1, completions=0.1), fast_span=15.0)
    assert stepped_rate(replace(quiet, fast_rate=0.4)) is None
    assert stepped_rate(replace(quiet, fast_rate=0.5)) == 0.5


def test_jobs_taken_between_samples_keep_the_queue_active_and_busy() -> None:
    # huey or a plain list: empty at every sample, no running jobs shown, but 20 jobs/s came in
    # the window (steady as huey went to zero workers after KEDA's first poll: 52.9 s over)
    spec = spec_of(jobDuration="2s", workerConcurrency="4")
    flowing = signals_of(depth=0, arrivals=20.0, completions=20.0)
    decision, _ = run(spec, flowing)
    assert (decision.desired_workers, decision.reason, decision.active) == (
        10,
        Reason.KEEPING_UP,
        True,
    )
    assert decision.needed == pytest.approx(20.0 / 2.0)
    # where the format shows no job running, the flow is plainly done: idle
    shown = replace(flowing, in_flight=0, arrival_rate=Figure(0.0, Precision.EXACT))
    decision, _ = run(spec, shown)
    assert (decision.desired_workers, decision.reason, decision.active) == (0, Reason.IDLE, False)
    # activationDepth 20: 0.3/s is 18 jobs in the window, not enough
    quiet = spec_of(jobDuration="2s", workerConcurrency="4", activationDepth="20")
    assert is_active(signals_of(depth=0, arrivals=0.3, completions=0.3), quiet) is False


def test_a_long_target_lets_the_fleet_be_short_of_the_flow_while_the_oldest_job_is_young() -> None:
    # 5-minute target, 2 s jobs on 4 slots (2/s a worker), 2.6/s: 1.3 workers' need. With the
    # oldest job 30 s old, 0.87 of a worker may be missing: one worker, not two (the broad family
    # with 5-minute targets: 1.3-1.6x the worker-seconds of the depth policies, every one 0 s
    # over); the allowance falls with the age, gone at three quarters of the target
    spec = spec_of(jobDuration="2s", workerConcurrency="4", targetAge="5m")
    young = signals_of(depth=40, consumers=2, age=30.0, arrivals=2.6, completions=2.6, flow=2.6)
    decision, _ = run(spec, young)
    need = 2.6 / 2 + 40 / (300 - 2) / 2
    assert decision.needed == pytest.approx(need)
    assert decision.desired_workers == 1  # ceil(1.367 - (1 - 30/225)) = ceil(0.5)
    older = replace(young, oldest_age=Figure(120.0, Precision.EXACT))
    assert run(spec, older)[0].desired_workers == 1  # ceil(1.367 - 0.467)
    for age in (150.0, 225.0):
        aged = replace(young, oldest_age=Figure(age, Precision.EXACT))
        assert run(spec, aged)[0].desired_workers == 2  # ceil(1.367 - 0.333), then - 0
    # a large fleet may be 40% of its need short: 26/s is 13.07 workers' need, of which
    # 5.23 x (1 - 30/225) = 4.53 may be missing (a depth policy's fleet lets the age float too)
    busy = replace(young, arrival_rate=Figure(26.0, Precision.EXACT), flow_rate=26.0)
    need = 26 / 2 + 40 / 298 / 2
    assert run(spec, busy)[0].needed == pytest.approx(need)
    assert run(spec, busy)[0].desired_workers == math.ceil(need - 0.4 * need * (1 - 30 / 225))
    assert run(spec, busy)[0].desired_workers == 9
    # none under a 2-minute target's share... a 1-minute target, or jobs as long as the target
    short = spec_of(jobDuration="2s", workerConcurrency="4", targetAge="1m")
    assert run(short, young)[0].desired_workers == 2
    long_jobs = spec_of(jobDuration="6m", workerConcurrency="4", targetAge="5m")
    # no patience: the whole need, 2 workers shown plus the arrivals of the 30 s horizon
    # (what runs is not shown: 2 + 2.6 x 30 / 4) and a slot for each waiting job (40 / 4; the
    # plan, 40 / 300 s x 90, is 12, and the 2 are counted once), where the steady need would be
    # 2.6 x 90 = 234
    long_need = run(long_jobs, young)[0]
    assert long_need.needed == pytest.approx(2 + 2.6 * 30 / 4 + 40 / 4)
    assert long_need.desired_workers == 32
    # a mean job over a thirtieth of the target (often a mix's few long jobs) may be a worker
    # short too, but never below the workers the running jobs hold: a scale-in stops the jobs
    # on the pods it takes (mixes-021, 18 s mean jobs on a 5-minute target: 22 workers taken
    # to 13 beside 17 busy, 512 s over the target where the floor has none)
    mix = spec_of(jobDuration="20s", workerConcurrency="4", targetAge="5m")
    mixed = replace(young, arrival_rate=Figure(0.26, Precision.EXACT), flow_rate=0.26)
    assert run(mix, mixed)[0].needed == pytest.approx(0.26 / 0.2 + 40 / 280 / 0.2)
    assert run(mix, mixed)[0].desired_workers == 2  # ceil(2.01 - 0.87), not shown what runs
    running = replace(mixed, in_flight=8)  # every slot of both workers busy
    assert run(mix, running)[0].desired_workers == 2
    fuller = replace(mixed, consumers=3, in_flight=10)  # 10 of 12 slots: 2.5 workers busy
    assert run(mix, fuller)[0].desired_workers == 3
    # short jobs are not held: 2 s jobs on a 5-minute target, 10 slots busy, one worker short
    assert run(spec, replace(young, consumers=3, in_flight=10))[0].desired_workers == 1
    # nor while the backlog is drained: 400 waiting is more than the flow, the plan is tight
    backlog = replace(young, depth=400)
    assert run(spec, backlog)[0].desired_workers == math.ceil(2.6 / 2 + 400 / 298 / 2)
    # an age that is only a lower bound says nothing of how young the oldest job is
    bound = replace(young, oldest_age=Figure(30.0, Precision.LOWER_BOUND))
    assert run(spec, bound)[0].desired_workers == 2


def test_an_empty_queue_keeps_the_workers_seen_until_its_first_window_shows_a_flow() -> None:
    # the scaler's first 20 s on an empty queue with 5 workers attached and nothing counted yet:
    # they are kept and the queue active (the broad family took warm fleets to zero at KEDA's
    # first poll, then booted them again for 2 minutes: 96 s over the target where judoscale
    # had none)
    spec = spec_of(jobDuration="3m", workerConcurrency="12")
    start = replace(
        signals_of(depth=0, in_flight=0, consumers=5, arrivals=0.0, completions=0.0),
        rate_span=20.0,
    )
    decision, _ = run(spec, start)
    assert (decision.desired_workers, decision.reason, decision.active) == (
        5,
        Reason.FIRST_WINDOW,
        True,
    )
    # a whole window with nothing: idle; an exact flow shown, or no worker seen: as ever
    assert run(spec, replace(start, rate_span=60.0))[0].desired_workers == 0
    # (2 jobs came and went in the 20 s: nothing runs, so none is needed, but the queue is
    # active: the flow goes on)
    flowing = run(spec, replace(start, arrival_rate=Figure(0.1, Precision.EXACT)))[0]
    assert (flowing.desired_workers, flowing.reason, flowing.active) == (0, Reason.IDLE, True)
    none = run(spec, replace(start, consumers=0))[0]
    assert (none.desired_workers, none.active) == (0, False)


def test_the_first_sample_does_not_cut_a_warm_fleet_to_the_few_jobs_that_run() -> None:
    # broad-287: the first sample of a BullMQ queue saw 12 workers, 2 jobs running and none
    # waiting, and no rate yet; the answer was 1 worker, which a fresh HPA applies at once, and
    # the flow (1.7 jobs/s of 25 s jobs: 11 workers) then waited 108 s for pods to boot
    spec = spec_of(jobDuration="25s", workerConcurrency="4")
    first = replace(
        signals_of(depth=0, in_flight=2, consumers=12, arrivals=None, completions=None),
        rate_span=0.0,
    )
    decision, _ = run(spec, first)
    assert (decision.desired_workers, decision.reason, decision.active) == (
        12,
        Reason.FIRST_WINDOW,
        True,
    )
    # jobs waiting beyond what the fleet seen serves: the need, as ever
    backlog = run(spec, replace(first, depth=2000, oldest_age=Figure(20.0, Precision.EXACT)))[0]
    assert backlog.desired_workers > 12 and backlog.reason is not Reason.FIRST_WINDOW
    # once an exact count shows the flow, or the window is whole: the need it shows
    shown = replace(first, arrival_rate=Figure(0.2, Precision.EXACT), rate_span=15.0)
    assert run(spec, shown)[0].desired_workers == 2  # 0.2 jobs/s of 25 s jobs: 5 slots
    whole = replace(first, arrival_rate=Figure(0.0, Precision.EXACT), rate_span=60.0)
    assert run(spec, whole)[0].desired_workers == 1  # what runs: 2 jobs of 4 slots


def test_patience_reads_the_longer_of_the_given_and_the_learned_job_time() -> None:
    # jobDuration 15 s, learned 9.5 s from windows without a mix's long jobs (1,878 slot-seconds
    # over 200 jobs a window, with the prior): 15 s is over a thirtieth of 5 minutes, so patience
    # keeps the workers the running jobs hold (mixes-021: 0 s over the target before patience,
    # 94.8 s with it on the learned time and no such floor)
    spec = spec_of(jobDuration="15s", workerConcurrency="4", targetAge="5m")
    learned = PolicyState(slot_seconds=1878.0, jobs_done=200.0, job_time_at=NOW)
    young = signals_of(depth=40, consumers=4, age=30.0, arrivals=2.6, completions=2.6, flow=2.6)
    decision, _ = run(spec, young, learned)
    assert decision.throughput == pytest.approx(4 / 9.5)
    assert decision.needed == pytest.approx(2.6 / (4 / 9.5) + 40 / (300 - 9.5) / (4 / 9.5))
    assert decision.desired_workers == 5  # ceil(6.50 - 2.25): what runs is not shown
    running = replace(young, consumers=7, in_flight=28)  # all 28 slots of 7 workers run a job
    assert run(spec, running, learned)[0].desired_workers == 7
    # the same learned time with a short jobDuration given: patience, below what runs
    short = spec_of(jobDuration="4s", workerConcurrency="4", targetAge="5m")
    shorter = PolicyState(slot_seconds=1922.0, jobs_done=200.0, job_time_at=NOW)
    decision, _ = run(short, running, shorter)
    assert decision.throughput == pytest.approx(4 / 9.5)
    assert decision.desired_workers == 5


def test_long_jobs_are_sized_for_what_runs_and_what_arrives_within_the_horizon() -> None:
    """One arrival in a 60 s window of 540 s jobs reads as a flow of 9 busy workers (Little's
    law). Where the workers and what runs are shown, the need is what runs still then plus
    the flow over the horizon (30 s, KEDA's polling interval, whatever the target):
    1·e^(-1/18) + 9·(1-e^(-1/18))."""
    spec = spec_of(jobDuration="540", workerConcurrency="1", targetAge="120")
    seen = signals_of(depth=0, in_flight=1, consumers=8, arrivals=1 / 60, completions=0.0)
    decision, _ = decide(seen, spec, NOW, PolicyState())
    decay = math.exp(-30 / 540)
    assert decision.needed == pytest.approx(1 * decay + 9 * (1 - decay))
    assert decision.desired_workers == 2
    ten = spec_of(jobDuration="540", workerConcurrency="1", targetAge="10m")
    assert decide(seen, ten, NOW, PolicyState())[0].needed == pytest.approx(decision.needed)
    # where the workers are not shown, nothing says what runs: the flow's steady need
    unseen = replace(seen, consumers=None)
    decision, _ = decide(unseen, spec, NOW, PolicyState())
    assert decision.needed == pytest.approx(9.0)
    # short jobs: the horizon covers many job times, and the steady need stands
    short = spec_of(jobDuration="0.5", workerConcurrency="1", targetAge="120")
    busy = signals_of(depth=0, in_flight=3, consumers=8, arrivals=10.0, completions=10.0)
    decision, _ = decide(busy, short, NOW, PolicyState())
    assert decision.needed == pytest.approx(5.0)


def test_a_backlog_of_long_jobs_is_drained_by_one_slot_a_job_at_most() -> None:
    # 6 jobs of 10 minutes waiting, workers of 2 slots, a 2-minute target: draining them in the
    # target at a job time each asked 15 workers, where 3 start every one of them at once
    # (broad-115: 67 workers asked for 18 jobs, 2.1x the worker-seconds of KEDA's queue length)
    spec = spec_of(jobDuration="10m", workerConcurrency="2", targetAge="2m")
    waiting = signals_of(depth=6, in_flight=2, consumers=1, age=30.0, arrivals=0.0,
                         completions=0.0)  # fmt: skip
    decision, _ = decide(waiting, spec, NOW, PolicyState(last_desired=1))
    running = math.exp(-30 / 600)  # the one busy worker's job still running a horizon on
    assert decision.needed == pytest.approx(running + 6 / 2)
    assert decision.desired_workers == 4
    # where the broker does not show what runs (Huey, a plain list), every slot of the workers
    # there are may hold a long job unseen: a slot for each waiting job on top of them, 4, not
    # the 15 of the plan (broad-201: 132 asked for 4 waiting 29-minute jobs on a plain list)
    unseen = replace(waiting, in_flight=None, consumers=None)
    decision, _ = decide(unseen, spec, NOW, PolicyState(last_desired=1))
    assert decision.needed == pytest.approx(1 + 6 / 2)
    assert decision.desired_workers == 4
    larger, _ = decide(unseen, spec, NOW, PolicyState(last_desired=10))
    assert larger.needed == pytest.approx(10 + 6 / 2)


def test_in_the_dark_the_busy_slots_grow_by_the_arrivals_of_a_horizon() -> None:
    # a Huey queue of 28-minute jobs, one slot a worker: one job in the 60 s window reads as
    # 1/60 jobs/s, a flow of 28 workers. Busy slots grow only by what arrives: within the 30 s
    # horizon, half a job on top of every worker there is (broad-184 asked 28 for one job)
    spec = spec_of(format="huey", jobDuration="1680s", workerConcurrency="1", targetAge="15s")
    one_job = signals_of(depth=0, arrivals=1 / 60, completions=0.0)
    decision, _ = decide(one_job, spec, NOW, PolicyState(last_desired=0))
    assert decision.needed == pytest.approx(0.5)
    assert decision.desired_workers == 1
    held, _ = decide(one_job, spec, NOW, PolicyState(last_desired=3))
    assert held.needed == pytest.approx(3.5)
    # no answer yet and no workers shown (a scaler restarted beside a fleet of unseen jobs):
    # nothing bounds what runs, so the steady need stands
    fresh, _ = decide(one_job, spec, NOW, PolicyState())
    assert fresh.needed == pytest.approx(28.0)
    # a flow of short jobs is its steady need: 2 jobs/s of 2 s on 4 slots, 1 worker
    short = spec_of(format="huey", jobDuration="2s", workerConcurrency="4", targetAge="15s")
    flow = signals_of(depth=0, arrivals=2.0, completions=2.0)
    assert decide(flow, short, NOW, PolicyState(last_desired=0))[0].needed == pytest.approx(1.0)


def test_a_requeued_job_past_the_target_asks_one_slot_not_a_fleet() -> None:
    # a pod scaled in under a short grace period gives its 8-minute job back with the time it
    # was first enqueued: one job 497 s old on 5 busy one-slot workers. The age rule read that
    # as a fleet 8 times too slow and asked 41 workers (broad-160); more than a slot for each
    # job waiting starts none of them sooner
    spec = spec_of(jobDuration="464s", workerConcurrency="1", targetAge="60s")
    requeued = signals_of(depth=1, in_flight=5, consumers=5, age=497.0, arrivals=0.0,
                          completions=0.0)  # fmt: skip
    decision, _ = decide(requeued, spec, NOW, PolicyState(last_desired=5))
    assert decision.reason is Reason.AGE_OVER_TARGET
    assert decision.needed == pytest.approx(5 + 1)
    assert decision.desired_workers == 6


def test_a_scale_up_for_long_jobs_is_taken_past_the_hpa_tolerance() -> None:
    # 32 workers of 3 slots, every slot busy with 9-minute jobs, 8 waiting: the need is 33,
    # which the HPA ignores (within 10% of 32), so the answer is 36, the fewest it acts on
    # (broad-163: asked 33-35 for a minute while the oldest job aged past its target)
    spec = spec_of(jobDuration="555s", workerConcurrency="3", targetAge="60s")
    waiting = signals_of(depth=8, in_flight=96, consumers=32, age=14.0, arrivals=0.0,
                         completions=0.0)  # fmt: skip
    decision, _ = decide(waiting, spec, NOW, PolicyState(last_desired=32))
    assert decision.needed is not None and 32 < decision.needed <= 33
    assert decision.desired_workers == 36
    # the age metric is a Value KEDA scales by, not a count of workers: left as it is
    by_age, _ = decide(waiting, replace(spec, metric=Metric.AGE), NOW, PolicyState(last_desired=32))
    assert by_age.desired_workers == 33
    # 10-second jobs free their slots within the target: the need stands
    short = spec_of(jobDuration="10s", workerConcurrency="3", targetAge="60s")
    flowing = replace(waiting, arrival_rate=Figure(9.8, Precision.EXACT, "test"),
                      completion_rate=Figure(9.8, Precision.EXACT, "test"))  # fmt: skip
    kept, _ = decide(flowing, short, NOW, PolicyState(last_desired=32))
    assert kept.needed is not None and 32 < kept.needed <= 33
    assert kept.desired_workers == 33
    # 11 of 10 is a step the HPA takes (|1 - 11/10| reads 0.10000000000000009): no more asked
    ten = replace(waiting, depth=3, in_flight=30, consumers=10)
    step, _ = decide(ten, spec, NOW, PolicyState(last_desired=10))
    assert step.needed is not None and 10 < step.needed <= 11
    assert step.desired_workers == 11


def test_a_short_target_keeps_one_worker_until_the_queue_is_idle_for_a_while() -> None:
    # broad-030: Celery pods that boot for 107 s, a 30 s target. No start from zero is measured
    # yet, so one is presumed slower than a target under a minute: the warm worker stays
    # while jobs came within WARM_IDLE, and goes once the queue has been idle that long
    spec = spec_of(targetAge="30s", jobDuration="1s", workerConcurrency="8")
    busy = signals_of(depth=0, consumers=None, in_flight=1, arrivals=0.5, completions=0.5)
    idle = signals_of(depth=0, consumers=None, in_flight=0, arrivals=0.0, completions=0.0)
    _, state = decide(busy, spec, NOW, PolicyState(last_desired=1))
    assert state.busy_at == NOW
    kept, state = decide(idle, spec, NOW + WARM_IDLE - 1, state)
    assert (kept.desired_workers, kept.reason, kept.active) == (
        1,
        Reason.PRESUMED_SLOW_START,
        True,
    )
    gone, _ = decide(idle, spec, NOW + WARM_IDLE + 1, state)
    assert (gone.desired_workers, gone.reason, gone.active) == (0, Reason.IDLE, False)
    # a start from zero measured within the target: zero between jobs, as before
    quick, _ = decide(idle, spec, NOW + 60, replace(state, cold_wait=20.0))
    assert (quick.desired_workers, quick.active) == (0, False)
    # a longer target leaves room for a start from zero: nothing presumed
    patient = spec_of(targetAge="300s", jobDuration="1s", workerConcurrency="8")
    _, state = decide(busy, patient, NOW, PolicyState(last_desired=1))
    assert decide(idle, patient, NOW + 60, state)[0].desired_workers == 0


def test_the_first_decision_presumes_recent_work_unless_no_worker_runs() -> None:
    # the scaler (re)starts beside a warm fleet on an empty queue: KEDA's first poll would take
    # it to zero, and the next job would wait for a boot; a Deployment the broker shows at
    # zero workers is not woken
    spec = spec_of(targetAge="30s", jobDuration="1s", workerConcurrency="8")
    unseen = signals_of(depth=0, consumers=None, in_flight=0, arrivals=0.0, completions=0.0)
    first, state = decide(unseen, spec, NOW, PolicyState())
    assert (first.desired_workers, first.reason, state.busy_at) == (
        1,
        Reason.PRESUMED_SLOW_START,
        NOW,
    )
    none_run = signals_of(depth=0, consumers=0, in_flight=0, arrivals=0.0, completions=0.0)
    zero, state = decide(none_run, spec, NOW, PolicyState())
    assert (zero.desired_workers, zero.active, state.busy_at) == (0, False, None)


def test_a_start_from_zero_slower_than_the_target_keeps_one_worker_from_then_on() -> None:
    # broad-072: RQ workers boot for 109 s, the target is 60 s. KEDA scaled the Deployment to
    # zero (the answers inactive for its cooldown); a job came at 1,000 s, and the first
    # worker took it at 1,140 s: every start from zero misses the target, so the next time
    # the queue empties one worker stays, and the queue stays active
    spec = spec_of(targetAge="60s", jobDuration="277s", workerConcurrency="1")
    zeroed = PolicyState(released=Released(inactive_since=0.0))
    waiting = signals_of(depth=1, consumers=0, in_flight=0, age=15.0, arrivals=0.0, completions=0.0)
    _, state = decide(waiting, spec, 1015.0, zeroed)
    assert (state.cold_job_at, state.cold_wait) == (1000.0, None)
    taken = signals_of(depth=0, consumers=1, in_flight=1, arrivals=0.0, completions=0.0)
    _, state = decide(taken, spec, 1140.0, state)
    assert (state.cold_job_at, state.cold_wait) == (None, 140.0)
    idle = signals_of(depth=0, consumers=1, in_flight=0, arrivals=0.0, completions=0.0)
    decision, _ = decide(idle, spec, 3000.0, state)
    assert (decision.desired_workers, decision.reason, decision.active) == (
        1,
        Reason.KEEPING_WARM,
        True,
    )
    # a start within the target, or none measured: the queue goes to zero as before
    quick = replace(state, cold_wait=45.0)
    assert decide(idle, spec, 3000.0, quick)[0].desired_workers == 0
    # a job that went untaken (deleted) says nothing of a start
    _, gone = decide(replace(waiting, depth=0), spec, 1030.0, replace(state, cold_job_at=1000.0))
    assert (gone.cold_job_at, gone.cold_wait) == (None, 140.0)


def test_where_workers_start_slowly_a_pause_in_the_flow_keeps_its_recent_peak() -> None:
    # broad-282: on-off traffic, Sidekiq pods that boot for 175 s, a 15 s target. Let go in a
    # pause, the fleet met every rise minutes late; held at the flow's recent peak (5.3
    # workers' need), it met them on time
    spec = spec_of(targetAge="15s", jobDuration="22s", workerConcurrency="9")
    peak = ((int(NOW // FLOW_BUCKET), 5.3),)
    slow = PolicyState(last_desired=7, start_lag=StartLag(shortest=180.0, flow_peaks=peak))
    pause = signals_of(
        depth=0, consumers=7, in_flight=0, mean_in_flight=0.0, arrivals=0.0, completions=0.0
    )
    held, state = decide(pause, spec, NOW, slow)
    assert (held.desired_workers, held.reason, held.active) == (6, Reason.HOLDING_FOR_RISES, True)
    # a quarter hour after the peak, the fleet goes
    gone, _ = decide(
        replace(pause, observed_at=NOW + FLOW_MEMORY + FLOW_BUCKET),
        spec,
        NOW + FLOW_MEMORY + FLOW_BUCKET,
        state,
    )
    assert (gone.desired_workers, gone.active) == (0, False)
    # starts within a minute (the HPA's sync and KEDA's poll are most of it): let go as before
    quick = replace(slow, start_lag=StartLag(shortest=45.0, flow_peaks=peak))
    assert decide(pause, spec, NOW, quick)[0].desired_workers == 0
    # a trough the fleet follows (16 of the 9-slot workers' slots busy: 1.8 workers, a third
    # of the peak) is not a pause: the fleet follows the flow down
    trough = replace(pause, in_flight=16, mean_in_flight=16.0)
    followed, _ = decide(trough, spec, NOW, slow)
    assert (followed.desired_workers, followed.reason) == (2, Reason.KEEPING_UP)


def test_the_time_a_start_takes_is_learned_from_the_answers_and_the_workers_shown() -> None:
    spec = spec_of(targetAge="15s", jobDuration="22s", workerConcurrency="9")
    backlog = signals_of(
        depth=40, consumers=2, in_flight=18, age=5.0, arrivals=1.0, completions=0.8
    )
    asked, state = decide(backlog, spec, NOW, PolicyState(last_desired=2))
    assert asked.desired_workers > 2 and state.start_lag.asked_at == NOW
    more = replace(backlog, consumers=3, observed_at=NOW + 175.0)
    _, state = decide(more, spec, NOW + 175.0, state)
    assert state.start_lag.shortest == 175.0


# --- the workers that run long jobs, where the flow filled the ceiling ----------------------------


def _after_a_full_ceiling(peak: float) -> PolicyState:
    """A state whose flow needed ``peak`` workers within the flow's memory."""
    return PolicyState(start_lag=StartLag(flow_peaks=((int(NOW // FLOW_BUCKET), peak),)))


def test_workers_that_run_long_jobs_are_kept_where_the_flow_filled_the_ceiling() -> None:
    # 5 ten-minute jobs run on 8 workers of 4 slots, nothing waits: they keep 1.25 workers busy,
    # but each may run on a different one, and a worker let go drains its job for up to ten
    # minutes, holding its share of a ceiling of 10 the flow needed whole a few minutes ago
    spec = spec_of(jobDuration="10m", workerConcurrency="4", targetAge="60s", maxWorkers="10")
    lull = signals_of(depth=0, in_flight=5, consumers=8, arrivals=0.01, completions=0.01,
                      mean_in_flight=5.0)  # fmt: skip
    decision, _ = run(spec, lull, _after_a_full_ceiling(10.0))
    assert (decision.desired_workers, decision.reason) == (5, Reason.KEEPING_RUNNING_JOBS)
    # the flow's peak short of the ceiling: the room is not needed, the busy slots are kept
    decision, _ = run(spec, lull, _after_a_full_ceiling(9.0))
    assert decision.desired_workers == 2
    assert decision.reason is not Reason.KEEPING_RUNNING_JOBS
    # jobs shorter than the target drain within it: not kept either
    short = spec_of(jobDuration="30s", workerConcurrency="4", targetAge="60s", maxWorkers="10")
    decision, _ = run(short, lull, _after_a_full_ceiling(10.0))
    assert decision.reason is not Reason.KEEPING_RUNNING_JOBS
    # never more than the workers shown, whatever runs
    crowded = replace(lull, in_flight=20, mean_in_flight=20.0)
    decision, _ = run(spec, crowded, _after_a_full_ceiling(10.0))
    assert decision.desired_workers == 8
