"""A scenario: the traffic, the jobs, the fleet, the dependency, KEDA and the HPA, the SLO, and
this project's trigger metadata, as one YAML document gives them (format in docs/simulator.md;
:mod:`scaler.simulate.scenario_file` reads and checks the document)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
class Sessions:
    """From ``at`` on (until the next step), another service holds ``sessions`` slots."""

    at: float
    sessions: int


@dataclass(frozen=True, slots=True)
class Dependency:
    name: str = "dependency"
    #: operations the dependency serves at once (its slots, others' sessions included)
    capacity: int = 0
    #: slots one worker holds when all its job slots run jobs that use the dependency
    per_worker: float = 1.0
    #: share of the capacity the API keeps busy all the time
    api_share: float = 0.0
    #: length of one API operation on an uncontended dependency
    api_operation_seconds: float = 0.05
    #: the Universal Scalability Law's contention and coherency coefficients: N operations at
    #: once complete X(N) = N / (1 + sigma (N - 1) + kappa N (N - 1)) times as fast as one
    sigma: float = 0.0
    kappa: float = 0.0
    #: another service's sessions over time, holding slots the workers cannot use
    others: tuple[Sessions, ...] = ()

    @property
    def api_slots(self) -> float:
        return self.capacity * self.api_share

    @property
    def ceiling(self) -> int | None:
        """The most workers the dependency can serve beside the API; None without a dependency."""
        return self.ceiling_at(0.0)

    @property
    def curved(self) -> bool:
        """Whether throughput follows a USL curve (else: flat past the slots)."""
        return bool(self.sigma or self.kappa)

    def others_at(self, t: float) -> int:
        held = 0
        for step in self.others:
            if step.at > t:
                break
            held = step.sessions
        return held

    def slots_at(self, t: float) -> int:
        """Slots the workers and the API may hold at ``t``: the capacity less others' sessions."""
        return max(0, self.capacity - self.others_at(t))

    def ceiling_at(self, t: float) -> int | None:
        """The most workers the dependency can serve at ``t``; None without a dependency."""
        if not self.capacity:
            return None
        free = self.slots_at(t) - self.api_slots
        return max(0, math.floor(free / self.per_worker + 1e-9))

    @property
    def knee_operations(self) -> float | None:
        """N*, the operations at once where the USL throughput peaks; None without kappa."""
        if self.kappa <= 0:
            return None
        return math.sqrt((1 - self.sigma) / self.kappa)


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
    def knee(self) -> float | None:
        """The workers where the jobs' completions peak (every job on the dependency, each
        worker's job slots busy), beside the API's A operations: M* = √((1 + σ(A − 1) +
        κA(A − 1)) / κ) operations of the workers (N* = √((1 − σ)/κ) without an API), over
        the job slots of one worker; None without kappa."""
        dep = self.dependency
        if dep.kappa <= 0:
            return None
        api = dep.api_slots
        base = (
            1 + dep.sigma * (api - 1) + dep.kappa * api * (api - 1) if api >= 1 else 1 - dep.sigma
        )
        return math.sqrt(max(base, 0.0) / dep.kappa) / self.workers.concurrency

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
