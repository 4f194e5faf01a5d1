"""Scenario files: the traffic, the jobs, the fleet, the dependency, KEDA and the HPA, the SLO,
and this project's trigger metadata, as one YAML document (format in docs/simulator.md).

Every problem is a :class:`ScenarioError` naming the key (``workers.bootSeconds``), the value
and what was expected.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scaler.durations import parse_duration
from scaler.errors import InvalidMetadata
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec

#: z-score of the 99th percentile of a normal distribution
Z99 = 2.3263478740408408


class ScenarioError(ValueError):
    """A scenario file that cannot be simulated; the message names the key."""


@dataclass(frozen=True, slots=True)
class Segment:
    """From ``at`` on (until the next segment), jobs arrive at ``rate`` per second, plus
    ``amplitude × sin(2π (t − at) / period)`` where a period is given."""

    at: float
    rate: float
    amplitude: float = 0.0
    period: float = 0.0

    def rate_at(self, t: float) -> float:
        if not self.period:
            return self.rate
        return max(
            0.0, self.rate + self.amplitude * math.sin(2 * math.pi * (t - self.at) / self.period)
        )

    @property
    def peak(self) -> float:
        return self.rate + abs(self.amplitude)


@dataclass(frozen=True, slots=True)
class Burst:
    at: float
    jobs: int


@dataclass(frozen=True, slots=True)
class JobClass:
    share: float
    median: float
    p99: float
    uses_dependency: bool
    #: share of one worker's CPU request that one running job of this class uses
    cpu_per_job: float

    @property
    def sigma(self) -> float:
        """The lognormal's shape, from the ratio of p99 to median."""
        return math.log(self.p99 / self.median) / Z99

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)


@dataclass(frozen=True, slots=True)
class Workers:
    concurrency: int = 1
    boot_seconds: float = 30.0
    #: seconds a stopping worker may finish its running jobs (math.inf: as long as they take;
    #: 0: killed at once, its jobs run again elsewhere and count as duplicates)
    drain_seconds: float = math.inf
    cpu_per_job: float = 0.5


@dataclass(frozen=True, slots=True)
class Dependency:
    name: str = "dependency"
    #: operations the dependency serves at once
    capacity: int = 0
    #: slots one worker holds when all its job slots run jobs that use the dependency
    per_worker: float = 1.0
    #: share of the capacity the API keeps busy all the time
    api_share: float = 0.0
    #: length of one API operation on an uncontended dependency
    api_operation_seconds: float = 0.05

    @property
    def api_slots(self) -> float:
        return self.capacity * self.api_share

    @property
    def ceiling(self) -> int | None:
        """The most workers the dependency can serve beside the API; None without a dependency."""
        if not self.capacity:
            return None
        return math.floor((self.capacity - self.api_slots) / self.per_worker + 1e-9)


@dataclass(frozen=True, slots=True)
class Keda:
    polling_interval: float = 30.0
    cooldown_period: float = 300.0
    min_replica_count: int = 0
    max_replica_count: int = 100


@dataclass(frozen=True, slots=True)
class Hpa:
    sync_period: float = 15.0
    tolerance: float = 0.1
    scale_down_stabilization: float = 300.0
    #: scale-up limit per ``scale_up_period``: the larger of +100% and +4 pods
    scale_up_percent: float = 100.0
    scale_up_pods: int = 4
    scale_up_period: float = 15.0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    duration: float
    seed: int
    arrivals: tuple[Segment, ...]
    bursts: tuple[Burst, ...]
    jobs: tuple[JobClass, ...]
    workers: Workers
    dependency: Dependency
    keda: Keda
    hpa: Hpa
    target_age: float
    trigger: Mapping[str, str]
    spec: TriggerSpec
    #: per-policy overrides of the alternatives' settings
    policies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: workers running when the scenario starts
    initial_workers: int = 0

    @property
    def ceiling(self) -> int | None:
        return self.dependency.ceiling

    @property
    def mean_job_seconds(self) -> float:
        return sum(c.share * c.mean for c in self.jobs) / sum(c.share for c in self.jobs)

    @property
    def worker_throughput(self) -> float:
        """Jobs per second one worker completes on an uncontended dependency."""
        return self.workers.concurrency / self.mean_job_seconds

    def rate_at(self, t: float) -> float:
        current = self.arrivals[0]
        for segment in self.arrivals:
            if segment.at > t:
                break
            current = segment
        return current.rate_at(t)

    def expected_jobs(self) -> float:
        """Arrivals expected over the whole run (integrated on a 1 s grid) plus the bursts."""
        steps = int(self.duration)
        return sum(self.rate_at(t + 0.5) for t in range(steps)) + sum(b.jobs for b in self.bursts)


