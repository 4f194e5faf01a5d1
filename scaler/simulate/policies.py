"""The policies the simulator compares, each as its own documentation defines it.

- ``queue-age-scaler``: this project. Every ``sampleInterval`` the simulated queue is written into
  the in-memory broker and read back by its adapter as the trigger's format shows it (list marker
  counts for list formats, stream counters for ``stream``; in-flight jobs, workers and enqueue
  times only where the format records them); the server's own ``SampleHistory`` and evaluation
  step answer KEDA's GetMetrics and IsActive; KEDA and the HPA do the rest.
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

import math
from collections.abc import Callable

from scaler.simulate.autoscaler import Autoscaler
from scaler.simulate.direct_autoscalers import BacklogPerInstance, Fixed, Judoscale
from scaler.simulate.metric_sources import (
    CpuSource,
    KedaAutoscaler,
    ListLengthSource,
    MetricSource,
    RabbitMode,
    RabbitSource,
)
from scaler.simulate.policy_settings import PolicySettings, depth_target
from scaler.simulate.queue_age_source import QueueAgeSource
from scaler.simulate.scenario import Scenario, ScenarioError

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


def _fixed_default(scenario: Scenario) -> int:
    """A fleet sized for the average load at 80% utilisation, within the ceiling."""
    busy = scenario.expected_jobs() * scenario.mean_job_seconds / scenario.duration
    replicas = max(1, math.ceil(busy / scenario.workers.concurrency / 0.8))
    ceiling = scenario.ceiling
    return min(
        replicas, ceiling if ceiling is not None else replicas, scenario.keda.max_replica_count
    )


def _keda(
    source: Callable[[Scenario, PolicySettings], MetricSource],
) -> Callable[[Scenario, PolicySettings], Autoscaler]:
    return lambda scenario, settings: KedaAutoscaler(scenario, source(scenario, settings))


_BUILDERS: dict[str, Callable[[Scenario, PolicySettings], Autoscaler]] = {
    "queue-age-scaler": _keda(lambda sc, _: QueueAgeSource(sc)),
    "cpu": lambda sc, st: KedaAutoscaler(
        sc, CpuSource(st.number("targetUtilization", 50.0) / 100), keda=False
    ),
    "keda-redis-listlength": _keda(
        lambda sc, st: ListLengthSource(
            st.number("listLength", depth_target(sc)), st.number("activationListLength", 0.0)
        )
    ),
    "keda-rabbitmq-queuelength": _keda(
        lambda sc, st: RabbitSource(
            RabbitMode.QUEUE_LENGTH,
            st.number("value", depth_target(sc)),
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
    return _BUILDERS[name](scenario, PolicySettings(name, overrides))


def check_overrides(scenario: Scenario) -> None:
    """Reject a ``policies`` section that names a policy that does not exist."""
    for name in scenario.policies:
        if name not in SETTINGS:
            raise ScenarioError(
                f"policies.{name}: unknown policy; expected one of {', '.join(POLICY_NAMES)}"
            )
