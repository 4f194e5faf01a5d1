"""The decision for a pool: how many workers a fleet that serves several queues needs so that
every queue meets its own target, built on each queue's own decision (:func:`scaler.policy.decide`).

Pure, like the policy: signals, specs, ``now`` and the state that spans calls go in and come out.

**Each queue.** Queue *i* is decided on its own, with :func:`member_spec` (its targetAge, none of
the pool's bounds) and its signals with ``consumers`` set to *its share of the pool's workers*:
the pool's workers *W* (the most any of its queues shows: every worker of the pool listens on
each) times the share of the pool's running jobs that are *i*'s, rounded, at least 1 while it
runs any (:func:`queue_workers`). So the per-worker throughput it learns, and the workers its
age scales (``consumers × age / targetAge``), are those that serve it. A queue that runs nothing
(starved under strict order, or new work) has 0 such workers: it learns nothing, and where it
has no throughput of its own yet it borrows the mean of the pool's other queues. Its need *n_i*
(``Decision.needed``; its desired workers where it holds workers: paused, scaling in slowly, depth
unknown) is in workers that serve it alone.

**The pool.** ``strict`` gives queue *i* what the queues before it leave, so the pool meets
every *n_i* with *N = Σ n_i*. ``weighted`` and ``roundRobin`` share *fetches* (by weight, or in
turn) among the queues with jobs waiting, and a fetched job holds its slot for its duration: a
backlogged queue (more jobs waiting than running) gets ``s_i / Σ s_j`` of the slots the others
leave, ``s_i`` its fetch weight over its per-worker throughput (:func:`slot_weights`), so the
pool needs ``Σ n_i`` of the other queues plus the most demanding backlogged queue's
``n_i × Σ s_j / s_i`` (:func:`_total`); with equal ``s`` that is the sum. One metric per queue,
as KEDA gives the HPA, would get *max n_i*. The order
decides who goes short when the pool is held under its need (:func:`allot`): under ``strict`` the
lowest queues, under ``weighted`` each queue's weight's share; the queue left shortest then
*drives* the decision, otherwise the one that needs most.

**Bounds, once.** ``minWorkers`` and the ceilings (``maxWorkers``, every dependency) apply to
the pool's total, once (:func:`scaler.ceilings.limit.trigger_ceiling` on the pool's spec): never
per queue.

The API, for the server, ``probe``, the simulator and anything that shares a budget between pools:

- :func:`member_spec`: the spec a queue of a pool is sampled and decided with;
- :func:`decide_queues` ``(members, order, now, state) -> (PoolNeed, state)``: every queue's
  decision and need, and the total, unbounded (``PoolNeed.total``);
- :func:`bound_pool` ``(need, spec, ceiling, state, now) -> (PoolDecision, state)``: the need
  stepped down slowly on uncertain arrivals, under ``minWorkers`` and a ceiling (a caller that
  shares a dependency between pools may pass its own, smaller :class:`Ceiling`);
- :func:`decide_pool` ``(members, spec, now, state, probes)``: both, with the pool's own ceiling
  (:func:`scaler.ceilings.limit.trigger_ceiling` of the pool's spec).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.ceilings.headroom import ProbeFigure
from scaler.ceilings.limit import Ceiling, trigger_ceiling
from scaler.policy import (
    LOWER_BOUND_STEP_DOWN,
    Decision,
    PolicyState,
    Reason,
    decide,
    uncertain_arrivals,
)
from scaler.pool_spec import PoolQueue, ServingOrder
from scaler.signals import QueueSignals
from scaler.start_lag import NO_LAG
from scaler.trigger_spec import Metric, TriggerSpec

#: reasons under which a queue's decision holds workers rather than follow its need
_HOLDING = (Reason.PAUSED, Reason.DEPTH_UNKNOWN)


def member_spec(spec: TriggerSpec, queue: PoolQueue) -> TriggerSpec:
    """The single-queue spec one queue of ``spec``'s pool is sampled and decided with: the
    pool's source, rates and activation on that queue, with its own targetAge (and drain time,
    unless targetDrainTime is set) and job duration (``queueJobDurations``), and without the
    pool's bounds: minWorkers and the ceilings
    (maxWorkers, dependencies) apply to the pool's total, once. A single-queue trigger on the
    same queue has an equal source: the two share one sampler."""
    pool = spec.pool
    target = queue.target_age if queue.target_age is not None else spec.target_age
    follows = pool is None or pool.drain_follows_age
    throughput = spec.worker_throughput
    if queue.job_duration is not None:
        throughput = (spec.worker_concurrency or 1) / queue.job_duration
    return replace(
        spec,
        worker_throughput=throughput,
        source=replace(spec.source, queue=queue.name),
        metric=Metric.WORKERS,
        target_age=target,
        target_drain_time=target if follows else spec.target_drain_time,
        min_workers=0,
        max_workers=None,
        dependencies=(),
        learn_knee=False,
        pool=None,
    )


@dataclass(frozen=True, slots=True)
class PoolMember:
    """One queue of a pool as it is now: its place, its spec and its own signals."""

    queue: PoolQueue
    spec: TriggerSpec
    signals: QueueSignals


@dataclass(frozen=True, slots=True)
class PoolState:
    """What a pool carries from one call to the next: each queue's policy state, by name."""

    queues: Mapping[str, PolicyState] = field(default_factory=dict)
    #: the pool's previous answer, and when it last stepped down on uncertain arrivals
    last_desired: int | None = None
    last_step_down: float | None = None
    #: each queue's need at the previous answer: a queue's step-down counts where its own
    #: need falls
    needs: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueShare:
    """One queue's part of a pool's decision."""

    name: str
    weight: int
    #: the queue's decision, on its share of the pool's workers (``signals.consumers``)
    decision: Decision
    signals: QueueSignals
    #: workers serving it alone that it needs (``decision.needed``, or what it holds)
    need: float
    #: what it gets of the pool's answer under the serving order (:func:`allot`)
    allotted: float = 0.0
    #: its own target age (the oldest job's age over it is the queue's lateness)
    target_age: float = 0.0

    @property
    def short(self) -> bool:
        return self.allotted + 1e-6 < self.need


