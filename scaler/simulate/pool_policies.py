"""The policies on a pool, each as a user of it would set it up for a fleet that serves several
queues.

- ``queue-age-scaler``: one pool trigger (``queues``): every queue written into the in-memory
  broker and read back through its adapter, each into its own history, and the pool's decision
  made by the server's own pool evaluation (:class:`scaler.pool_evaluation.PoolEvaluator`).
- KEDA's scalers (``keda-redis-listlength``, ``keda-rabbitmq-*``): one trigger per queue, each
  set up from that queue alone (its SLO, its jobs), in one ScaledObject: KEDA is active while any
  trigger is, and the HPA takes the largest of the per-trigger recommendations (and does not
  scale down while a metric is unavailable), as KEDA hands it one metric per trigger.
- ``cpu``, ``aws-backlog-per-instance``, ``judoscale``: one metric for the fleet: CPU, the
  waiting jobs of all queues per instance, the queue time of the oldest job of any queue.
- ``fixed``: a fleet sized for the pool's average load at 80% utilisation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from scaler.ceilings.headroom import ProbeFigure
from scaler.pool_evaluation import PoolEvaluator, QueueHistory
from scaler.simulate.autoscaler import Autoscaler
from scaler.simulate.direct_autoscalers import Fixed
from scaler.simulate.keda import (
    HorizontalPodAutoscaler,
    KedaLoop,
    MetricType,
    PodCounts,
    replicas_for,
)
from scaler.simulate.metric_sources import KedaAutoscaler, MetricSource
from scaler.simulate.policies import POLICY_NAMES, build
from scaler.simulate.policy_settings import PolicySettings
from scaler.simulate.pool_engine import PoolAutoscaler, PoolObservation
from scaler.simulate.pool_scenario import PoolScenario
from scaler.simulate.queue_age_source import QueueAgeSource
from scaler.simulate.scenario import ScenarioError

#: the KEDA scalers that take one trigger per queue
_PER_QUEUE = frozenset(name for name in POLICY_NAMES if name.startswith("keda-"))


class PoolSource(Protocol):
    """One trigger of a pool's ScaledObject, as KEDA reads it."""

    metric_type: MetricType
    target: float

    def observe(self, obs: PoolObservation) -> None: ...

    def read(self, obs: PoolObservation) -> tuple[float | None, bool | None]: ...


class OnQueue:
    """A single-queue trigger on one queue of the pool."""

    def __init__(self, source: MetricSource, queue: int) -> None:
        self.source = source
        self.queue = queue
        self.metric_type = source.metric_type
        self.target = source.target

    def observe(self, obs: PoolObservation) -> None:
        self.source.observe(obs.queues[self.queue])

    def read(self, obs: PoolObservation) -> tuple[float | None, bool | None]:
        return self.source.read(obs.queues[self.queue])


class PoolQueueAgeSource:
    """This project's pool trigger: each queue through the memory broker's adapter into its own
    history (:class:`QueueAgeSource` per queue), the decision from the server's pool evaluation."""

    metric_type = MetricType.AVERAGE_VALUE
    target = 1.0

    def __init__(self, pool: PoolScenario) -> None:
        self.spec = pool.base.spec
        if self.spec.pool is None:
            raise ScenarioError("trigger.queues: a pool scenario needs a pool trigger")
        self.queues = self.spec.pool.resolve()
        self.sources = [QueueAgeSource(q.scenario) for q in pool.queues]
        self.evaluator = PoolEvaluator()

    def observe(self, obs: PoolObservation) -> None:
        for source, queue_obs in zip(self.sources, obs.queues, strict=True):
            source.observe(queue_obs)

    def read(self, obs: PoolObservation) -> tuple[float | None, bool | None]:
        if not all(source.history for source in self.sources):
            return None, None
        histories = [
            QueueHistory(queue, source.history.view, source.history.arrivals)
            for queue, source in zip(self.queues, self.sources, strict=True)
        ]
        figures = self._figures(obs)
        decision = self.evaluator.evaluate(histories, self.spec, figures).pool.decision
        return decision.metric_value, decision.active

    def _figures(self, obs: PoolObservation) -> dict[str, ProbeFigure]:
        first = self.sources[0]  # the probe reads the one simulated dependency
        if first.reading is None:
            return {}
        reading, read_at = first.reading
        figure = ProbeFigure("postgres", reading, obs.now - read_at)
        return {name: figure for name in first.probes}


class PoolKeda(PoolAutoscaler):
    """One ScaledObject with one or more triggers: KEDA's loop and the HPA over all of them."""

    def __init__(self, pool: PoolScenario, sources: Sequence[PoolSource]) -> None:
        base = pool.base
        self.scenario = base
        self.sources = list(sources)
        self.keda = KedaLoop(base.keda)
        self.floor = base.keda.min_replica_count
        self.hpa = HorizontalPodAutoscaler(
            base.hpa, max(1, self.floor), base.keda.max_replica_count
        )

    def initial_replicas(self) -> int:
        return max(self.floor, self.scenario.initial_workers)

    def step(self, obs: PoolObservation, replicas: int) -> int:
        for source in self.sources:
            source.observe(obs)
        if self.keda.due(obs.now):
            states = [source.read(obs)[1] for source in self.sources]
            active = True if any(states) else (None if None in states else False)
            replicas = self.keda.poll(obs.now, active, replicas)
        if self.hpa.due(obs.now) and replicas:
            replicas = self.hpa.desired(obs.now, self._recommendation(obs, replicas), replicas)
        return replicas

    def _recommendation(self, obs: PoolObservation, replicas: int) -> int | None:
        """The largest per-trigger recommendation; while a metric is unavailable, no scale-down."""
        pods = PodCounts(replicas, obs.total.ready)
        tolerance = self.scenario.hpa.tolerance
        each: list[int] = []
        missing = False
        for source in self.sources:
            value, _ = source.read(obs)
            if value is None:
                missing = True
                continue
            each.append(replicas_for(source.metric_type, value, source.target, pods, tolerance))
        if not each:
            return None
        best = max(each)
        return max(best, replicas) if missing else best


class Whole(PoolAutoscaler):
    """A policy that sees the pool as one queue (all queues together)."""

    def __init__(self, autoscaler: Autoscaler) -> None:
        self.autoscaler = autoscaler

    def initial_replicas(self) -> int:
        return self.autoscaler.initial_replicas()

    def step(self, obs: PoolObservation, replicas: int) -> int:
        return self.autoscaler.step(obs.total, replicas)


def build_pool(name: str, pool: PoolScenario) -> PoolAutoscaler:
    """The policy ``name`` on ``pool``, with the scenario's overrides."""
    if name == "queue-age-scaler":
        return PoolKeda(pool, [PoolQueueAgeSource(pool)])
    if name in _PER_QUEUE:
        sources: list[PoolSource] = []
        for index, queue in enumerate(pool.queues):
            autoscaler = build(name, queue.scenario)
            assert isinstance(autoscaler, KedaAutoscaler)
            sources.append(OnQueue(autoscaler.source, index))
        return PoolKeda(pool, sources)
    if name == "fixed":
        settings = PolicySettings(name, pool.base.policies.get(name, {}))
        return Whole(Fixed(settings.integer("replicas", _fixed_default(pool))))
    return Whole(build(name, pool.base))


def _fixed_default(pool: PoolScenario) -> int:
    replicas = max(1, math.ceil(pool.expected_busy_workers() / 0.8))
    ceiling = pool.base.ceiling
    limit = min(ceiling if ceiling is not None else replicas, pool.base.keda.max_replica_count)
    return min(replicas, limit)