def load_scenario(path: Path) -> Scenario:
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise ScenarioError(f"{path}: expected a mapping of scenario keys at the top")
    return parse_scenario(document)


_TOP_KEYS = frozenset(
    {
        "name", "description", "duration", "seed", "arrivals", "bursts", "jobs", "workers",
        "dependency", "keda", "hpa", "slo", "trigger", "policies", "initialWorkers",
    }
)  # fmt: skip


def parse_scenario(document: Mapping[str, Any]) -> Scenario:
    top = _Section(document, "")
    top.only(_TOP_KEYS)
    workers = _workers(top.section("workers"))
    trigger = top.section("trigger")
    metadata = {key: str(value) for key, value in trigger.values.items()}
    try:
        spec = parse_metadata(metadata)
    except InvalidMetadata as error:
        raise ScenarioError(f"trigger.{error}") from None
    slo = top.section("slo")
    slo.only({"targetAge"})
    keda = _keda(top.section("keda"))
    scenario = Scenario(
        name=top.text("name", None),
        duration=top.duration("duration", None, positive=True),
        seed=top.integer("seed", 1),
        arrivals=_arrivals(top),
        bursts=_bursts(top),
        jobs=_jobs(top, workers),
        workers=workers,
        dependency=_dependency(top.section("dependency"), workers),
        keda=keda,
        hpa=_hpa(top.section("hpa")),
        target_age=slo.duration("targetAge", spec.target_age, positive=True),
        trigger=metadata,
        spec=spec,
        policies=_policies(top),
        initial_workers=top.integer("initialWorkers", 0),
    )
    if scenario.initial_workers > keda.max_replica_count:
        raise ScenarioError("initialWorkers: expected at most keda.maxReplicaCount")
    return scenario