@dataclass(frozen=True, slots=True)
class PoolNeed:
    """Every queue's decision and need, and the pool's total before its bounds."""

    order: ServingOrder
    queues: tuple[QueueShare, ...]
    #: the pool's workers as its queues show them (None where none shows them)
    workers: int | None
    #: Σ need: the workers that let every queue meet its target
    total: float
    #: why no answer can be given (a queue's depth is unknown), else None
    unknown: str | None = None

    @property
    def has_work(self) -> bool:
        return any(
            (q.signals.depth or q.signals.in_flight) and not q.signals.paused for q in self.queues
        )


@dataclass(frozen=True, slots=True)
class PoolDecision:
    """The pool's decision (one metric, one answer) and every queue's part of it."""

    decision: Decision
    queues: tuple[QueueShare, ...]
    #: the queue that drives the decision: the one left shortest under a ceiling, else the one
    #: that needs most; None while no queue needs a worker
    driving: str | None
    #: the serving order the allotments follow
    order: ServingOrder
    #: why there is no answer (a queue's depth, or a ceiling, is unknown), else None
    unknown: str | None = None

    @property
    def lateness(self) -> float:
        """The most any queue's oldest age is over its own target age (0 where none is known)."""
        return max(
            (
                q.signals.oldest_age.value / q.target_age
                for q in self.queues
                if q.signals.oldest_age.value is not None and q.target_age > 0
            ),
            default=0.0,
        )


def queue_workers(signals: Sequence[QueueSignals], pool_workers: int | None) -> list[int | None]:
    """Each queue's share of the pool's workers: ``pool_workers`` in the shares of the running
    jobs (each queue's ``in_flight``), rounded, at least 1 for a queue that runs any; where the
    running jobs are not known, the workers are split evenly between the queues with work."""
    if pool_workers is None:
        return [None] * len(signals)
    running = [s.in_flight for s in signals]
    known: list[int] = [r for r in running if r is not None]
    total = sum(known, 0)
    if len(known) == len(running) and total:
        return [_share(pool_workers, r / total) for r in known]
    busy = [bool(s.depth or s.in_flight) for s in signals]
    count = busy.count(True)
    return [_share(pool_workers, 1 / count) if b else 0 for b in busy]


