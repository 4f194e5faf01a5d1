"""The policies the simulator compares, each as its own documentation defines it.

- ``queue-age-scaler``: this project. The simulated queue is sampled every ``sampleInterval`` into
  :class:`~brokers.base.QueueSnapshot` s as the trigger's format shows it (list marker counts for
  list formats, stream counters for ``stream``; in-flight jobs, workers and enqueue times only
  where the format records them); the server's own ``compute_signals`` and ``decide`` answer
  KEDA's GetMetrics and IsActive; KEDA and the HPA do the rest.
- ``cpu``: the HPA on CPU utilisation (no KEDA, at least one pod).
- ``keda-redis-listlength``: KEDA's Redis scaler, ``LLEN`` (waiting jobs only), ``AverageValue``.
- ``keda-rabbitmq-queuelength`` / ``-messagerate`` / ``-consumptiontime``: KEDA's RabbitMQ
  scaler over the management API (``messages`` counts ready and unacked; rates over the
  management's 5 s sample), ``QueueLength`` and ``MessageRate`` as ``AverageValue``,
  ``ExpectedQueueConsumptionTime`` as ``Value``.
- ``aws-backlog-per-instance``: EC2 Auto Scaling target tracking on waiting messages per
  in-service instance, one datapoint a minute, scale out after 3 datapoints above the target,
  in after 15 below 90% of it.
- ``judoscale``: a queue-time range checked every 10 s: one more worker when the queue time is
  above the range and no upscale happened within the cool-down; one fewer when every check of
  the downscale delay (10 min) was below it, at most one per delay.
- ``fixed``: a fleet that never changes.

The defaults of the alternatives are set as their documentation advises from what a user knows
(the SLO, the mean job duration, the concurrency); docs/simulator.md lists them, and a
scenario's ``policies`` section overrides any of them.
"""

from __future__ import annotations

import collections
import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from brokers.base import Precision, QueueSnapshot
from brokers.formats import FORMATS, End
from brokers.list_marker import ListMarker
from scaler.arrival_history import ArrivalHistory
from scaler.durations import parse_duration
from scaler.policy import PolicyState, decide
from scaler.signals import compute_signals
from scaler.simulate.engine import Autoscaler, Observation
from scaler.simulate.keda import (
    HorizontalPodAutoscaler,
    KedaLoop,
    MetricType,
    PodCounts,
    replicas_for,
)
from scaler.simulate.scenario import Scenario, ScenarioError
from scaler.trigger_spec import Metric

#: formats whose jobs carry their enqueue time where the adapter reads it
_TIMESTAMPED = frozenset({"sidekiq", "rq", "bullmq", "dramatiq", "stream"})
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


