"""What KEDA reads for one trigger in the simulator (:class:`MetricSource`), the ScaledObject
that polls one (:class:`KedaAutoscaler`: KEDA's loop and the HPA), and the sources of the
alternatives KEDA and the HPA run: Redis ``LLEN``, RabbitMQ's management API, CPU."""

from __future__ import annotations

import collections
import enum
from typing import Protocol

from scaler.simulate.autoscaler import Observation
from scaler.simulate.keda import (
    HorizontalPodAutoscaler,
    KedaLoop,
    MetricType,
    PodCounts,
    replicas_for,
)
from scaler.simulate.scenario import Scenario

#: RabbitMQ's management API recomputes its rates every 5 s (collect_statistics_interval)
RABBITMQ_RATE_SECONDS = 5.0
#: metrics-server's default --metric-resolution: CPU usage is a rate over this window
METRICS_RESOLUTION_SECONDS = 15.0


class MetricSource(Protocol):
    """What KEDA reads for one trigger: the metric for the HPA and the activity for KEDA."""

    metric_type: MetricType
    target: float

    def observe(self, obs: Observation) -> None:
        """Called at every control tick (samplers sample here)."""

    def read(self, obs: Observation) -> tuple[float | None, bool | None]:
        """The metric value and whether the trigger is active; None where the scaler errs."""
        ...


class KedaAutoscaler:
    """A ScaledObject: KEDA's loop (unless ``keda`` is False: a plain HPA) and the HPA."""

    def __init__(self, scenario: Scenario, source: MetricSource, *, keda: bool = True) -> None:
        self.scenario = scenario
        self.source = source
        self.keda = KedaLoop(scenario.keda) if keda else None
        floor = scenario.keda.min_replica_count if keda else max(1, scenario.keda.min_replica_count)
        self.floor = floor
        self.hpa = HorizontalPodAutoscaler(
            scenario.hpa, max(1, floor), scenario.keda.max_replica_count
        )

    def initial_replicas(self) -> int:
        return max(self.floor, self.scenario.initial_workers)

    def step(self, obs: Observation, replicas: int) -> int:
        self.source.observe(obs)
        if self.keda is not None and self.keda.due(obs.now):
            _, active = self.source.read(obs)
            replicas = self.keda.poll(obs.now, active, replicas)
        if self.hpa.due(obs.now) and replicas:
            value, _ = self.source.read(obs)
            recommendation = None
            if value is not None:
                pods = PodCounts(replicas, obs.ready)
                tolerance = self.scenario.hpa.tolerance
                recommendation = replicas_for(
                    self.source.metric_type, value, self.source.target, pods, tolerance
                )
            replicas = self.hpa.desired(obs.now, recommendation, replicas)
        return replicas


class ListLengthSource:
    """KEDA's Redis scaler: ``LLEN``, waiting jobs only."""

    metric_type = MetricType.AVERAGE_VALUE

    def __init__(self, target: float, activation: float) -> None:
        self.target = target
        self.activation = activation

    def observe(self, obs: Observation) -> None:
        """LLEN is read when KEDA asks."""

    def read(self, obs: Observation) -> tuple[float | None, bool | None]:
        return float(obs.depth), obs.depth > self.activation


class RabbitMode(enum.StrEnum):
    QUEUE_LENGTH = "QueueLength"
    MESSAGE_RATE = "MessageRate"
    CONSUMPTION_TIME = "ExpectedQueueConsumptionTime"


class RabbitSource:
    """KEDA's RabbitMQ scaler over HTTP: ``messages``, the publish rate, the ETA."""

    def __init__(self, mode: RabbitMode, target: float, activation: float) -> None:
        self.mode = mode
        self.target = target
        self.activation = activation
        self.metric_type = (
            MetricType.VALUE if mode is RabbitMode.CONSUMPTION_TIME else MetricType.AVERAGE_VALUE
        )
        self.points: collections.deque[tuple[float, int, int]] = collections.deque()

    def observe(self, obs: Observation) -> None:
        self.points.append((obs.now, obs.arrivals_total, obs.starts_total))
        while len(self.points) > 2 and self.points[1][0] <= obs.now - RABBITMQ_RATE_SECONDS:
            self.points.popleft()

    def read(self, obs: Observation) -> tuple[float | None, bool | None]:
        messages = float(obs.depth + obs.in_flight)
        (t0, published0, delivered0), (t1, published1, delivered1) = self.points[0], self.points[-1]
        span = max(t1 - t0, 1e-9)
        publish, deliver = (published1 - published0) / span, (delivered1 - delivered0) / span
        act = self.activation
        if self.mode is RabbitMode.QUEUE_LENGTH:
            return messages, messages > act
        if self.mode is RabbitMode.MESSAGE_RATE:
            return publish, publish > act or messages > act
        if messages == 0:
            eta = 0.0
        elif deliver == 0:
            eta = act
        else:
            eta = (publish - deliver) / deliver + messages / deliver
        return eta, eta > act or (deliver == 0 and messages > 0)


class CpuSource:
    """The HPA's CPU utilisation: CPU the ready pods use, against a share of their request,
    averaged over metrics-server's resolution (15 s)."""

    metric_type = MetricType.UTILIZATION

    def __init__(self, target_share: float) -> None:
        self.target = target_share
        self.samples: collections.deque[tuple[float, float]] = collections.deque()

    def observe(self, obs: Observation) -> None:
        self.samples.append((obs.now, obs.cpu_ready))
        while self.samples[0][0] <= obs.now - METRICS_RESOLUTION_SECONDS:
            self.samples.popleft()

    def read(self, obs: Observation) -> tuple[float | None, bool | None]:
        return sum(cpu for _, cpu in self.samples) / len(self.samples), True