def _share(workers: int, share: float) -> int:
    if share <= 0:
        return 0
    return max(1, round(workers * share))


def _on_share(signals: QueueSignals, share: int | None) -> QueueSignals:
    """A queue's signals on its share of the pool's workers: the job slots the library records
    (Sidekiq's threads) shrink with the workers, so in flight over slots stays the busy share."""
    slots = signals.slots
    if slots is not None and share is not None and signals.consumers:
        slots = round(slots * share / signals.consumers)
    return replace(signals, consumers=share, slots=slots)


def decide_queues(
    members: Sequence[PoolMember], order: ServingOrder, now: float, state: PoolState
) -> tuple[PoolNeed, PoolState]:
    """Every queue's decision on its share of the pool's workers, its need, and the total."""
    shown = [m.signals.consumers for m in members if m.signals.consumers is not None]
    workers = max(shown) if shown else None
    shares = queue_workers([m.signals for m in members], workers)
    learned = [
        s.learned_throughput
        for m in members
        if (s := state.queues.get(m.queue.name)) is not None and s.learned_throughput
    ]
    borrowed = sum(learned) / len(learned) if learned else None
    out: list[QueueShare] = []
    states: dict[str, PolicyState] = {}
    unknown: str | None = None
    for member, share in zip(members, shares, strict=True):
        # a queue's own step-down on uncertain arrivals would hold whole workers per queue: the
        # pool steps down instead (bound_pool); nor does a queue time the pool's starts from its
        # share, or hold its flow's peak for them
        queue_state = replace(
            state.queues.get(member.queue.name) or PolicyState(),
            last_desired=None,
            start_lag=NO_LAG,
        )
        spec = member.spec
        if (
            share == 0
            and borrowed is not None
            and spec.worker_throughput is None
            and queue_state.learned_throughput is None
        ):
            spec = replace(spec, worker_throughput=borrowed)  # starved: nothing to learn from
        signals = _on_share(member.signals, share)
        decision, states[member.queue.name] = decide(signals, spec, now, queue_state)
        needed = decision.needed
        if needed is None or decision.reason in _HOLDING:
            needed = max(needed or 0.0, float(decision.desired_workers))
        if signals.depth is None and unknown is None:
            unknown = f"the depth of {member.spec.source.describe()} is unknown right now"
        out.append(
            QueueShare(
                member.queue.name,
                member.queue.weight,
                decision,
                signals,
                needed,
                target_age=member.spec.target_age,
            )
        )
    total = _total(order, out)
    return PoolNeed(order, tuple(out), workers, total, unknown), replace(state, queues=states)


def _backlogged(signals: QueueSignals) -> bool:
    """More jobs wait than run: the queue has a job at hand at each fetch for a while."""
    return bool(signals.depth) and (signals.depth or 0) > (signals.in_flight or 0)


def _total(order: ServingOrder, queues: Sequence[QueueShare]) -> float:
    """The workers that give every queue its need. Strict: the sum (a lower queue gets what the
    higher ones leave). Weighted and round robin share *fetches* while queues have jobs waiting,
    so a backlogged queue gets its share of the slots by :func:`slot_weights`: the backlogged
    queues need their most demanding ``need / share``, the others their need."""
    if order is ServingOrder.STRICT:
        return sum(q.need for q in queues)
    waiting = [q for q in queues if _backlogged(q.signals)]
    rest = sum(q.need for q in queues if not _backlogged(q.signals))
    weights = slot_weights(order, waiting)
    total = sum(weights)
    return rest + max(
        (q.need * total / w for q, w in zip(waiting, weights, strict=True)), default=0.0
    )


def slot_weights(order: ServingOrder, queues: Sequence[QueueShare]) -> list[float]:
    """Each queue's weight in the pool's slots while the queues have jobs waiting: its weight in
    the fetches (weighted: its weight; round robin: 1) times its job duration (``1 /``
    per-worker throughput) where every queue's throughput is known, else the fetch weight."""
    fetch = [float(q.weight) if order is ServingOrder.WEIGHTED else 1.0 for q in queues]
    if any(not q.decision.throughput for q in queues):
        return fetch
    return [f / (q.decision.throughput or 1.0) for f, q in zip(fetch, queues, strict=True)]