class QueueAgeSource:
    """This project's scaler: snapshots as the format shows them, the real signals and policy."""

    def __init__(self, scenario: Scenario) -> None:
        spec = scenario.spec
        source = spec.source
        if source.format == "arq":
            raise ScenarioError(
                "trigger.format: arq (a sorted set) is not simulated; use rq or list"
            )
        info = FORMATS[source.format]
        self.spec = spec
        self.stream = source.format == "stream"
        self.in_flight = info.reports_in_flight
        self.consumers = info.reports_consumers
        self.timestamped = source.format in _TIMESTAMPED or source.timestamp_field is not None
        self.push_end = info.oldest_end.opposite
        self.marker = ListMarker(self.push_end)
        self.history: collections.deque[QueueSnapshot] = collections.deque()
        self.arrivals = ArrivalHistory()
        self.state = PolicyState()
        self.next_sample = 0.0
        self.metric_type = (
            MetricType.AVERAGE_VALUE if spec.metric is Metric.WORKERS else MetricType.VALUE
        )
        self.target = spec.metric_target

    def observe(self, obs: Observation) -> None:
        if obs.now + 1e-9 < self.next_sample:
            return
        self.next_sample = obs.now + self.spec.sample_interval
        snapshot = self.snapshot(obs)
        self.history.append(snapshot)
        # as the server's Sampler trims: the rate window and two intervals more
        keep_from = obs.now - self.spec.rate_window - 2 * self.spec.sample_interval
        while len(self.history) > 2 and self.history[1].observed_at <= keep_from:
            self.history.popleft()
        if snapshot.arrivals_total is not None:
            self.arrivals.add(snapshot.observed_at, snapshot.arrivals_total)

    def snapshot(self, obs: Observation) -> QueueSnapshot:
        if self.stream:
            arrivals, completions, exact = obs.arrivals_total, obs.completions_total, True
            source = "stream-counters"
        else:
            counts = self.marker.observe(obs.depth, self._marker_position(obs), _newest(obs))
            arrivals, completions, exact = (
                counts.arrivals_total,
                counts.completions_total,
                counts.exact,
            )
            source = "list-marker"
        timed = self.timestamped and obs.oldest_enqueued_at is not None
        return QueueSnapshot(
            observed_at=obs.now,
            depth=obs.depth,
            in_flight=obs.in_flight if self.in_flight else None,
            oldest_enqueued_at=obs.oldest_enqueued_at if timed else None,
            oldest_precision=Precision.EXACT if timed else Precision.UNKNOWN,
            oldest_source="entry-id" if self.stream else "payload" if timed else "",
            arrivals_total=arrivals,
            completions_total=completions,
            counts_exact=exact,
            counts_source=source,
            consumers=obs.ready + obs.draining if self.consumers else None,
        )

    def _marker_position(self, obs: Observation) -> list[int] | None:
        """What ``LPOS`` answers for the previous marker: its index from the head, if still there."""
        query = self.marker.query()
        if query is None:
            return None
        job = int(query.marker)
        if not obs.queue_head <= job < obs.arrivals_total:
            return []
        newer = obs.arrivals_total - 1 - job
        return [newer if self.push_end is End.HEAD else obs.depth - 1 - newer]

    def read(self, obs: Observation) -> tuple[float | None, bool | None]:
        if not self.history:
            return None, None
        signals = compute_signals(tuple(self.history), self.spec.rate_window, self.arrivals)
        decision, self.state = decide(signals, self.spec, signals.observed_at, self.state)
        return decision.metric_value, decision.active


def _newest(obs: Observation) -> bytes | None:
    """The job at the push end, as the marker: its arrival number."""
    if obs.depth == 0:
        return None
    if obs.arrivals_total > obs.queue_head:
        return str(obs.arrivals_total - 1).encode()
    return b"-1"  # only requeued jobs wait: a marker that will not be found again


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


class BacklogPerInstance:
    """EC2 Auto Scaling target tracking on backlog per instance (waiting messages / in service)."""

    def __init__(self, scenario: Scenario, settings: _Settings) -> None:
        self.target = settings.number("targetBacklogPerInstance", _depth_target(scenario))
        self.period = settings.duration("period", 60.0)
        self.out_points = settings.integer("scaleOutDatapoints", 3)
        self.in_points = settings.integer("scaleInDatapoints", 15)
        self.in_ratio = settings.number("scaleInRatio", 0.9)
        self.min = settings.integer("minCapacity", max(1, scenario.keda.min_replica_count))
        self.max = scenario.keda.max_replica_count
        self.initial = max(self.min, scenario.initial_workers)
        self.points: collections.deque[float] = collections.deque(
            maxlen=max(self.out_points, self.in_points)
        )
        self.next = self.period

    def initial_replicas(self) -> int:
        return self.initial

    def step(self, obs: Observation, replicas: int) -> int:
        if obs.now + 1e-9 < self.next:
            return replicas
        self.next = obs.now + self.period
        if obs.ready == 0:
            return replicas  # no instance in service: the metric has no data
        self.points.append(obs.depth / obs.ready)
        points = list(self.points)
        wanted = math.ceil(obs.depth / self.target - 1e-9)
        desired = replicas
        if len(points) >= self.out_points and all(
            p > self.target for p in points[-self.out_points :]
        ):
            desired = max(replicas, wanted)
        elif len(points) >= self.in_points and all(
            p < self.in_ratio * self.target for p in points[-self.in_points :]
        ):
            desired = min(replicas, wanted)
        return min(max(desired, self.min), self.max)


