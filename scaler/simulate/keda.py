"""KEDA's scale loop and the HPA's replica maths, after KEDA v2.20's code and docs
(``pkg/scaling/executor/scale_scaledobjects.go``, keda.sh's "Scaling Deployments") and
Kubernetes' HPA (``pkg/controller/podautoscaler/replica_calculator.go``, and the
"Horizontal Pod Autoscaling" page of kubernetes.io for the default behaviour).

Pure: the caller passes the time, the metric and the pod counts in and applies the answer. The
simulator drives these for every KEDA-based policy, and :mod:`scaler.demo.keda_loop` (the demo,
the real scaling loop's test) drives the same code with metrics read over gRPC.

- :class:`KedaLoop`: every ``pollingInterval``, activation 0 -> 1 when the scaler is active, and
  back to 0 once ``cooldownPeriod`` has passed since it was last active (``minReplicaCount`` 0).
- :class:`HorizontalPodAutoscaler`: every ``syncPeriod``, ``AverageValue`` (``ceil(sum/target)``
  outside the tolerance), ``Value`` (``ceil(ratio × ready)``) and CPU ``Utilization`` (unready
  pods count as idle when scaling up); min and max replicas; the scale-down stabilisation window
  (the highest recommendation within it wins); scale-up at most ``max(+100%, +4 pods)`` per 15 s.
"""

from __future__ import annotations

import collections
import enum
import math
from dataclasses import dataclass

from scaler.simulate.scenario import Hpa, Keda


class MetricType(enum.StrEnum):
    AVERAGE_VALUE = "AverageValue"
    VALUE = "Value"
    UTILIZATION = "Utilization"


@dataclass(frozen=True, slots=True)
class PodCounts:
    """What the HPA sees of the scale target: pods it owns, and those Running and Ready."""

    replicas: int
    ready: int


def replicas_for(
    metric_type: MetricType, value: float, target: float, pods: PodCounts, tolerance: float
) -> int:
    """The HPA's recommendation for one metric (``replica_calculator.go``), before bounds.

    For ``Utilization`` the value is the CPU used by the ready pods, in shares of one pod's request
    (so the average utilisation is ``value / ready``), and the target is a share (0.5 for 50%).
    """
    current = pods.replicas
    if metric_type is MetricType.AVERAGE_VALUE:
        ratio = value / (target * current) if current else math.inf
        if current and abs(1 - ratio) <= tolerance:
            return current
        return math.ceil(value / target - 1e-9)
    if metric_type is MetricType.VALUE:
        ratio = value / target
        if current == 0:
            return math.ceil(ratio - 1e-9)
        if abs(1 - ratio) <= tolerance:
            return current
        return math.ceil(ratio * pods.ready - 1e-9)
    return _utilization_replicas(value, target, pods, tolerance)


def _utilization_replicas(used: float, target: float, pods: PodCounts, tolerance: float) -> int:
    if pods.ready == 0:
        return pods.replicas
    ratio = used / (target * pods.ready)
    unready = pods.replicas - pods.ready
    if ratio > 1 and unready > 0:
        # scaling up: pods not yet ready count as using nothing
        ratio = used / (target * pods.replicas)
        if ratio <= 1 + tolerance:
            return pods.replicas
        return math.ceil(ratio * pods.replicas - 1e-9)
    if abs(1 - ratio) <= tolerance:
        return pods.replicas
    return math.ceil(ratio * pods.ready - 1e-9)


class HorizontalPodAutoscaler:
    """One HPA: recommendations, bounds, stabilisation and rate limits, every ``syncPeriod``."""

    def __init__(self, config: Hpa, min_replicas: int, max_replicas: int) -> None:
        self.config = config
        self.min_replicas = max(1, min_replicas)
        self.max_replicas = max_replicas
        self.next_sync = 0.0
        self._recommendations: collections.deque[tuple[float, int]] = collections.deque()
        #: (time, replicas added) within the scale-up period
        self._scale_ups: collections.deque[tuple[float, int]] = collections.deque()

    def due(self, now: float) -> bool:
        """Whether a sync is due at ``now``; moves the next sync on when it is."""
        if now + 1e-9 < self.next_sync:
            return False
        self.next_sync = now + self.config.sync_period
        return True

    def desired(self, now: float, recommendation: int | None, current: int) -> int:
        """The replicas after bounds, stabilisation and rate limits; ``recommendation`` None (the
        metric is unavailable) keeps ``current``. The HPA does nothing while ``current`` is 0."""
        if current == 0 or recommendation is None:
            return current
        wanted = min(max(recommendation, self.min_replicas), self.max_replicas)
        window = self.config.scale_down_stabilization
        recs = self._recommendations
        recs.append((now, wanted))
        while recs and recs[0][0] < now - window - 1e-9:
            recs.popleft()
        if wanted < current:
            wanted = min(current, max(r for _, r in recs))
        elif wanted > current:
            wanted = min(wanted, self._scale_up_limit(now, current))
        if wanted > current:
            self._scale_ups.append((now, wanted - current))
        return wanted

    def _scale_up_limit(self, now: float, current: int) -> int:
        period = self.config.scale_up_period
        ups = self._scale_ups
        while ups and ups[0][0] <= now - period + 1e-9:
            ups.popleft()
        start = current - sum(added for _, added in ups)
        by_percent = math.floor(start * (1 + self.config.scale_up_percent / 100))
        return max(by_percent, start + self.config.scale_up_pods)


class KedaLoop:
    """KEDA's own part: activation 0 <-> 1 and the cooldown, every ``pollingInterval``."""

    def __init__(self, config: Keda) -> None:
        self.config = config
        self.next_poll = 0.0
        self.last_active: float | None = None

    def due(self, now: float) -> bool:
        if now + 1e-9 < self.next_poll:
            return False
        self.next_poll = now + self.config.polling_interval
        return True

    def poll(self, now: float, active: bool | None, replicas: int) -> int:
        """Replicas after one poll; ``active`` None (the scaler answered with an error) changes
        nothing."""
        if active is None:
            return replicas
        floor = self.config.min_replica_count
        if active:
            self.last_active = now
            if replicas == 0:
                return max(1, floor)
            return replicas
        if replicas > floor and floor == 0:
            since = self.last_active if self.last_active is not None else -math.inf
            if now - since >= self.config.cooldown_period:
                return 0
        return replicas