class _Section:
    """Typed access to one mapping of the document; every failure names the key path."""

    def __init__(self, values: Mapping[str, Any], path: str) -> None:
        self.values = values
        self.path = path

    def key(self, name: str) -> str:
        return f"{self.path}{name}"

    def fail(self, name: str, expected: str) -> ScenarioError:
        return ScenarioError(
            f"{self.key(name)}: got {self.values.get(name)!r}; expected {expected}"
        )

    def only(self, allowed: frozenset[str] | set[str]) -> None:
        for name in self.values:
            if name not in allowed:
                raise ScenarioError(
                    f"{self.key(str(name))}: unknown key; expected one of {', '.join(sorted(allowed))}"
                )

    def section(self, name: str) -> _Section:
        value = self.values.get(name, {})
        if not isinstance(value, dict):
            raise self.fail(name, "a mapping")
        return _Section(value, f"{self.key(name)}.")

    def items(self, name: str) -> list[_Section]:
        value = self.values.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(name, "a list of mappings")
        return [_Section(v, f"{self.key(name)}[{i}].") for i, v in enumerate(value)]

    def text(self, name: str, default: str | None) -> str:
        value = self.values.get(name, default)
        if value is None:
            raise ScenarioError(f"{self.key(name)}: missing")
        return str(value)

    def duration(self, name: str, default: float | None, *, positive: bool = False) -> float:
        value = self.values.get(name, default)
        if value is None:
            raise ScenarioError(f"{self.key(name)}: missing; expected a duration such as 90s or 1h")
        try:
            seconds = parse_duration(str(value))
        except ValueError:
            raise self.fail(name, "a duration such as 30, 500ms, 90s, 5m or 1h") from None
        if positive and seconds <= 0:
            raise self.fail(name, "a duration above zero")
        return seconds

    def number(
        self, name: str, default: float | None, *, low: float = 0.0, high: float = math.inf
    ) -> float:
        value = self.values.get(name, default)
        if value is None:
            raise ScenarioError(f"{self.key(name)}: missing; expected a number")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(name, "a number")
        if not low <= value <= high:
            raise self.fail(name, f"a number from {low:g} to {high:g}")
        return float(value)

    def integer(self, name: str, default: int, *, low: int = 0) -> int:
        value = self.values.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail(name, f"a whole number, at least {low}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        value = self.values.get(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, "true or false")
        return value


def _arrivals(top: _Section) -> tuple[Segment, ...]:
    segments = []
    for item in top.items("arrivals"):
        item.only({"at", "rate", "amplitude", "period"})
        period = item.duration("period", 0.0)
        amplitude = item.number("amplitude", 0.0)
        if amplitude and not period:
            raise item.fail("period", "a duration above zero with amplitude")
        segments.append(
            Segment(item.duration("at", 0.0), item.number("rate", None), amplitude, period)
        )
    if not segments:
        raise ScenarioError("arrivals: expected at least one {at, rate}")
    if segments[0].at != 0 or any(b.at <= a.at for a, b in itertools.pairwise(segments)):
        raise ScenarioError("arrivals: expected the first at 0 and later ones in increasing order")
    return tuple(segments)


def _bursts(top: _Section) -> tuple[Burst, ...]:
    bursts = []
    for item in top.items("bursts"):
        item.only({"at", "jobs"})
        bursts.append(Burst(item.duration("at", None), item.integer("jobs", 0, low=1)))
    return tuple(sorted(bursts, key=lambda b: b.at))


def _jobs(top: _Section, workers: Workers) -> tuple[JobClass, ...]:
    classes = []
    for item in top.items("jobs"):
        item.only({"name", "share", "duration", "usesDependency", "cpuPerJob"})
        duration = item.section("duration")
        duration.only({"median", "p99"})
        median = duration.duration("median", None, positive=True)
        p99 = duration.duration("p99", median, positive=True)
        if p99 < median:
            raise duration.fail("p99", "at least the median")
        classes.append(
            JobClass(
                share=item.number("share", 1.0, low=1e-9),
                median=median,
                p99=max(p99, median * (1 + 1e-9)),
                uses_dependency=item.flag("usesDependency", True),
                cpu_per_job=item.number("cpuPerJob", workers.cpu_per_job, high=64),
            )
        )
    if not classes:
        raise ScenarioError("jobs: expected at least one {share, duration: {median, p99}}")
    return tuple(classes)


def _workers(section: _Section) -> Workers:
    section.only({"concurrency", "bootSeconds", "drain", "cpuPerJob"})
    drain = section.values.get("drain", True)
    if isinstance(drain, bool):
        drain_seconds = math.inf if drain else 0.0
    else:
        drain_seconds = section.duration("drain", None)
    return Workers(
        concurrency=section.integer("concurrency", 1, low=1),
        boot_seconds=section.duration("bootSeconds", 30.0),
        drain_seconds=drain_seconds,
        cpu_per_job=section.number("cpuPerJob", 0.5, high=64),
    )


def _dependency(section: _Section, workers: Workers) -> Dependency:
    section.only({"name", "capacity", "perWorker", "apiShare", "apiOperationSeconds"})
    dependency = Dependency(
        name=section.text("name", "dependency"),
        capacity=section.integer("capacity", 0),
        per_worker=section.number("perWorker", float(workers.concurrency), low=1e-9),
        api_share=section.number("apiShare", 0.0, high=0.99),
        api_operation_seconds=section.duration("apiOperationSeconds", 0.05, positive=True),
    )
    if dependency.capacity and (dependency.ceiling or 0) < 1:
        raise ScenarioError("dependency: capacity minus the API's share leaves no worker room")
    return dependency


def _keda(section: _Section) -> Keda:
    section.only({"pollingInterval", "cooldownPeriod", "minReplicaCount", "maxReplicaCount"})
    keda = Keda(
        polling_interval=section.duration("pollingInterval", 30.0, positive=True),
        cooldown_period=section.duration("cooldownPeriod", 300.0),
        min_replica_count=section.integer("minReplicaCount", 0),
        max_replica_count=section.integer("maxReplicaCount", 100, low=1),
    )
    if keda.min_replica_count > keda.max_replica_count:
        raise section.fail("minReplicaCount", "at most maxReplicaCount")
    return keda


def _hpa(section: _Section) -> Hpa:
    section.only(
        {
            "syncPeriod",
            "tolerance",
            "scaleDownStabilization",
            "scaleUpPercent",
            "scaleUpPods",
            "scaleUpPeriod",
        }
    )
    return Hpa(
        sync_period=section.duration("syncPeriod", 15.0, positive=True),
        tolerance=section.number("tolerance", 0.1, high=1.0),
        scale_down_stabilization=section.duration("scaleDownStabilization", 300.0),
        scale_up_percent=section.number("scaleUpPercent", 100.0),
        scale_up_pods=section.integer("scaleUpPods", 4),
        scale_up_period=section.duration("scaleUpPeriod", 15.0, positive=True),
    )


def _policies(top: _Section) -> dict[str, dict[str, Any]]:
    section = top.section("policies")
    overrides: dict[str, dict[str, Any]] = {}
    for name, value in section.values.items():
        if not isinstance(value, dict):
            raise section.fail(str(name), "a mapping of setting -> value")
        overrides[str(name)] = dict(value)
    return overrides
