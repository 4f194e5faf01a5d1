"""A pool scenario: one fleet of workers serving several queues in a serving order, each queue with
its own traffic, jobs and SLO; the trigger is a pool trigger (``queues``).

The document is a scenario's (docs/simulator.md) with ``pool`` in place of the top-level
``arrivals``, ``bursts``, ``jobs`` and ``slo``::

    pool:
      order: strict            # strict, weighted or roundRobin: how the workers pick a queue
      queues:
        - name: critical
          weight: 5            # with order weighted
          targetAge: 30s       # the queue's SLO
          arrivals: [{at: 0, rate: 2}]
          bursts: [{at: 10m, jobs: 500}]
          jobs: [{share: 1, duration: {median: 500ms, p99: 2s}}]

Each queue is also read as a scenario of its own (:attr:`PoolQueueScenario.scenario`: its
traffic, the fleet, KEDA and the HPA, and a single-queue trigger on it with its targetAge), which
is what an alternative that scales one trigger per queue is set up from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from scaler.errors import InvalidMetadata
from scaler.pool_spec import ServingOrder
from scaler.simulate.scenario import Scenario, ScenarioError
from scaler.simulate.scenario_file import SIMULATED_PROBE, parse_scenario
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec

_POOL_KEYS = frozenset({"order", "queues"})
_QUEUE_KEYS = frozenset({"name", "weight", "targetAge", "arrivals", "bursts", "jobs"})
#: the pool trigger's keys that a queue's own trigger does not take
_POOL_TRIGGER_KEYS = ("queues", "queueOrder", "queueTargetAges")


@dataclass(frozen=True, slots=True)
class PoolQueueScenario:
    name: str
    weight: int
    target_age: float
    #: the queue alone: its traffic and jobs, the fleet, and a single-queue trigger on it
    scenario: Scenario


@dataclass(frozen=True, slots=True)
class PoolScenario:
    #: the fleet, KEDA, the HPA and the pool trigger (``spec.pool``); its traffic is the first
    #: queue's (use :attr:`queues`)
    base: Scenario
    order: ServingOrder
    queues: tuple[PoolQueueScenario, ...]

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def duration(self) -> float:
        return self.base.duration

    def expected_busy_workers(self) -> float:
        """Workers busy on average over the run, every queue's jobs together."""
        busy = (
            sum(q.scenario.expected_jobs() * q.scenario.mean_job_seconds for q in self.queues)
            / self.duration
        )
        return busy / self.base.workers.concurrency


def is_pool_document(document: object) -> bool:
    return isinstance(document, dict) and "pool" in document


def load_pool_scenario(path: Path) -> PoolScenario:
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from None
    return parse_pool_scenario(document)


def parse_pool_scenario(document: Mapping[str, Any]) -> PoolScenario:
    pool = document.get("pool")
    if not isinstance(pool, dict):
        raise ScenarioError("pool: expected a mapping with order and queues")
    for key in pool:
        if key not in _POOL_KEYS:
            raise ScenarioError(f"pool.{key}: unknown key; expected one of order, queues")
    for key in ("arrivals", "bursts", "jobs", "slo"):
        if key in document:
            raise ScenarioError(f"{key}: a pool scenario gives it per queue, in pool.queues")
    order_text = str(pool.get("order", ServingOrder.STRICT.value))
    if order_text not in {o.value for o in ServingOrder}:
        raise ScenarioError(
            f"pool.order: got {order_text!r}; expected one of strict, weighted, roundRobin"
        )
    items = pool.get("queues")
    if not isinstance(items, list) or not items or not all(isinstance(q, dict) for q in items):
        raise ScenarioError("pool.queues: expected a list of queues, each a mapping")
    trigger = {str(k): str(v) for k, v in (document.get("trigger") or {}).items()}
    rest = {k: v for k, v in document.items() if k != "pool"}
    queues = tuple(_queue(rest, trigger, item, index) for index, item in enumerate(items))
    names = [q.name for q in queues]
    if len(set(names)) != len(names):
        raise ScenarioError("pool.queues: each queue name once")
    spec = _pool_spec(document, trigger)
    assert spec.pool is not None
    if spec.pool.text != ",".join(names) or spec.pool.has_globs:
        raise ScenarioError(
            f"trigger.queues: got {spec.pool.text!r}; expected the pool's queues in order, "
            f"{','.join(names)}"
        )
    base = replace(
        queues[0].scenario,
        name=str(document.get("name", "pool")),
        seed=int(document.get("seed", 1)),
        trigger=trigger,
        spec=spec,
        target_age=min(q.target_age for q in queues),
    )
    return PoolScenario(base, ServingOrder(order_text), queues)


def _queue(
    rest: Mapping[str, Any], trigger: Mapping[str, str], item: Mapping[str, Any], index: int
) -> PoolQueueScenario:
    where = f"pool.queues[{index}]"
    for key in item:
        if key not in _QUEUE_KEYS:
            raise ScenarioError(
                f"{where}.{key}: unknown key; expected one of {sorted(_QUEUE_KEYS)}"
            )
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}.name: missing; the queue's name, as trigger.queues lists it")
    weight = item.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
        raise ScenarioError(f"{where}.weight: got {weight!r}; expected a whole number, at least 1")
    own = {k: v for k, v in trigger.items() if k not in _POOL_TRIGGER_KEYS}
    own["queue"] = name
    if "targetAge" in item:
        own["targetAge"] = str(item["targetAge"])
    document = dict(rest) | {
        "name": f"{rest.get('name', 'pool')}/{name}",
        # each queue's traffic is drawn from a seed of its own
        "seed": int(rest.get("seed", 1)) * 100 + index,
        "arrivals": item.get("arrivals"),
        "bursts": item.get("bursts", []),
        "jobs": item.get("jobs"),
        "slo": {"targetAge": item["targetAge"]} if "targetAge" in item else {},
        "trigger": own,
    }
    try:
        scenario = parse_scenario(document)
    except ScenarioError as error:
        raise ScenarioError(f"{where}: {error}") from None
    return PoolQueueScenario(name, weight, scenario.target_age, scenario)


def _pool_spec(document: Mapping[str, Any], trigger: Mapping[str, str]) -> TriggerSpec:
    dependency = document.get("dependency") or {}
    name = str(dependency.get("name", "dependency")) if isinstance(dependency, dict) else ""
    profiles = {name: f"{SIMULATED_PROBE}{name}"} if dependency else {}
    try:
        return parse_metadata(trigger, profiles)
    except InvalidMetadata as error:
        raise ScenarioError(f"trigger.{error}") from None
