"""The jobs of one scenario, drawn once from its seed and shared by every policy.

Every policy sees the same arrivals and the same job durations (common random numbers), so the
scoreboard compares policies, not luck.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass

from scaler.simulate.scenario import Scenario, Segment


@dataclass(frozen=True, slots=True)
class Workload:
    #: enqueue times, ascending, with ``math.inf`` appended as a sentinel
    arrivals: list[float]
    #: seconds each job runs on an uncontended dependency
    durations: list[float]
    #: whether each job holds a dependency slot while it runs
    uses_dependency: list[bool]
    #: CPU each job uses while it runs, in thousandths of a worker's request
    cpu_milli: list[int]

    @property
    def jobs(self) -> int:
        return len(self.durations)


def generate(scenario: Scenario) -> Workload:
    arrivals_rng = random.Random(f"{scenario.seed}:arrivals")
    jobs_rng = random.Random(f"{scenario.seed}:jobs")
    times: list[float] = []
    ends = [s.at for s in scenario.arrivals[1:]] + [scenario.duration]
    for segment, end in zip(scenario.arrivals, ends, strict=True):
        times.extend(_poisson(segment, min(end, scenario.duration), arrivals_rng))
    for burst in scenario.bursts:
        if burst.at < scenario.duration:
            times.extend(itertools.repeat(burst.at, burst.jobs))
    times.sort()

    classes = scenario.jobs
    cumulative = list(itertools.accumulate(c.share for c in classes))
    total = cumulative[-1]
    has_dependency = bool(scenario.dependency.capacity)
    durations: list[float] = []
    uses: list[bool] = []
    cpu: list[int] = []
    for _ in times:
        job_class = classes[bisect.bisect_right(cumulative, jobs_rng.random() * total)]
        durations.append(jobs_rng.lognormvariate(math.log(job_class.median), job_class.sigma))
        uses.append(has_dependency and job_class.uses_dependency)
        cpu.append(round(job_class.cpu_per_job * 1000))
    times.append(math.inf)
    return Workload(times, durations, uses, cpu)


def _poisson(segment: Segment, end: float, rng: random.Random) -> list[float]:
    """Arrival times in ``[segment.at, end)``: Poisson, thinned where the rate varies (sine)."""
    peak = segment.peak
    out: list[float] = []
    if peak <= 0:
        return out
    t = segment.at
    varying = bool(segment.period)
    while True:
        t += rng.expovariate(peak)
        if t >= end:
            return out
        if not varying or rng.random() * peak < segment.rate_at(t):
            out.append(t)