class Judoscale:
    """A queue-time range: up by ``upscaleJumps`` after a cool-down, down by one per delay."""

    def __init__(self, scenario: Scenario, settings: _Settings) -> None:
        target = scenario.target_age
        self.high = settings.duration("upscaleThreshold", target / 2)
        self.low = settings.duration("downscaleThreshold", target / 10)
        self.cooldown = settings.duration("upscaleCooldown", 180.0)
        self.delay = settings.duration("downscaleDelay", 600.0)
        self.jumps = settings.integer("upscaleJumps", 1)
        self.period = settings.duration("checkInterval", 10.0)
        self.min = settings.integer("minDynos", max(1, scenario.keda.min_replica_count))
        self.max = scenario.keda.max_replica_count
        self.initial = max(self.min, scenario.initial_workers)
        self.next = self.period
        self.last_up = -math.inf
        self.last_down = -math.inf
        self.recent: collections.deque[tuple[float, float]] = collections.deque()

    def initial_replicas(self) -> int:
        return self.initial

    def step(self, obs: Observation, replicas: int) -> int:
        if obs.now + 1e-9 < self.next:
            return replicas
        self.next = obs.now + self.period
        now = obs.now
        queue_time = 0.0 if obs.oldest_enqueued_at is None else now - obs.oldest_enqueued_at
        self.recent.append((now, queue_time))
        while self.recent[0][0] < now - self.delay:
            self.recent.popleft()
        if queue_time > self.high and replicas < self.max and now - self.last_up >= self.cooldown:
            self.last_up = now
            return min(self.max, replicas + self.jumps)
        covered = self.recent[0][0] <= now - self.delay + self.period
        quiet = covered and all(q < self.low for _, q in self.recent)
        if quiet and replicas > self.min and now - max(self.last_down, self.last_up) >= self.delay:
            self.last_down = now
            return replicas - 1
        return replicas


class Fixed:
    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def initial_replicas(self) -> int:
        return self.replicas

    def step(self, obs: Observation, replicas: int) -> int:
        return self.replicas


# -- settings and the registry ----------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    """A policy's overrides from the scenario, read with the policy's defaults."""

    policy: str
    values: Mapping[str, Any]

    def _get(self, key: str) -> Any:
        return self.values.get(key)

    def fail(self, key: str, expected: str) -> ScenarioError:
        return ScenarioError(
            f"policies.{self.policy}.{key}: got {self.values.get(key)!r}; expected {expected}"
        )

    def number(self, key: str, default: float) -> float:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.fail(key, "a number above zero")
        return float(value)

    def integer(self, key: str, default: int) -> int:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, "a whole number, at least 0")
        return value

    def duration(self, key: str, default: float) -> float:
        value = self._get(key)
        if value is None:
            return default
        try:
            return parse_duration(str(value))
        except ValueError:
            raise self.fail(key, "a duration such as 30, 90s or 5m") from None


#: the settings each policy takes from a scenario's ``policies`` section
SETTINGS: dict[str, frozenset[str]] = {
    "queue-age-scaler": frozenset(),
    "cpu": frozenset({"targetUtilization"}),
    "keda-redis-listlength": frozenset({"listLength", "activationListLength"}),
    "keda-rabbitmq-queuelength": frozenset({"value", "activationValue"}),
    "keda-rabbitmq-messagerate": frozenset({"value", "activationValue"}),
    "keda-rabbitmq-consumptiontime": frozenset({"value", "activationValue"}),
    "aws-backlog-per-instance": frozenset(
        {
            "targetBacklogPerInstance",
            "period",
            "scaleOutDatapoints",
            "scaleInDatapoints",
            "scaleInRatio",
            "minCapacity",
        }
    ),
    "judoscale": frozenset(
        {
            "upscaleThreshold",
            "downscaleThreshold",
            "upscaleCooldown",
            "downscaleDelay",
            "upscaleJumps",
            "checkInterval",
            "minDynos",
        }
    ),
    "fixed": frozenset({"replicas"}),
}
POLICY_NAMES: tuple[str, ...] = tuple(SETTINGS)