def allot(
    order: ServingOrder, needs: Sequence[float], weights: Sequence[float], workers: float
) -> list[float]:
    """What each queue gets of ``workers`` under ``order``: strict, in list order, each what
    it needs of what the queues before it leave; weighted and round robin, each its share by
    ``weights`` (:func:`slot_weights`), a queue's share beyond its need going to the others
    (water-filling)."""
    if order is ServingOrder.STRICT:
        left, out = workers, []
        for need in needs:
            take = min(need, max(left, 0.0))
            out.append(take)
            left -= take
        return out
    shares = list(weights)
    out = [0.0] * len(needs)
    open_ = {i for i, need in enumerate(needs) if need > 0}
    left = workers
    while open_ and left > 1e-9:
        weight = sum(shares[i] for i in open_)
        done = {i for i in open_ if needs[i] - out[i] <= left * shares[i] / weight + 1e-12}
        if not done:  # nobody is filled: share what is left by weight and stop
            for i in open_:
                out[i] += left * shares[i] / weight
            break
        for i in done:
            left -= needs[i] - out[i]
            out[i] = needs[i]
        open_ -= done
    return out


def bound_pool(
    need: PoolNeed, spec: TriggerSpec, ceiling: Ceiling, state: PoolState, now: float
) -> tuple[PoolDecision, PoolState]:
    """The pool's answer: its total need, rounded up, stepping down slowly where a queue's
    arrivals are uncertain (as :func:`scaler.policy.decide` does for one queue), under
    ``spec``'s ``minWorkers`` and ``ceiling`` (the pool's own, :func:`trigger_ceiling`, or one a
    shared budget makes), each queue's allotment of it and the queue that drives it."""
    queues = need.queues
    desired = math.ceil(need.total - 1e-9)
    reason = _driving_reason(queues)
    if need.has_work and desired < 1:
        desired = 1
    if need.unknown is not None:  # hold what runs, report nothing
        desired = max(desired, need.workers or state.last_desired or 0)
    desired, reason, state = _step_down(need, spec, now, state, desired, reason)
    if desired < spec.min_workers:
        desired, reason = spec.min_workers, Reason.MIN_WORKERS
    if ceiling.workers is not None and desired > ceiling.workers:
        desired, reason = ceiling.workers, Reason.CLAMPED
    if desired == 0:
        reason = Reason.IDLE
    weights = slot_weights(need.order, queues)
    allotted = allot(need.order, [q.need for q in queues], weights, desired)
    queues = tuple(replace(q, allotted=a) for q, a in zip(queues, allotted, strict=True))
    driving = _driving(queues)
    if ceiling.unknown is None:
        state = replace(state, last_desired=desired, needs={q.name: q.need for q in queues})
    unknown = ceiling.unknown or need.unknown
    active = _active(queues)
    if active is False and reason is Reason.SCALING_IN_SLOWLY and desired > 0:
        active = True  # jobs may flow unseen: no scale to zero while the step-down holds workers
    decision = Decision(
        desired_workers=desired,
        ceiling=ceiling.workers,
        limited_by=ceiling.limited_by if reason is Reason.CLAMPED else None,
        reason=reason,
        metric_value=None if unknown else float(desired),
        active=active,
        needed=need.total,
        throughput=None,
        utilisation=_utilisation(queues, need.workers, spec.worker_concurrency),
        ceiling_parts=ceiling if spec.dependencies else None,
        detail=need.unknown or _detail(queues, driving, need.total),
    )
    return PoolDecision(decision, queues, driving, need.order, unknown), state


def with_total(pool: PoolDecision, decision: Decision) -> PoolDecision:
    """``pool`` answering ``decision`` (its own, lowered by a shared budget): each queue's
    allotment of the new total under the serving order, the queue that drives it, and the
    reason's detail, so metrics and logs show what the queues get of the final answer."""
    if decision.desired_workers == pool.decision.desired_workers:
        return replace(pool, decision=decision)
    weights = slot_weights(pool.order, pool.queues)
    allotted = allot(pool.order, [q.need for q in pool.queues], weights, decision.desired_workers)
    queues = tuple(replace(q, allotted=a) for q, a in zip(pool.queues, allotted, strict=True))
    driving = _driving(queues)
    detail = decision.detail
    if pool.unknown is None:
        detail = _detail(queues, driving, decision.needed or 0.0)
    return replace(pool, decision=replace(decision, detail=detail), queues=queues, driving=driving)


