"""Reading a scenario file: the YAML document, checked key by key, into a
:class:`~scaler.simulate.scenario.Scenario`; every problem a :class:`ScenarioError` naming the key
(``workers.bootSeconds``), the value and what was expected."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from scaler.durations import parse_duration
from scaler.errors import InvalidMetadata
from scaler.simulate.scenario import (
    Burst,
    Dependency,
    Hpa,
    JobClass,
    Keda,
    Scenario,
    ScenarioError,
    Segment,
    Sessions,
    Workers,
)
from scaler.spec import parse_metadata


def load_scenario(path: Path) -> Scenario:
    return parse_scenario(read_mapping(path, "scenario"))


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """The YAML mapping in ``path`` (a scenario or a family file)."""
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise ScenarioError(f"{path}: expected a mapping of {what} keys at the top")
    return document


#: the URL of the simulated dependency's probe profile (a PostgreSQL-like figure: the slots the
#: workers may hold in all); nothing connects to it
SIMULATED_PROBE = "postgresql://simulated/"

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
    dependency = _dependency(top.section("dependency"), workers)
    trigger = top.section("trigger")
    metadata = {key: str(value) for key, value in trigger.values.items()}
    # ``probe:NAME`` with the dependency's name reads the simulated dependency's live slots
    profiles = (
        {dependency.name: f"{SIMULATED_PROBE}{dependency.name}"} if dependency.capacity else {}
    )
    try:
        spec = parse_metadata(metadata, profiles)
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
        dependency=dependency,
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
    section.only(
        {"name", "capacity", "perWorker", "apiShare", "apiOperationSeconds", "usl", "otherSessions"}
    )
    usl = section.section("usl")
    usl.only({"sigma", "kappa"})
    others = tuple(
        Sessions(item.duration("at", None), item.integer("sessions", 0))
        for item in section.items("otherSessions")
    )
    if any(b.at < a.at for a, b in itertools.pairwise(others)):
        raise ScenarioError("dependency.otherSessions: expected the steps in time order")
    dependency = Dependency(
        name=section.text("name", "dependency"),
        capacity=section.integer("capacity", 0),
        per_worker=section.number("perWorker", float(workers.concurrency), low=1e-9),
        api_share=section.number("apiShare", 0.0, high=0.99),
        api_operation_seconds=section.duration("apiOperationSeconds", 0.05, positive=True),
        sigma=usl.number("sigma", 0.0, high=0.99),
        kappa=usl.number("kappa", 0.0, high=1.0),
        others=others,
    )
    if dependency.capacity and (dependency.ceiling or 0) < 1:
        raise ScenarioError("dependency: capacity minus the API's share leaves no worker room")
    if (dependency.curved or others) and not dependency.capacity:
        raise ScenarioError("dependency: usl and otherSessions need a capacity")
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
