"""``queue-age-scaler probe``: sample one queue for a few seconds and show its signals and the
decision the server would make, as a table or as JSON."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from typing import Any

from brokers.registry import open_adapter
from scaler.metrics import Metrics
from scaler.policy import Decision, PolicyState, decide
from scaler.sampler import SamplerRegistry
from scaler.signals import Figure, QueueSignals, compute_signals
from scaler.spec import TriggerSpec, parse_metadata


async def probe(
    metadata: Mapping[str, str], profiles: Mapping[str, str], duration: float
) -> dict[str, Any]:
    """Sample for ``duration`` seconds; return the report as a JSON-ready dict.

    The metadata goes through the server's parser unchanged: what the server refuses, probe
    refuses, with the same error.
    """
    spec = parse_metadata(metadata, profiles)
    samplers = SamplerRegistry(open_adapter, Metrics())
    try:
        sampler = samplers.get(spec)
        await asyncio.sleep(duration)
        history = tuple(await sampler.history(first_timeout=1.0))
    finally:
        await samplers.aclose()
    signals = compute_signals(history, spec.rate_window, sampler.arrivals)
    state = PolicyState()
    for end in range(2, len(history) + 1):  # replay, so learned throughput is what a server has
        _, state = decide(compute_signals(history[:end], spec.rate_window), spec, 0.0, state)
    decision, _ = decide(signals, spec, signals.observed_at, state)
    out = report(spec, signals, decision, len(history))
    # what the samples warned about (an unreadable timestamp, a management API that is down...)
    out["warnings"] = sorted({kind for snapshot in history for kind in snapshot.warnings})
    return out


def _number(value: float | None) -> float | None:
    """JSON has no infinity: an unbounded figure is reported as null with a note."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, 3)


def _figure(report: dict[str, Any], name: str, figure: Figure) -> None:
    report[name] = _number(figure.value)
    base = name.removesuffix("_seconds")
    report[f"{base}_precision"] = figure.precision.value
    report[f"{base}_source"] = figure.source or None
    if figure.value is not None and math.isinf(figure.value):
        report[f"{base}_unbounded"] = True


def report(
    spec: TriggerSpec, signals: QueueSignals, decision: Decision, samples: int
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "queue": spec.source.queue,
        "broker": spec.source.broker,
        "format": spec.source.format,
        "samples": samples,
        "rate_span_seconds": round(signals.rate_span, 3),
        "depth": signals.depth,
        "in_flight": signals.in_flight,
        "consumers": signals.consumers,
    }
    _figure(out, "oldest_age_seconds", signals.oldest_age)
    out["age_precision"] = out.pop("oldest_age_precision")
    out["age_source"] = out.pop("oldest_age_source")
    _figure(out, "arrival_rate", signals.arrival_rate)
    _figure(out, "completion_rate", signals.completion_rate)
    _figure(out, "time_to_drain_seconds", signals.time_to_drain)
    out.update(
        metric=spec.metric.value,
        metric_name=spec.metric_name,
        metric_value=_number(decision.metric_value),
        metric_target=spec.metric_target,
        desired_workers=decision.desired_workers,
        ceiling=decision.ceiling,
        reason=decision.reason_text,
        worker_throughput=_number(decision.throughput),
        utilisation=_number(decision.utilisation),
        active=decision.active,
    )
    if decision.throughput is None and spec.worker_throughput is None:
        out["note"] = (
            "per-worker throughput unknown: set workerThroughput, or jobDuration and workerConcurrency"
        )
    return out


def render_table(data: Mapping[str, Any]) -> str:
    width = max(len(k) for k in data)
    lines = []
    for key, value in data.items():
        shown = (
            "unknown"
            if value is None
            else json.dumps(value)
            if isinstance(value, bool)
            else str(value)
        )
        lines.append(f"{key:<{width}}  {shown}")
    return "\n".join(lines)