def decide_pool(
    members: Sequence[PoolMember],
    spec: TriggerSpec,
    now: float,
    state: PoolState,
    probes: Mapping[str, ProbeFigure] | None = None,
) -> tuple[PoolDecision, PoolState]:
    """How many workers ``spec``'s pool needs now, and why: :func:`decide_queues`, then
    :func:`bound_pool` under the pool's own ceiling (``maxWorkers`` and its dependencies, from
    ``probes`` where they are probed). ``spec.pool`` gives the serving order; ``members`` are its
    queues in serving order (:meth:`scaler.pool_spec.PoolSpec.resolve`, :func:`member_spec`)."""
    if spec.pool is None:
        raise ValueError("decide_pool needs a pool trigger's spec (queues)")
    need, state = decide_queues(members, spec.pool.order, now, state)
    workers_now = need.workers if need.workers is not None else state.last_desired
    ceiling = trigger_ceiling(spec, probes or {}, workers_now)
    return bound_pool(need, spec, ceiling, state, now)


def _step_down(
    need: PoolNeed, spec: TriggerSpec, now: float, state: PoolState, desired: int, reason: Reason
) -> tuple[int, Reason, PoolState]:
    """Scale in by at most a tenth (and one worker) per rateWindow where a queue with work
    whose need falls has arrivals that are a lower bound or unknown, as a single queue does
    (:data:`scaler.policy.LOWER_BOUND_STEP_DOWN`): a lower bound must not pass for the rate."""
    last = state.last_desired
    if last is None or desired >= last:
        return desired, reason, state
    uncertain = any(
        uncertain_arrivals(q.signals)
        and not (q.signals.depth == 0 and q.signals.in_flight == 0)
        and q.need < state.needs.get(q.name, 0.0) - 1e-9
        for q in need.queues
    )
    if not uncertain:
        return desired, reason, state
    if state.last_step_down is not None and now - state.last_step_down < spec.rate_window:
        return last, Reason.SCALING_IN_SLOWLY, state
    step = max(1, math.floor(last * LOWER_BOUND_STEP_DOWN))
    return max(desired, last - step), Reason.SCALING_IN_SLOWLY, replace(state, last_step_down=now)


def _driving_reason(queues: Sequence[QueueShare]) -> Reason:
    most = max(queues, key=lambda q: q.need, default=None)
    return most.decision.reason if most is not None and most.need > 0 else Reason.IDLE


def _driving(queues: Sequence[QueueShare]) -> str | None:
    short = [q for q in queues if q.short]
    if short:  # the one left shortest, by share of its need (the lowest on a tie)
        return max(reversed(short), key=lambda q: 1 - q.allotted / q.need).name
    most = max(queues, key=lambda q: q.need, default=None)
    return most.name if most is not None and most.need > 0 else None


def _detail(queues: Sequence[QueueShare], driving: str | None, total: float) -> str | None:
    if driving is None:
        return None
    queue = next(q for q in queues if q.name == driving)
    if queue.short:
        return (
            f"queue {driving} gets {queue.allotted:.1f} of the {queue.need:.1f} workers it "
            f"needs ({queue.decision.reason_label})"
        )
    return f"queue {driving} needs {queue.need:.1f} of {total:.1f} workers ({queue.decision.reason_label})"


def _active(queues: Sequence[QueueShare]) -> bool | None:
    states = [q.decision.active for q in queues]
    if any(states):
        return True
    return None if any(s is None for s in states) else False


def _utilisation(
    queues: Sequence[QueueShare], workers: int | None, concurrency: int | None
) -> float | None:
    running = [q.signals.in_flight for q in queues]
    if not workers or any(r is None for r in running):
        return None
    return min(1.0, sum(r or 0 for r in running) / (workers * (concurrency or 1)))
