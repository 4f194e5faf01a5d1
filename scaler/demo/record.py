"""What the demo saw, sample by sample: the queue as Redis holds it, the workers, and what the
server says on /metrics (its decision's reason, the workers it wants, its ceiling, its rates);
and the run's summary."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True, slots=True)
class ScalerView:
    """The trigger's figures on /metrics (the demo has one trigger); None where unknown."""

    desired: float | None = None
    ceiling: float | None = None
    reason: str | None = None
    age: float | None = None
    arrivals: float | None = None
    completions: float | None = None


_GAUGES = {
    "queue_age_scaler_desired_workers": "desired",
    "queue_age_scaler_ceiling_workers": "ceiling",
    "queue_age_scaler_queue_oldest_age_seconds": "age",
    "queue_age_scaler_arrivals_per_second": "arrivals",
    "queue_age_scaler_completions_per_second": "completions",
}


def read_metrics(text: str) -> ScalerView:
    """The figures of one /metrics page (Prometheus' text format)."""
    found: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in _GAUGES and not math.isnan(sample.value):
                found[_GAUGES[sample.name]] = sample.value
            elif sample.name == "queue_age_scaler_decision" and sample.value == 1:
                found["reason"] = sample.labels["reason"]
    return ScalerView(**found)


@dataclass(frozen=True, slots=True)
class Sample:
    #: seconds since the scenario started
    at: float
    phase: str
    #: jobs waiting
    depth: int
    #: the oldest waiting job's age, read from its ``enqueued_at`` (0 with no job waiting)
    oldest_age: float
    #: workers running, and those also still draining
    workers: int
    alive: int
    #: jobs sent and done since the start
    sent: int
    done: int
    scaler: ScalerView


@dataclass(frozen=True, slots=True)
class Summary:
    target_age: float
    ceiling: int
    max_age: float
    seconds_over_target: float
    peak_workers: int
    sent: int
    done: int
    #: the longest a job waited before a worker took it (None: no job done)
    max_wait: float | None
    interrupted: bool

    def line(self) -> str:
        waited = "" if self.max_wait is None else f", longest wait {self.max_wait:.1f} s"
        return (
            f"{'interrupted: ' if self.interrupted else ''}"
            f"max age {self.max_age:.1f} s (target {self.target_age:.3g} s), "
            f"{self.seconds_over_target:.0f} s over target, "
            f"peak {self.peak_workers} workers (ceiling {self.ceiling}), "
            f"{self.done}/{self.sent} jobs done{waited}"
        )


@dataclass
class Recording:
    target_age: float
    ceiling: int
    samples: list[Sample] = field(default_factory=list)
    #: what KEDA and the HPA did, one line per change of replicas
    scaling: list[str] = field(default_factory=list)

    def rate(self, attribute: str, window: float) -> float | None:
        """Jobs per second of ``sent`` or ``done`` over the last ``window`` seconds."""
        if len(self.samples) < 2:
            return None
        last = self.samples[-1]
        first = next(s for s in self.samples if s.at >= last.at - window - 1e-9)
        if first is last:
            first = self.samples[-2]
        count: int = getattr(last, attribute) - getattr(first, attribute)
        return count / (last.at - first.at)

    def seconds_over_target(self) -> float:
        pairs = zip(self.samples, self.samples[1:], strict=False)
        return sum(b.at - a.at for a, b in pairs if a.oldest_age > self.target_age)

    def summary(self, sent: int, waits: list[float], *, interrupted: bool) -> Summary:
        """``sent``: jobs sent in all; ``waits``: how long each job done had waited."""
        samples = self.samples
        return Summary(
            target_age=self.target_age,
            ceiling=self.ceiling,
            max_age=max((s.oldest_age for s in samples), default=0.0),
            seconds_over_target=self.seconds_over_target(),
            peak_workers=max((s.alive for s in samples), default=0),
            sent=sent,
            done=len(waits),
            max_wait=max(waits, default=None),
            interrupted=interrupted,
        )

    def as_json(self, summary: Summary, settings: dict[str, Any]) -> dict[str, Any]:
        return {
            "settings": settings,
            "summary": asdict(summary),
            "scaling": self.scaling,
            "samples": [asdict(s) for s in self.samples],
        }
