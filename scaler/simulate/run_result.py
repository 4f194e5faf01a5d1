"""What one simulated run of one policy gives: the figures (:class:`RunResult`) and the series
sampled for the plots."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Series:
    """Sampled every ``step`` seconds, for the figures."""

    times: list[float] = field(default_factory=list)
    oldest_age: list[float] = field(default_factory=list)
    #: ready and draining workers (those that take or finish jobs)
    workers: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RunResult:
    #: enqueue to first start of every job; jobs still waiting at the end count with their wait so far
    waits: list[float]
    slo_violation_s: float
    worker_seconds: float
    scale_events: int
    over_ceiling_s: float
    #: seconds spent at each API operation wait (time-weighted: the API's load is steady)
    api_waits: dict[float, float]
    duplicates: int
    completed: int
    series: Series