def _depth_target(scenario: Scenario) -> float:
    """Jobs one worker gets through within the SLO: AWS's "acceptable latency / processing time"."""
    return max(1.0, round(scenario.target_age * scenario.worker_throughput))


def _fixed_default(scenario: Scenario) -> int:
    """A fleet sized for the average load at 80% utilisation, within the ceiling."""
    busy = scenario.expected_jobs() * scenario.mean_job_seconds / scenario.duration
    replicas = max(1, math.ceil(busy / scenario.workers.concurrency / 0.8))
    ceiling = scenario.ceiling
    return min(
        replicas, ceiling if ceiling is not None else replicas, scenario.keda.max_replica_count
    )


def _keda(
    source: Callable[[Scenario, _Settings], MetricSource],
) -> Callable[[Scenario, _Settings], Autoscaler]:
    return lambda scenario, settings: KedaAutoscaler(scenario, source(scenario, settings))


_BUILDERS: dict[str, Callable[[Scenario, _Settings], Autoscaler]] = {
    "queue-age-scaler": _keda(lambda sc, _: QueueAgeSource(sc)),
    "cpu": lambda sc, st: KedaAutoscaler(
        sc, CpuSource(st.number("targetUtilization", 50.0) / 100), keda=False
    ),
    "keda-redis-listlength": _keda(
        lambda sc, st: ListLengthSource(
            st.number("listLength", _depth_target(sc)), st.number("activationListLength", 0.0)
        )
    ),
    "keda-rabbitmq-queuelength": _keda(
        lambda sc, st: RabbitSource(
            RabbitMode.QUEUE_LENGTH,
            st.number("value", _depth_target(sc)),
            st.number("activationValue", 0.0),
        )
    ),
    "keda-rabbitmq-messagerate": _keda(
        lambda sc, st: RabbitSource(
            RabbitMode.MESSAGE_RATE,
            st.number("value", sc.worker_throughput),
            st.number("activationValue", 0.0),
        )
    ),
    "keda-rabbitmq-consumptiontime": _keda(
        lambda sc, st: RabbitSource(
            RabbitMode.CONSUMPTION_TIME,
            st.number("value", sc.target_age),
            st.number("activationValue", 0.0),
        )
    ),
    "aws-backlog-per-instance": BacklogPerInstance,
    "judoscale": Judoscale,
    "fixed": lambda sc, st: Fixed(st.integer("replicas", _fixed_default(sc))),
}


def build(name: str, scenario: Scenario) -> Autoscaler:
    """The autoscaler ``name`` with the scenario's overrides; ScenarioError on a bad one."""
    if name not in _BUILDERS:
        raise ScenarioError(f"unknown policy {name!r}; expected one of {', '.join(POLICY_NAMES)}")
    overrides = scenario.policies.get(name, {})
    for key in overrides:
        if key not in SETTINGS[name]:
            known = ", ".join(sorted(SETTINGS[name])) or "none"
            raise ScenarioError(f"policies.{name}.{key}: unknown setting; {name} takes: {known}")
    return _BUILDERS[name](scenario, _Settings(name, overrides))


def check_overrides(scenario: Scenario) -> None:
    """Reject a ``policies`` section that names a policy that does not exist."""
    for name in scenario.policies:
        if name not in SETTINGS:
            raise ScenarioError(
                f"policies.{name}: unknown policy; expected one of {', '.join(POLICY_NAMES)}"
            )
