"""The scaling policy: a pure function from signals and a trigger spec to a decision.

No I/O and no clock reads: ``now`` and the state that spans calls go in, and come out.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from brokers.base import Precision, QueueSnapshot
from scaler.ceilings.headroom import ProbeFigure
from scaler.ceilings.limit import Ceiling, trigger_ceiling
from scaler.draining import (
    HPA_STABILIZATION,
    HPA_TOLERANCE,
    KEDA_COOLDOWN,
    NONE_RELEASED,
    Released,
    after_answer,
    drain_horizon,
    given_job_seconds,
    held_up,
    hpa_holds,
    likely_draining,
    room,
    settle,
)
from scaler.knee import KneeState, learn, with_knee
from scaler.signals import QueueSignals
from scaler.start_lag import NO_LAG, StartLag, held_flow, learn_lag, remember_flow
from scaler.trigger_spec import Metric, TriggerSpec

#: KEDA turns NaN and infinities into 0; an unbounded drain time is sent as this many seconds
UNBOUNDED_SECONDS = 1e6
#: weight of a new observation when learning per-worker throughput
LEARNING_RATE = 0.3
#: while arrivals are only a lower bound, scale in by at most this share (and one worker) per
#: rateWindow: a lower bound must not pass for the rate, but must not pin the fleet up forever
LOWER_BOUND_STEP_DOWN = 0.1
#: ... and where the broker does not show the jobs that run either (plain lists, Huey, Celery),
#: by at most one such step per this many seconds: a step down in the dark is tested only by
#: what follows it (jobs that wait), and the pods it let go may drain for minutes
#: (``scaler.draining.drain_horizon``); a step a minute took a fleet whose jobs
#: ran unseen down by half while it was busy, and the scale-up after it added pods beside those
#: still draining, past the dependency's ceiling (Judoscale's default delay is 10 minutes too)
BLIND_STEP_DOWN = 600.0
#: the learned job time follows the windows' figures with this time constant, in rate windows
JOB_TIME_WINDOWS = 5.0
#: a given jobDuration weighs as much as this many jobs observed
PRIOR_JOBS = 20.0
#: jobs completed before a job time is learned where none is given
MIN_LEARNED_COMPLETIONS = 10.0
#: the job time learned is never taken below this share of a given jobDuration: where the flow
#: rises and some jobs are long, the windows see the short jobs finish before the long ones
#: have piled up to their share of the slots (see :func:`learned_job_seconds`)
LEARNED_FLOOR_SHARE = 0.6
#: where the target age is at least this long, and a job takes less than it, the fleet may be
#: a little short of the need while the oldest job is young (see :func:`_patience`)
PATIENT_TARGET = 120.0
#: ... and the allowance is gone once the oldest job is this share of the target old
PATIENT_SHARE = 0.75
#: ... and it is one worker, or this share of the need where that is more
PATIENT_FLEET_SHARE = 0.4
#: ... and where a job takes more than this share of the target, never below the workers the
#: running jobs hold now: a mean job a larger share of it is often a mix's few long jobs, which a
#: scale-in stops on the pods it takes (their whole time lost, and their age back at the head)
PATIENT_JOB_SHARE = 1 / 30
#: the fast rate counts as a step up in the flow where it is at least this many times the
#: window's rate ...
STEP_RATIO = 1.5
#: ... and its excess over the window's rate is at least this many Poisson standard deviations
#: of the arrivals the window's rate expects in the fast rate's span
STEP_SIGMAS = 4.0
#: where the broker shows the workers and what runs, the flow is sized for the slots busy this
#: many seconds ahead, and where it does not show what runs the flow adds at most this many
#: seconds of arrivals to the workers there are (see :func:`_horizon_busy`): KEDA's default
#: polling interval, when the next answer comes and can add what arrived meanwhile (half the
#: target age, at least 60 s, sized long-job fleets for a minute or more of a burst's rate as
#: if it went on)
HORIZON = 30.0
#: a backlog of the flow's arrivals over this share of the target age waits without a plan to
#: drain it (see :func:`_held_backlog`) ...
HELD_SHARE = 0.25
#: ... where a job takes less than this share of the target
HELD_JOB_SHARE = 0.25
#: where the target age is shorter than this, a start from zero (KEDA's poll, then a pod that
#: is scheduled, pulls its image and boots) is presumed slower than the target until one is
#: measured: one worker is kept meanwhile (see :func:`_keeping_one`)
PRESUMED_SLOW_START_TARGET = 60.0
#: ... while jobs came, waited or ran within this many seconds; a queue idle for longer goes
#: to zero as before, and its next start from zero is measured
WARM_IDLE = 900.0
#: a backlog of more than this many rounds of the running jobs is a burst, not a flow the
#: busy fleet is short of (see :func:`_saturated`; 2 lost a draw of broad, 4 and 8 the same)
SATURATED_ROUNDS = 4.0


class Reason(enum.StrEnum):
    IDLE = "idle"
    KEEPING_UP = "keeping up"
    DRAINING_BACKLOG = "draining backlog"
    AGE_OVER_TARGET = "age over target"
    MIN_WORKERS = "minWorkers"
    LEARNING_THROUGHPUT = "learning throughput"
    CLAMPED = "clamped"
    #: the dependency's limit is shared with other pools, and this pool's share is less than
    #: its need (applied after :func:`decide`, by :mod:`scaler.budget_registry`)
    SHARED_BUDGET = "shared budget"
    DEPTH_UNKNOWN = "depth unknown"
    #: the library holds the queue paused: more workers cannot help, fewer would stop jobs
    PAUSED = "paused: holding the workers"
    #: arrivals are a lower bound or unknown, so scale-in goes one step per rateWindow
    SCALING_IN_SLOWLY = "scaling in slowly: arrivals are a lower bound or unknown"
    #: before the first rate window shows the flow: the workers seen are kept
    FIRST_WINDOW = "first rate window: holding the workers"
    #: a worker let go would hold the dependency while it drains, for longer than the target
    #: age, and leave no room for a worker to take the next job
    KEEPING_ROOM = "keeping one worker: one let go would fill the ceiling while it drains"
    #: the last job that waited for a fleet scaled to zero waited longer than the target age
    KEEPING_WARM = "keeping one worker: a start from zero took longer than the target"
    #: none measured yet, and the target is short: a start from zero is presumed slower
    PRESUMED_SLOW_START = "keeping one worker: a start from zero may take longer than the target"
    #: the workers asked for took longer than the target age to start, and the flow stopped:
    #: its recent peak is kept for the next rise
    HOLDING_FOR_RISES = "holding the flow's recent peak: workers start slower than the target"
    #: the flow needed the whole ceiling within the flow's memory, and a job takes at least the
    #: target: a worker that runs a job let go would drain it beside the next rise
    KEEPING_RUNNING_JOBS = "keeping the workers that run long jobs: the flow filled the ceiling"


@dataclass(frozen=True, slots=True)
class PolicyState:
    """What the policy carries from one call to the next for one trigger."""

    #: jobs per second one worker completes, learned from saturated workers
    learned_throughput: float | None = None
    #: the sample time the throughput was last learned from
    learned_at: float | None = None
    #: the previous answer, and when it last stepped down while arrivals were a lower bound
    last_desired: int | None = None
    last_step_down: float | None = None
    #: the throughput knee learned so far (``learnKnee``)
    knee: KneeState | None = None
    #: Little's law per rate window, averaged: job-slot seconds busy and jobs completed, and
    #: the sample time they were last learned from (see :func:`learned_job_seconds`)
    slot_seconds: float | None = None
    jobs_done: float | None = None
    job_time_at: float | None = None
    #: the largest answer of the last ``HPA_STABILIZATION`` seconds and when it was given: the
    #: replicas the HPA may still hold (see :func:`_with_draining`)
    peak_desired: int | None = None
    peak_at: float | None = None
    #: the workers the answers let go that may still drain (see :mod:`scaler.draining`)
    released: Released = NONE_RELEASED
    #: the enqueue time of the oldest job seen waiting for a fleet KEDA may have scaled to
    #: zero, until jobs are taken; and how long the last such job waited for its first take
    cold_job_at: float | None = None
    cold_wait: float | None = None
    #: the last sample time at which jobs arrived, waited or ran
    busy_at: float | None = None
    #: how long asked-for workers took to show, and the flow's recent peak
    start_lag: StartLag = NO_LAG


@dataclass(frozen=True, slots=True)
class Decision:
    desired_workers: int
    ceiling: int | None
    limited_by: str | None
    reason: Reason
    #: the value to report for the trigger's metric (workers, age or drain time);
    #: None when the figure it needs is unknown
    metric_value: float | None
    #: None when the queue's depth is unknown
    active: bool | None
    #: workers needed before rounding and bounds; None when it could not be worked out
    needed: float | None
    throughput: float | None
    #: the busy share of the observed workers (see :func:`utilisation`)
    utilisation: float | None = None
    #: every limit behind ``ceiling`` (maxWorkers, each dependency: its figure and source)
    ceiling_parts: Ceiling | None = None
    #: the throughput knee learned so far, with ``learnKnee``
    knee: KneeState | None = None
    #: what the reason text adds (a pool's: the queue that drives the decision)
    detail: str | None = None

    @property
    def reason_label(self) -> str:
        """The reason without figures: ``clamped by postgres`` (a metric label)."""
        if self.reason is Reason.CLAMPED:
            return f"clamped by {self.limited_by}"
        if self.reason is Reason.SHARED_BUDGET:
            return f"shared budget {self.limited_by}"
        return self.reason.value

    @property
    def reason_text(self) -> str:
        """The reason, with the live figure behind a probed ceiling:
        ``clamped by postgres (live: 40 slots, 37 free)``."""
        note = self.ceiling_parts.note if self.ceiling_parts is not None else None
        text = self.reason_label
        if self.reason is Reason.SHARED_BUDGET and note:
            text = f"{text}: {note}"
        if self.reason is Reason.CLAMPED and note:
            text = f"{text} ({note})"
        return text if self.detail is None else f"{text}; {self.detail}"

    @property
    def ceiling_unknown(self) -> str | None:
        """Why no ceiling can be set (a probe with nothing to go on), else None."""
        return self.ceiling_parts.unknown if self.ceiling_parts is not None else None

    @property
    def ceiling_warnings(self) -> tuple[str, ...]:
        """What a probe that cannot read does to the ceiling, one line per such dependency."""
        if self.ceiling_parts is None:
            return ()
        return tuple(
            f"{part.name}: {part.note}"
            for part in self.ceiling_parts.each
            if part.source in ("last good", "fallback", "hold")
        )


def decide(
    signals: QueueSignals,
    spec: TriggerSpec,
    now: float,
    state: PolicyState,
    probes: Mapping[str, ProbeFigure] | None = None,
    history: Sequence[QueueSnapshot] = (),
) -> tuple[Decision, PolicyState]:
    """How many workers ``spec``'s queue needs now, and why. ``probes``: the figures of the
    dependency probes the spec names, by connection profile (none: every probed dependency
    falls back, see :func:`scaler.ceilings.limit.dependency_ceiling`). ``history``: the samples
    the signals come from, which the knee learns from (``learnKnee``)."""
    state = _learn_job_time(signals, spec, _learn(signals, spec, state))
    state = _learn_cold_wait(signals, state, now)
    state = _learn_busy(signals, state, now)
    throughput = _throughput(spec, state)
    flow = _flow_need(signals, spec, throughput)
    state = _remember_flow(state, flow, now)
    # the workers that run now: the broker's count, else the previous answer
    workers_now = signals.consumers if signals.consumers is not None else state.last_desired
    needed, reason = _needed(signals, spec, throughput, workers_now)
    parts = trigger_ceiling(spec, probes or {}, workers_now)
    if spec.learn_knee:
        knee = learn(state.knee or KneeState(), history, spec.worker_concurrency or 1)
        state, parts = replace(state, knee=knee), with_knee(parts, knee)
    ceiling, limiter = parts.workers, parts.limited_by
    needed, reason = _keeping_running_jobs(
        signals, spec, throughput, state, ceiling, needed, reason
    )

    desired = _rounded(needed, reason, signals, spec, throughput)
    if signals.paused:  # hold what runs: nothing is taken while paused, and jobs still run
        desired, reason = (workers_now or 0), Reason.PAUSED
    if signals.depth is None:  # nothing to decide from: hold what runs, report nothing
        desired = max(desired, spec.min_workers)
    if desired < spec.min_workers:
        desired, reason = spec.min_workers, Reason.MIN_WORKERS
    if (signals.depth or signals.in_flight) and desired < 1 and not signals.paused:
        desired = 1
        reason = reason if reason is not Reason.IDLE else Reason.KEEPING_UP
    if not signals.paused:
        desired, reason, state = _scale_in_on_uncertain_arrivals(
            signals, spec, now, state, desired, reason
        )
        desired, reason = _first_window(signals, spec, desired, reason)
        desired = _past_tolerance(signals, spec, throughput, workers_now, desired)
        desired, reason = _holding_for_rises(spec, state, flow, desired, reason)
    if ceiling is not None and desired > ceiling:
        desired, reason = ceiling, Reason.CLAMPED
    released = settle(state.released, signals, spec, now)
    desired, reason = _with_draining(signals, state, released, ceiling, desired, reason)
    kept = _keeping_one(signals, spec, state, released, ceiling, now)
    if kept is not None and desired == 0 and reason is not Reason.CLAMPED and not signals.paused:
        desired, reason = 1, kept
    draining = likely_draining(released, signals, spec, now)
    active = _active(signals, spec, (desired, reason), ceiling, draining)
    if desired == 0 and reason not in (Reason.PAUSED, Reason.CLAMPED):
        reason = Reason.IDLE
    if parts.unknown is None:  # an answer KEDA gets: what the fleet will be, held on missing data
        state = _answered(state, desired, now)
        lag = learn_lag(state.start_lag, signals.consumers, desired, now)
        if lag is not state.start_lag:
            state = replace(state, start_lag=lag)
        held = _held_replicas(signals, desired, active)
        let_go = after_answer(released, held, now, signals.consumers, active is False)
        state = replace(state, released=let_go)
    decision = Decision(
        desired_workers=desired,
        ceiling=ceiling,
        limited_by=limiter if reason is Reason.CLAMPED else None,
        reason=reason,
        # a probe with nothing to go on: no answer (UNAVAILABLE) rather than an unbounded one
        metric_value=None if parts.unknown else _metric_value(signals, spec, desired, ceiling),
        active=active,
        needed=needed,
        throughput=throughput,
        utilisation=utilisation(signals, spec),
        ceiling_parts=parts if spec.dependencies or spec.learn_knee else None,
        knee=state.knee,
    )
    return decision, state


def _flow_need(signals: QueueSignals, spec: TriggerSpec, throughput: float | None) -> float | None:
    """The flow's need now, in workers (a fraction), which the flow memory keeps
    (:func:`scaler.start_lag.remember_flow`): its arrivals over a worker's throughput, or where
    nothing waits the workers its running jobs keep busy (a list its workers empty between
    samples shows a rate of next to nothing). None where the throughput or the depth is not
    known."""
    if not throughput or signals.depth is None:
        return None
    running = None if signals.depth else _running(signals, spec, throughput)
    busy = _busy_workers(signals, spec, running)
    return max(_future_arrival_rate(signals) / throughput, busy or 0.0)


def _remember_flow(state: PolicyState, flow: float | None, now: float) -> PolicyState:
    """The state with the flow's need now in its memory (read by :func:`_holding_for_rises`
    and :func:`_keeping_running_jobs`), whether or not the queue is paused."""
    lag = remember_flow(state.start_lag, flow, now)
    return state if lag is state.start_lag else replace(state, start_lag=lag)


def _holding_for_rises(
    spec: TriggerSpec, state: PolicyState, flow: float | None, desired: int, reason: Reason
) -> tuple[int, Reason]:
    """At least the flow's recent peak where the workers an answer asks for take longer than
    the target age to start and the flow stopped (:func:`scaler.start_lag.held_flow`; ``flow``:
    its need now, :func:`_flow_need`): the next rise would wait a whole start for the fleet let
    go. ``broad-282``: on-off traffic, Sidekiq pods that boot for 175 s, a 15 s target; the
    fleet was let go in each pause and every rise waited minutes (632 s over the target where
    Judoscale, which held it, had 8)."""
    if flow is None:
        return desired, reason
    held = held_flow(state.start_lag, flow, spec.target_age)
    if desired < held:
        return held, Reason.HOLDING_FOR_RISES
    return desired, reason


def _keeping_running_jobs(
    signals: QueueSignals,
    spec: TriggerSpec,
    throughput: float | None,
    state: PolicyState,
    ceiling: int | None,
    needed: float | None,
    reason: Reason,
) -> tuple[float | None, Reason]:
    """At least a worker for each job that runs (up to the workers shown: the jobs are spread
    over them, not packed into the fewest), where the flow's need of the last 15 minutes
    (``scaler.start_lag.FLOW_MEMORY``) reached the whole ceiling and a job takes at least the
    target age. A worker let go drains its jobs for as long as they run, holding its share of
    the ceiling, and the next rise finds the room full: ``ceilings-251`` (AMQP on-off traffic,
    a ceiling of 10 workers, 2-minute pods) was 636 s over a 15 s target, none with the
    workers kept. Where the broker shows the workers and what runs; pools do not keep them
    (they remember no flow); a ceiling of 0 keeps none."""
    if not ceiling or needed is None or not throughput or not spec.worker_concurrency:
        return needed, reason
    if not signals.consumers or not signals.in_flight:
        return needed, reason
    if state.start_lag.peak_flow < ceiling:
        return needed, reason
    if _longer_job_seconds(spec, throughput) < spec.target_age:
        return needed, reason
    spread = float(min(signals.consumers, signals.in_flight))
    if spread > needed:
        return spread, Reason.KEEPING_RUNNING_JOBS
    return needed, reason


def _answered(state: PolicyState, desired: int, now: float) -> PolicyState:
    """The state after answering ``desired``: the last answer, and the largest of the HPA's
    stabilisation window."""
    state = replace(state, last_desired=desired)
    peak, peak_at = state.peak_desired, state.peak_at
    if peak is None or peak_at is None or desired >= peak or now - peak_at > HPA_STABILIZATION:
        state = replace(state, peak_desired=desired, peak_at=now)
    return state


def _with_draining(
    signals: QueueSignals,
    state: PolicyState,
    released: Released,
    ceiling: int | None,
    desired: int,
    reason: Reason,
) -> tuple[int, Reason]:
    """Workers still draining hold the dependency until they stop: a scale-up may not take
    the fleet past the ceiling beside them, those the answers let go that may still drain
    (``released``, :mod:`scaler.draining`) nor those the broker sees beyond the replicas the
    HPA may hold (the largest answer of its stabilisation window)."""
    last, seen = state.last_desired, signals.consumers
    if ceiling is not None and desired > (free := room(released, ceiling, last)):
        desired, reason = free, Reason.CLAMPED
    if ceiling is None or last is None or seen is None or desired <= last:
        return desired, reason
    # the replicas the HPA may still hold after a scale-in are not draining
    held = held_up(max(last, state.peak_desired or 0))
    seen_room = max(min(last, ceiling), ceiling - max(0, seen - held))
    if desired > seen_room:
        return seen_room, Reason.CLAMPED
    return desired, reason


def _held_replicas(signals: QueueSignals, desired: int, active: bool | None) -> int:
    """The replicas an answer holds, as the count of those let go takes them: where the broker
    shows no workers, an active answer of 0 holds one (KEDA keeps a replica while the trigger
    is active, and the HPA's least is 1), and the count lets it go with the rest once the
    answers are inactive for KEDA's cooldown; where it shows the workers, it shows that one
    too (counting it there let a live Dramatiq pod read as one that drains, ``broad-243``)."""
    if active and desired == 0 and signals.consumers is None:
        return 1
    return desired


def _keeping_one(
    signals: QueueSignals,
    spec: TriggerSpec,
    state: PolicyState,
    released: Released,
    ceiling: int | None,
    now: float,
) -> Reason | None:
    """Why one worker is kept, and the queue active, where the answer would be 0 (neither
    clamped nor paused: :func:`decide` applies it); None where none is.

    ``KEEPING_ROOM``: the format shows neither the workers nor what runs (Huey, a plain list)
    and letting the last one go would fill the ceiling with workers that may drain (those let
    go before, and the replicas the HPA holds) for longer than the target age
    (:func:`scaler.draining.drain_horizon`): nothing the broker shows could end the drain
    sooner, so the next job would wait for the horizon with no worker at all (``mixes-202``:
    a ceiling of 1, the one pod let go drained a long job, and 200 jobs waited 15 minutes
    while the answer was clamped to 0; the fleet that kept its pod had none waiting).

    ``KEEPING_WARM``: the last job that waited for a fleet scaled to zero waited longer than
    the target age (:func:`_learn_cold_wait`): a start from zero cannot meet the target,
    however soon it is asked (pods that boot for longer than it: ``broad-072``, RQ workers
    that boot for 109 s, a 60 s target). The worker is kept from then on, while the scaler
    runs: with it no start from zero is measured again. ``minWorkers`` keeps workers from the
    first start.

    ``PRESUMED_SLOW_START``: no start from zero measured yet, a target shorter than
    ``PRESUMED_SLOW_START_TARGET``, and jobs came, waited or ran within ``WARM_IDLE``: KEDA's
    poll alone may take 30 s, and a pod that is scheduled, pulls its image and boots often as
    long again, so a queue with a target under a minute that goes to zero between jobs meets the
    next one late (``broad-030``: Celery pods that boot for 107 s, a 30 s target, 114 s over
    where a worker kept all hour had none). Once the queue has been idle for ``WARM_IDLE`` the
    worker goes, and the next start from zero is measured (``KEEPING_WARM`` from then on if it
    was too slow, zero between jobs if it was not)."""
    if _fills_ceiling(signals, spec, state, released, ceiling):
        return Reason.KEEPING_ROOM
    if state.cold_wait is not None and state.cold_wait > spec.target_age:
        return Reason.KEEPING_WARM
    presumed = state.cold_wait is None and spec.target_age < PRESUMED_SLOW_START_TARGET
    if presumed and state.busy_at is not None and now - state.busy_at < WARM_IDLE:
        return Reason.PRESUMED_SLOW_START
    return None


def _fills_ceiling(
    signals: QueueSignals,
    spec: TriggerSpec,
    state: PolicyState,
    released: Released,
    ceiling: int | None,
) -> bool:
    """Whether letting the last worker go would fill ``ceiling`` with workers that may drain
    for longer than the target age, unseen (see :func:`_keeping_one`)."""
    if ceiling is None or signals.consumers is not None or signals.in_flight is not None:
        return False
    if drain_horizon(spec) <= spec.target_age:
        return False
    held = released.held if released.held is not None else (state.last_desired or 0)
    return held >= 1 and released.workers + held >= ceiling


def _learn_busy(signals: QueueSignals, state: PolicyState, now: float) -> PolicyState:
    """The last time jobs arrived, waited or ran (see :func:`_keeping_one`); at the first
    decision, now, unless the broker shows no worker at all: the scaler (re)started beside a
    fleet whose recent work it has not seen, and a warm fleet taken to zero at KEDA's first
    poll boots again for the next job."""
    if signals.depth or signals.in_flight or signals.arrival_rate.value:
        return replace(state, busy_at=now)
    if state.busy_at is None and state.last_desired is None and signals.consumers != 0:
        return replace(state, busy_at=now)
    return state


def _learn_cold_wait(signals: QueueSignals, state: PolicyState, now: float) -> PolicyState:
    """How long a job waits for a fleet scaled to zero: from the enqueue time of the oldest
    job seen waiting once KEDA may have scaled the Deployment to zero (the answers inactive
    for its cooldown), to the first sample that shows jobs taken (completed, in flight, or
    workers seen)."""
    if state.cold_job_at is None:
        since = state.released.inactive_since
        cold = since is not None and now - since >= KEDA_COOLDOWN
        age = signals.oldest_age.value
        if cold and signals.depth and age is not None:
            return replace(state, cold_job_at=now - age)
        return state
    taken = bool(signals.completion_rate.value or signals.in_flight or signals.consumers)
    if taken:
        return replace(state, cold_job_at=None, cold_wait=now - state.cold_job_at)
    if not signals.depth:  # gone untaken (deleted, expired): it tells nothing of a start
        return replace(state, cold_job_at=None)
    return state


def _active(
    signals: QueueSignals,
    spec: TriggerSpec,
    decided: tuple[int, Reason],
    ceiling: int | None,
    draining: int,
) -> bool | None:
    """IsActive's answer beside the decision (``decided``: the workers and why): :func:`is_active`,
    except that a paused queue is active while it holds workers (neither scaled to zero nor up
    from zero), a step-down that holds workers keeps them (jobs may flow unseen), and where
    the workers that likely drain (``draining``, :func:`scaler.draining.likely_draining`) fill
    the ceiling the queue is inactive even while jobs wait or run: an active trigger makes
    KEDA keep one replica, beside those."""
    desired, reason = decided
    active = is_active(signals, spec)
    if signals.paused:
        return desired > 0
    if active is False and reason is Reason.SCALING_IN_SLOWLY and desired > 0:
        return True
    if reason in (
        Reason.KEEPING_ROOM,
        Reason.KEEPING_WARM,
        Reason.PRESUMED_SLOW_START,
        Reason.HOLDING_FOR_RISES,
    ):
        return True
    full = ceiling is not None and draining >= ceiling
    if active and desired == 0 and reason is Reason.CLAMPED and full:
        return False
    return active


def utilisation(signals: QueueSignals, spec: TriggerSpec) -> float | None:
    """The busy share of the workers the broker shows: jobs in flight over their job slots (as
    the library records them, Sidekiq's threads; else consumers × ``workerConcurrency``, one
    slot each where it is not set), at most 1. None where
    either count is unknown or no worker is seen. An estimate where messages are prefetched
    (RabbitMQ, kombu): those count as in flight before they run."""
    if signals.in_flight is None or not signals.consumers:
        return None
    slots = signals.slots or signals.consumers * (spec.worker_concurrency or 1)
    return min(1.0, signals.in_flight / slots)


def _busy_workers(signals: QueueSignals, spec: TriggerSpec, running: float | None) -> float | None:
    """The workers ``running`` jobs keep busy: over each worker's job slots, as the library
    records them (Sidekiq's threads per process), else ``workerConcurrency``."""
    if not running:
        return None
    if signals.slots and signals.consumers:
        return running * signals.consumers / signals.slots
    if spec.worker_concurrency:
        return running / spec.worker_concurrency
    return None


def _first_window(
    signals: QueueSignals, spec: TriggerSpec, desired: int, reason: Reason
) -> tuple[int, Reason]:
    """At least the workers seen, within the first rate window (see
    :func:`_holding_first_window`)."""
    if _holding_first_window(signals, spec) and desired < (signals.consumers or 0):
        return signals.consumers or 0, Reason.FIRST_WINDOW
    return desired, reason


def _scale_in_on_uncertain_arrivals(
    signals: QueueSignals,
    spec: TriggerSpec,
    now: float,
    state: PolicyState,
    desired: int,
    reason: Reason,
) -> tuple[int, Reason, PolicyState]:
    """Never scale in on an arrival rate that is only a lower bound (jobs came and went between
    samples, unseen) or unknown (the counts are down: RabbitMQ's management API, say, while
    AMQP still gives the depth; an unknown rate reads as 0 in the need): step down gently
    instead, so a real backlog shows before it hurts (one step per rate window, or per
    ``BLIND_STEP_DOWN`` where what runs is not shown either). Where in-flight jobs are observed
    and none run and none wait, the queue is plainly idle; where they are observed and nothing
    waits, the flow's load is seen in flight (the need counts it, see :func:`_running`)."""
    # before any answer, the workers that run: a first sample shows no rate yet
    last = state.last_desired if state.last_desired is not None else signals.consumers
    if last is None or desired >= last:
        return desired, reason, state
    if not uncertain_arrivals(signals):
        return desired, reason, state
    if signals.depth == 0 and signals.in_flight == 0:
        return desired, reason, state
    if signals.depth == 0 and signals.mean_in_flight is not None and spec.worker_concurrency:
        # what the flow keeps busy is seen in flight, unseen arrivals included (Little's law)
        return desired, reason, state
    # in the dark a step waits for the last one's effect to show (see BLIND_STEP_DOWN)
    pace = (
        spec.rate_window
        if signals.in_flight is not None
        else max(spec.rate_window, BLIND_STEP_DOWN)
    )
    if state.last_step_down is not None and now - state.last_step_down < pace:
        return last, Reason.SCALING_IN_SLOWLY, state
    step = max(1, math.floor(last * LOWER_BOUND_STEP_DOWN))
    return max(desired, last - step), Reason.SCALING_IN_SLOWLY, replace(state, last_step_down=now)


def uncertain_arrivals(signals: QueueSignals) -> bool:
    """Whether the arrival rate is only a lower bound (jobs came and went between samples,
    unseen) or unknown (the counts are down), so it must not pass for the flow's rate."""
    return signals.arrival_rate.precision in (Precision.LOWER_BOUND, Precision.UNKNOWN)


def _throughput(spec: TriggerSpec, state: PolicyState) -> float | None:
    """Jobs per second one worker completes: from the job time learned by Little's law where
    the format shows what runs and the trigger gives ``workerConcurrency`` (it corrects a
    ``jobDuration`` guessed wrong), else the figure given, else the one learned from saturated
    workers."""
    if spec.worker_concurrency:
        seconds = learned_job_seconds(state, given_job_seconds(spec))
        if seconds is not None:
            return spec.worker_concurrency / seconds
    return spec.worker_throughput or state.learned_throughput


def learned_job_seconds(state: PolicyState, given: float | None = None) -> float | None:
    """How long a job holds a slot, by Little's law: the busy slot-seconds over the jobs
    completed in the last ``JOB_TIME_WINDOWS`` rate windows or so. ``given`` (the trigger's
    ``jobDuration``) counts as ``PRIOR_JOBS`` jobs of that length, so that a few jobs do not
    overturn it and many do, down to ``LEARNED_FLOOR_SHARE`` of it; without it, None until
    ``MIN_LEARNED_COMPLETIONS`` completed.

    The floor: Little's law holds for a steady flow. Where the flow rises (a ramp, a step, the
    end of a pause) and a few jobs are long, the short ones finish at the new rate at once while
    the long ones take their whole time to pile up to their share of the slots, so the windows
    read a job time many times too short for as long as the longest jobs run, and the fleet is
    sized for that (``mixes-067``, a ramp: 1.2 s learned within a minute where 4.6 s was given
    and 5.0 s was true, two or three workers while 900 jobs piled up, 201 s over a 60 s target
    where KEDA's messageRate had none; 50 s with the floor). A ``jobDuration`` guessed 30% long
    still learns down to its truth (0.77 of it)."""
    busy, done = state.slot_seconds, state.jobs_done
    if busy is None or done is None:
        return given
    busy, done = busy * JOB_TIME_WINDOWS, done * JOB_TIME_WINDOWS
    if given is not None:
        blended = (PRIOR_JOBS * given + busy) / (PRIOR_JOBS + done)
        return max(blended, LEARNED_FLOOR_SHARE * given)
    if done < MIN_LEARNED_COMPLETIONS or busy <= 0:
        return None
    return busy / done


def _learn_job_time(signals: QueueSignals, spec: TriggerSpec, state: PolicyState) -> PolicyState:
    """Job-slot seconds and completions over each rate window (from the mean in-flight count
    and exact completion counts), followed with a time constant of ``JOB_TIME_WINDOWS``."""
    busy, finished, span = signals.mean_in_flight, signals.jobs_finished, signals.rate_span
    if busy is None or finished is None or span < spec.rate_window / 2:
        return state
    last = state.job_time_at
    if last is not None and signals.observed_at <= last:
        return state  # this sample was learned from already
    slot_seconds, done = busy * span, finished
    if state.slot_seconds is not None and state.jobs_done is not None and last is not None:
        weight = 1 - math.exp(-(signals.observed_at - last) / (JOB_TIME_WINDOWS * spec.rate_window))
        slot_seconds = state.slot_seconds + weight * (slot_seconds - state.slot_seconds)
        done = state.jobs_done + weight * (done - state.jobs_done)
    return replace(
        state, slot_seconds=slot_seconds, jobs_done=done, job_time_at=signals.observed_at
    )


def _learn(signals: QueueSignals, spec: TriggerSpec, state: PolicyState) -> PolicyState:
    """Per-worker throughput from observed workers while they are saturated (jobs wait)."""
    rate = signals.completion_rate
    saturated = bool(signals.depth) and bool(signals.consumers)
    if spec.worker_throughput is not None or not saturated or rate.value is None or rate.value <= 0:
        return state
    if rate.precision is not Precision.EXACT or signals.consumers is None:
        return state
    if state.learned_at is not None and signals.observed_at <= state.learned_at:
        return state  # this sample was learned from already (IsActive follows GetMetrics)
    observed = rate.value / signals.consumers
    learned = state.learned_throughput
    blended = observed if learned is None else learned + LEARNING_RATE * (observed - learned)
    return replace(state, learned_throughput=blended, learned_at=signals.observed_at)


def _needed(
    signals: QueueSignals, spec: TriggerSpec, throughput: float | None, workers_now: int | None
) -> tuple[float | None, Reason]:
    """The workers needed (a fraction: :func:`_rounded` makes it whole), and why: the flow's
    need (:func:`_horizon_busy`, :func:`_saturated`) plus the backlog's drain plan; more where
    the oldest job is over the target (the fleet scaled by how far over) or the running jobs
    keep more busy. A waiting job keeps one slot busy once it starts, so neither the drain plan
    (where the broker shows what runs) nor the age rule asks more than a slot for each job
    waiting: for jobs longer than the target the plan asked a job's time over the target for
    each (67 workers for 18 waiting 7-minute jobs, ``broad-115``), and a job a scale-in stopped
    comes back with its first enqueue time, which the age rule read as a fleet many times too
    slow (41 workers for one 8-minute job 497 s old, ``broad-160``). Where the broker does not
    show what runs, every slot of the workers there are (the broker's count, else the previous
    answer) may be held by a long job unseen, and the plan is at most a slot for each waiting job on top of them: a plain
    list of 29-minute jobs under a 15 s target asked 132 workers for 4 waiting jobs, and KEDA's
    maximum of 100 ran for 40 minutes (``broad-201``; capped at the slots alone, a Huey queue
    under a 15 s target, ``mixes-184``, went from 46 to 206 s over it). The flow's need there
    counts those workers already (:func:`_horizon_busy`), so the plan adds only those it does
    not: the need is at most the larger of the two plus a slot for each waiting job."""
    if signals.depth is None:
        return None, Reason.DEPTH_UNKNOWN
    depth = signals.depth
    if not depth and not signals.in_flight and not _unseen_flow(signals):
        return 0.0, Reason.IDLE
    needed: float | None = None
    reason = Reason.LEARNING_THROUGHPUT
    if throughput:
        # a lower-bound arrival rate is used as it stands: the need is then "at least" this
        rate = _future_arrival_rate(signals)
        steady = rate / throughput
        keep_up = max(
            _horizon_busy(signals, spec, throughput, steady, workers_now),
            _saturated(signals, spec, workers_now) or 0.0,
        )
        waiting = max(0.0, depth - _held_backlog(signals, spec, throughput, rate))
        drain = waiting / _drain_seconds(spec, throughput) / throughput
        if spec.worker_concurrency:
            slots = waiting / spec.worker_concurrency
            # unseen, every slot there is may hold a long job: the waiting start on new ones,
            # beside the workers the flow's need counts already
            unseen = max(0.0, (workers_now or 0) - keep_up)
            drain = min(drain, slots if signals.in_flight is not None else slots + unseen)
        needed = keep_up + drain
        reason = Reason.DRAINING_BACKLOG if drain > keep_up else Reason.KEEPING_UP
    age = signals.oldest_age.value
    if age is not None and age > spec.target_age and signals.consumers:
        by_age = signals.consumers * age / spec.target_age
        if spec.worker_concurrency:
            by_age = min(by_age, signals.consumers + depth / spec.worker_concurrency)
        if needed is None or by_age > needed:
            needed, reason = by_age, Reason.AGE_OVER_TARGET
    busy = _busy_workers(signals, spec, _running(signals, spec, throughput))
    if busy is not None and (needed is None or busy > needed):
        needed, reason = busy, Reason.KEEPING_UP
    return needed, reason


def _horizon_busy(
    signals: QueueSignals,
    spec: TriggerSpec,
    throughput: float,
    steady: float,
    workers_now: int | None,
) -> float:
    """The workers busy one horizon ahead, where the broker shows the workers and the jobs that
    run: those running now that are still running then, plus the steady-state need (``steady``,
    the flow's rate times the job time, Little's law) for the rest; for exponential job times,
    ``running·e^(-h/T) + steady·(1-e^(-h/T))``. Short jobs (T much shorter than the horizon h)
    give the steady need; long jobs give the running ones and what arrives within h, not the
    whole job time's worth of arrivals at once: one arrival in the rate window of a 10-minute
    job reads as ten workers' flow, most of which a later answer can add as the jobs come
    (h is ``HORIZON``, the next answer's distance).
    Where what runs is not shown (Huey, a plain list, RabbitMQ without its management API),
    the busy slots still grow by no more than the arrivals of a horizon: at most those (at the
    rate kept up with) on top of every slot of the workers there are (``workers_now``: the
    broker's count, else the previous answer), which may all be held unseen. The steady need
    of jobs much longer than the horizon reads one arrival as many workers' flow there too:
    ``broad-184``, a Huey queue of 28-minute jobs, asked 28 workers for one job, and the
    blind step-down took the hour to let them go. The cap grows with each answer, which comes
    more often than the horizon (the HPA syncs every 15 s): it errs towards more workers.
    Where the workers are not shown, none answered yet (a scaler restarted may face a fleet of
    unseen jobs), or the job time is not known, the steady need."""
    if not spec.worker_concurrency:
        return steady
    if signals.in_flight is None:
        if workers_now is None:
            return steady
        arriving = steady * throughput * HORIZON / spec.worker_concurrency
        return min(steady, workers_now + arriving)
    if not signals.consumers:
        return steady
    job_seconds = _job_seconds(spec.worker_concurrency, throughput)
    running = _busy_workers(signals, spec, signals.in_flight) or 0.0
    decay = math.exp(-HORIZON / job_seconds)
    return running * decay + steady * (1 - decay)


def _saturated(signals: QueueSignals, spec: TriggerSpec, workers_now: int | None) -> float | None:
    """The workers the running jobs keep busy while jobs wait, where arrivals are only a lower
    bound or unknown: every slot is busy and jobs still wait, so the whole fleet is needed,
    whatever the rate seen says (a list its workers empty between samples counts only the jobs
    it holds at them: a Sidekiq queue of 10 jobs/s read 0.4/s, and a step in its flow showed as
    a scale-in to the rate's 0.4 worker, 20-33 s over a 30 s target where KEDA's messageRate
    had 1-24). Never more than the workers there are (``workers_now``: the broker's count, else
    the previous answer): Celery's and Dramatiq's in-flight counts hold the messages their
    workers prefetched (up to 4 and 2 a slot by default), a backlog the drain plan sizes, not
    workers to add at once. None elsewhere, and where more than ``SATURATED_ROUNDS`` rounds of
    the running jobs wait: that is a burst, which the drain plan sizes (the busy fleet on top
    of it cost the shipped burst 1.3x the cheapest)."""
    if not signals.depth or not uncertain_arrivals(signals):
        return None
    if not signals.in_flight or signals.depth > SATURATED_ROUNDS * signals.in_flight:
        return None
    if workers_now is None:
        return None
    busy = _busy_workers(signals, spec, signals.in_flight)
    return None if busy is None else min(busy, float(workers_now))


def _held_backlog(
    signals: QueueSignals, spec: TriggerSpec, throughput: float, rate: float
) -> float:
    """The jobs that may wait without workers added to drain them: the flow's arrivals over
    ``HELD_SHARE`` of the target age. A fleet that keeps up with the flow holds its backlog
    steady, and each job waits that backlog over the flow's rate: a quarter of the target for
    this many; planning to drain within the target every backlog a sample shows added workers
    the flow never needed (``broad-136``: a stream at 0.92 of one worker's flow, 15 job slots,
    0.4-second jobs, a 15-second target, kept a second worker for half the hour). Only
    where the broker shows what runs (elsewhere the rate is a lower bound and the backlog the
    flow's only sign) and a job takes less than ``HELD_JOB_SHARE`` of the target (a longer mean
    is often a mix's long jobs, whose slots free in lumps while short jobs wait behind them)."""
    if signals.in_flight is None or not spec.worker_concurrency:
        return 0.0
    if _holds_slots(spec, throughput):
        return 0.0
    return rate * HELD_SHARE * spec.target_age


def _drain_seconds(spec: TriggerSpec, throughput: float) -> float:
    """The time to drain the backlog in: ``targetDrainTime`` less the time one job takes,
    since the last jobs waiting start that long before they finish, down to half the target
    where a job takes half of it; for jobs longer than that the target again, and at once for
    jobs as long as the target or longer: their mean is a few long jobs' (a mix), and the
    waiting ones are mostly the short ones. Without ``workerConcurrency`` the time of a job is
    not known (only the jobs per second of a worker): the target."""
    target = spec.target_drain_time
    if not spec.worker_concurrency:
        return target
    job_seconds = _job_seconds(spec.worker_concurrency, throughput)
    return max(target - job_seconds, min(job_seconds, target))


def _past_tolerance(
    signals: QueueSignals,
    spec: TriggerSpec,
    throughput: float | None,
    workers_now: int | None,
    desired: int,
) -> int:
    """A scale-up the HPA would ignore, taken past its tolerance: an answer within
    ``HPA_TOLERANCE`` of the replicas (the ``workers`` metric is an AverageValue of 1) leaves
    them as they are, so 33 workers asked of 32 add none. Where jobs wait and a job takes at
    least ``HELD_JOB_SHARE`` of the target, the answer is the fewest workers past the tolerance
    (36 of 32): every slot is held for longer than the backlog may wait, and the job the small
    step was for would wait a whole job's time (``broad-163``: 555-second jobs on 32 workers,
    1-8 jobs waiting, asked 33-35 for a minute while the oldest aged past its 60 s target).
    Shorter jobs free their slots within the target: the backlog shows, and the drain plan
    asks more, before it matters."""
    if spec.metric is not Metric.WORKERS or not signals.depth or not workers_now or signals.paused:
        return desired
    if not _holds_slots(spec, throughput) or desired <= workers_now:
        return desired
    past = max(desired, math.floor(workers_now * (1 + HPA_TOLERANCE)))
    while hpa_holds(past, workers_now):
        past += 1
    return past


def _holds_slots(spec: TriggerSpec, throughput: float | None) -> bool:
    """Whether a job takes at least ``HELD_JOB_SHARE`` of the target age: its slot is held for
    longer than a backlog may wait. False where its time is not known (no
    ``workerConcurrency``)."""
    if not spec.worker_concurrency or not throughput:
        return False
    return _job_seconds(spec.worker_concurrency, throughput) >= HELD_JOB_SHARE * spec.target_age


def _running(signals: QueueSignals, spec: TriggerSpec, throughput: float | None) -> float | None:
    """The job slots to keep: where nothing waits, those the flow keeps busy (the window's
    mean in-flight count, else the newest). While jobs wait every slot is busy, which says only
    how many slots there are, not how many the flow needs; the running jobs are kept then only
    where a job takes longer than the target age (a slot scaled in takes longer to give back
    than the target allows, and a grace period may cut the job: a duplicate)."""
    if not signals.depth:
        return signals.mean_in_flight if signals.mean_in_flight is not None else signals.in_flight
    if throughput and spec.worker_concurrency and not _short_jobs(spec, throughput):
        return signals.in_flight
    return None


def _rounded(
    needed: float | None,
    reason: Reason,
    signals: QueueSignals,
    spec: TriggerSpec,
    throughput: float | None,
) -> int:
    """The workers for ``needed``: rounded up, less the patience (see :func:`_patience`)
    while the fleet keeps up with a flow; where the need is unknown, the workers seen."""
    if needed is None:
        return signals.consumers or 0
    keeping_up = reason is Reason.KEEPING_UP
    patience = _patience(signals, spec, throughput, needed) if keeping_up else 0.0
    desired = math.ceil(needed - patience - 1e-9)
    if patience:
        desired = max(desired, _held_by_long_jobs(signals, spec, throughput))
    return desired


def _patience(
    signals: QueueSignals, spec: TriggerSpec, throughput: float | None, needed: float
) -> float:
    """Workers the fleet may be short of keeping up with the flow (one, or
    ``PATIENT_FLEET_SHARE`` of the need where that is more; never while it drains a backlog
    larger than the flow, whose plan already ends at the target) while a long target leaves the
    backlog room to build: where ``targetAge`` is at least ``PATIENT_TARGET``, a job takes less
    than it, and the oldest job is known to be young, falling to none as it reaches
    ``PATIENT_SHARE`` of the target. A fraction of a worker rounded up keeps the queue empty at
    up to twice the cost of the flow (1.2 workers' need kept by 2), and a large fleet sized for
    the whole flow keeps it empty where the target allows minutes of waiting; with a 5-minute
    target a depth policy lets the queue age toward it, and so may this one: the fleet short of
    the flow lets the age grow, the allowance shrinks as it does, and the fleet settles where
    the two meet, with the rest of the target left for a worker to boot (the need's drain term
    grows with the backlog meanwhile). For jobs longer than ``PATIENT_JOB_SHARE`` of the target,
    :func:`_held_by_long_jobs` keeps the workers that run them."""
    age = signals.oldest_age
    if spec.target_age < PATIENT_TARGET or not throughput or not spec.worker_concurrency:
        return 0.0
    if _longer_job_seconds(spec, throughput) >= spec.target_age:
        return 0.0
    if age.value is None or age.precision is Precision.LOWER_BOUND:
        return 0.0
    allowance = max(1.0, PATIENT_FLEET_SHARE * needed)
    return allowance * max(0.0, 1.0 - age.value / (PATIENT_SHARE * spec.target_age))


def _held_by_long_jobs(signals: QueueSignals, spec: TriggerSpec, throughput: float | None) -> int:
    """The workers the jobs running now hold, where a job takes more than ``PATIENT_JOB_SHARE``
    of the target (0 for shorter jobs, or where the broker does not show what runs): patience
    lets a backlog build from what arrives, not from the jobs a scale-in would stop."""
    if not throughput or not spec.worker_concurrency:
        return 0
    if _longer_job_seconds(spec, throughput) <= PATIENT_JOB_SHARE * spec.target_age:
        return 0
    busy = _busy_workers(signals, spec, signals.in_flight)
    return 0 if busy is None else math.ceil(busy - 1e-9)


def _longer_job_seconds(spec: TriggerSpec, throughput: float) -> float:
    """The longer of the job time given and the one learned (a window without a mix's long jobs
    learns the short ones' time); ``workerConcurrency`` is set."""
    learned = _job_seconds(spec.worker_concurrency or 1, throughput)
    given = given_job_seconds(spec)
    return learned if given is None else max(given, learned)


def _job_seconds(concurrency: int, throughput: float) -> float:
    """The mean time of one job: a worker's job slots over its jobs per second."""
    return concurrency / throughput


def _short_jobs(spec: TriggerSpec, throughput: float | None) -> bool:
    """Whether a job (as the trigger's figures say, or as learned) takes less than the target
    age; False where its time is not known (no ``workerConcurrency``)."""
    if not throughput or not spec.worker_concurrency:
        return False
    return _job_seconds(spec.worker_concurrency, throughput) < spec.target_age


def _future_arrival_rate(signals: QueueSignals) -> float:
    """The arrival rate to keep up with: the window's (see :func:`_window_future_rate`), or
    the fast rate where the flow stepped up (see :func:`stepped_rate`)."""
    window = _window_future_rate(signals)
    stepped = stepped_rate(signals)
    return window if stepped is None else max(window, stepped)


def stepped_rate(signals: QueueSignals) -> float | None:
    """The fast rate (arrivals per second over the newest quarter of the rate window, a
    burst left out) where it departs upward from the window's rate: at least ``STEP_RATIO``
    times it and by ``STEP_SIGMAS`` Poisson deviations of the jobs the window's rate expects
    in the fast rate's span. A step in the flow shows there within seconds, where the window's
    rate takes the whole window to reach it; on a steady flow it departs too rarely to count.
    None where the flow did not step up."""
    rate, fast, span = signals.arrival_rate.value, signals.fast_rate, signals.fast_span
    if rate is None or fast is None or span <= 0:
        return None
    expected = rate * span
    if fast < STEP_RATIO * rate or fast * span - expected < STEP_SIGMAS * math.sqrt(
        max(1.0, expected)
    ):
        return None
    return fast


def _window_future_rate(signals: QueueSignals) -> float:
    """The arrival rate to keep up with over the window: the window's, less the jobs that
    still wait.

    Jobs in the backlog are counted by the drain term; counting them again as a rate would size
    the fleet for a burst twice. In a FIFO queue every job that arrived before the oldest waiting
    one has been taken, so the rate of the jobs not waiting is the window's arrivals until that
    moment: ``flow_rate``, counted by the snapshots before it (a burst that arrived with the
    oldest waiting job, partly taken since, stays out of it). Where no snapshot in the window
    comes before it, the window's arrivals less the depth, over the part of the window before
    the oldest job; without a known age inside the window, the window's rate.
    """
    rate = signals.arrival_rate.value or 0.0
    if signals.flow_rate is not None:
        return min(rate, signals.flow_rate)
    recent, age_now = signals.recent_rate, signals.oldest_age.value
    if recent is not None and age_now is not None and (signals.depth or 0) > 2 * recent * age_now:
        # more jobs wait than the flow since the oldest one explains: a burst, not a rate
        return min(rate, recent)
    age, depth, span = signals.oldest_age, signals.depth or 0, signals.rate_span
    if age.value is None or age.precision is Precision.LOWER_BOUND or not depth:
        return rate
    before = span - age.value
    if before <= 0:
        return rate
    return min(rate, max(0.0, rate * span - depth) / before)


def _metric_value(
    signals: QueueSignals, spec: TriggerSpec, desired: int, ceiling: int | None
) -> float | None:
    if signals.depth is None:
        return None
    if spec.metric is Metric.WORKERS:
        return float(desired)
    if signals.paused:  # KEDA's Value type: ceil(ready × target / target) holds the replicas
        return spec.metric_target
    figure = signals.oldest_age if spec.metric is Metric.AGE else signals.time_to_drain
    if figure.value is None:
        return None
    value = min(figure.value, UNBOUNDED_SECONDS)
    if ceiling is not None:
        # KEDA's Value type gives ceil(ready × value / target) replicas: cap the value so that
        # the observed workers can never be scaled past the ceiling.
        observed = max(signals.consumers or 0, 1)
        value = min(value, spec.metric_target * ceiling / observed)
    return value


def is_active(signals: QueueSignals, spec: TriggerSpec) -> bool | None:
    """True while jobs wait beyond the activation thresholds, or jobs run, or more than
    ``activationDepth`` arrived in the rate window (jobs taken between samples still flow);
    None if unknown."""
    if signals.in_flight:
        return True
    depth = signals.depth
    if depth is None:
        return None
    if depth <= spec.activation_depth:
        return _flowing(signals, spec) or _holding_first_window(signals, spec)
    age = signals.oldest_age
    if spec.activation_age == 0 or age.value is None or age.precision is Precision.LOWER_BOUND:
        return True  # a lower bound under activationAge says nothing of the true age
    return age.value > spec.activation_age


def _flowing(signals: QueueSignals, spec: TriggerSpec) -> bool:
    """Whether more than ``activationDepth`` jobs arrived in the rate window of a queue that
    shows none waiting nor running: taken between samples (a list whose consumers take every
    job at once, a format that does not show its running jobs), they still flow."""
    rate = signals.arrival_rate.value
    return rate is not None and rate * signals.rate_span > spec.activation_depth


def _unseen_flow(signals: QueueSignals) -> bool:
    """Jobs arrived in the window of a queue whose format does not show its running jobs:
    empty at the samples, they may be taken at once and run unseen."""
    return signals.in_flight is None and bool(signals.arrival_rate.value)


def _holding_first_window(signals: QueueSignals, spec: TriggerSpec) -> bool:
    """A queue with workers seen, within its first rate window (the scaler just started, or its
    history just began) where no exact count shows a flow yet: the flow is not known, so the
    workers seen are kept, and the queue active, until the window can tell. A warm fleet taken
    to zero at KEDA's first poll boots again when the flow shows: with 2-minute boots, minutes
    over the target where a fixed fleet has none. So does one cut to the few jobs that run at
    the first sample (a fresh HPA applies the first answer at once): `broad-287`, 12 workers
    cut to 1 at the first answer, 166 s over a 30 s target where Judoscale had none.
    Where the format shows no workers (Celery, arq, Huey, a plain list) and the trigger
    names a dependency, the queue is active in that window too (none are seen, so the answer
    stays 0, and KEDA keeps one replica): a warm fleet KEDA took to zero at its first poll
    drained its long jobs uncounted beside the next rise, above the ceiling
    (``ceilings-268``: 574 s), or booted again for longer than the target (``ceilings-030``).
    Without a dependency that would only wake such Deployments at zero at each start of the
    scaler, and they are not held (change 10d, reverted)."""
    rate = signals.arrival_rate
    first = signals.rate_span < spec.rate_window and not (
        rate.precision is Precision.EXACT and rate.value
    )
    unseen_held = signals.consumers is None and bool(spec.dependencies)
    return first and (bool(signals.consumers) or unseen_held)
