"""``queue-age-scaler probe``: sample one queue for a few seconds and show its signals and the
decision the server would make, as a table or as JSON."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from typing import Any

from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.bounds import UNBOUNDED, Bounds
from scaler.ceilings.headroom import ProbeFigure
from scaler.ceilings.registry import PROBE_TIMEOUT, ProbeRegistry
from scaler.evaluation import Evaluator
from scaler.metrics import Metrics
from scaler.policy import Decision
from scaler.profiles import Profile
from scaler.sample_schedule import SLOW_INTERVAL, Urgency
from scaler.sampler import SamplerRegistry
from scaler.signals import Figure, QueueSignals
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec
from scaler.url_policy import OPEN_URLS, UrlPolicy


async def probe(
    metadata: Mapping[str, str],
    profiles: Mapping[str, Profile | str],
    duration: float,
    *,
    namespace: str | None = None,
    urls: UrlPolicy = OPEN_URLS,
    bounds: Bounds = UNBOUNDED,
) -> dict[str, Any]:
    """Sample for ``duration`` seconds; return the report as a JSON-ready dict.

    The metadata goes through the server's parser unchanged: what the server refuses, probe
    refuses, with the same error. Run by the operator: any URL, and any profile (``namespace``
    None), unless told otherwise.
    """
    spec = parse_metadata(metadata, profiles, namespace=namespace, urls=urls, bounds=bounds)
    metrics = Metrics()
    connections = Connections()  # probe's own, closed when it is done
    samplers = SamplerRegistry(open_adapter, metrics, connections=connections)
    probes = ProbeRegistry(metrics)
    try:
        sampler = samplers.get(spec)
        await probes.figures(spec, first_timeout=0.0)  # start the probes with the sampler
        await asyncio.sleep(duration)
        history = await sampler.history(first_timeout=1.0)
        figures = await probes.figures(spec, first_timeout=PROBE_TIMEOUT)
    finally:
        await samplers.aclose()
        await probes.aclose()
        await connections.aclose()
    evaluator = Evaluator()
    for end in range(2, len(history)):  # replay, so learned throughput is what a server has
        evaluator.evaluate(history[:end], spec)
    evaluation = evaluator.evaluate(history, spec, sampler.arrivals, figures)
    decision = evaluation.decision
    out = report(spec, evaluation.signals, decision, len(history), figures)
    # what the samples warned about (an unreadable timestamp, a management API that is down...)
    out["warnings"] = sorted({kind for snapshot in history for kind in snapshot.warnings})
    out["warnings"] += decision.ceiling_warnings  # a probe that cannot read, and what it does
    out.update(_sampling(spec, sampler.urgency))
    return out


def _sampling(spec: TriggerSpec, urgency: Urgency) -> dict[str, Any]:
    """How a server at its defaults would read this queue now, and what that does to the
    figures' precision (probe itself reads it every ``sampleInterval``)."""
    fast = urgency.fast
    interval = spec.sample_interval if fast else max(spec.sample_interval, SLOW_INTERVAL)
    why = "fast" if fast else "slow"
    return {
        "urgency": urgency.name.lower().replace("_", " "),
        "server_sample_interval_seconds": interval,
        "sampling": (
            f"{why}: a server reads this queue every {interval:g}s now (sampleInterval "
            f"{spec.sample_interval:g}s while watched, near targetAge, changing or asked after a "
            f"pause; up to --slow-sample-interval, {SLOW_INTERVAL:g}s by default, while idle or "
            "steady); an estimated age is good to about one interval, and over a longer one a "
            "list empties between samples more often, its counts then lower bounds"
        ),
    }


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
    spec: TriggerSpec,
    signals: QueueSignals,
    decision: Decision,
    samples: int,
    figures: Mapping[str, ProbeFigure] | None = None,
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
        "paused": signals.paused,
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
    if decision.ceiling_parts is not None:
        out["dependencies"] = _dependencies(spec, decision, figures or {})
    if spec.learn_knee:
        out["knee"] = _knee(decision)
    if decision.ceiling_unknown is not None:
        out["ceiling_unknown"] = decision.ceiling_unknown
    if decision.throughput is None and spec.worker_throughput is None:
        out["note"] = (
            "per-worker throughput unknown: set workerThroughput, or jobDuration and workerConcurrency"
        )
    return out


def _knee(decision: Decision) -> dict[str, Any]:
    """The learned throughput curve: the cap, its fit, and the worker counts it was fitted to."""
    knee = decision.knee
    fit = knee.fit if knee is not None else None
    return {
        "cap": knee.cap if knee is not None else None,
        "workers": _number(fit.workers) if fit else None,
        "peak_per_second": _number(fit.peak) if fit else None,
        "sigma": round(fit.sigma, 6) if fit else None,
        "kappa": round(fit.kappa, 6) if fit else None,
        "note": fit.describe() if fit else "no fit yet: too few saturated worker counts",
        "observed": [
            {
                "workers": c.workers,
                "seconds": _number(c.seconds),
                "per_second": _number(c.completions / c.seconds),
            }
            for c in (knee.counts if knee is not None else ())
        ],
    }


def _dependencies(
    spec: TriggerSpec, decision: Decision, figures: Mapping[str, ProbeFigure]
) -> list[dict[str, Any]]:
    """Each dependency's ceiling, and for a probed one its figure, age and source."""
    assert decision.ceiling_parts is not None
    parts = {part.name: part for part in decision.ceiling_parts.each}
    out = []
    for dep in spec.dependencies:
        part = parts[dep.name]
        item: dict[str, Any] = {
            "name": dep.name,
            "ceiling": part.workers,
            "source": str(part.source),
            "per_worker": dep.per_worker,
            "limit": dep.limit,
        }
        figure = figures.get(dep.probe) if dep.probe is not None else None
        if dep.probe is not None:
            reading = figure.reading if figure is not None else None
            item.update(
                probe=dep.probe,
                kind=dep.probe_kind,
                usable=_number(reading.usable) if reading else None,
                free=_number(reading.free) if reading else None,
                unit=reading.unit if reading else None,
                detail=reading.detail if reading else None,
                age_seconds=_number(figure.age) if figure is not None else None,
                error=figure.error if figure is not None else None,
                note=part.note,
            )
        out.append(item)
    return out


def render_table(data: Mapping[str, Any]) -> str:
    """One line per figure; a list (``warnings``, ``dependencies``) one line per item."""
    width = max(len(k) for k in data)
    lines = []
    for key, value in data.items():
        items = value if isinstance(value, list) and value else [value]
        for index, item in enumerate(items):
            lines.append(f"{key if index == 0 else '':<{width}}  {_shown(item)}")
    return "\n".join(lines)


def _shown(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, dict) and "ceiling" in value:  # a dependency
        ceiling = "unknown" if value["ceiling"] is None else value["ceiling"]
        why = value.get("note") or f"{value['limit']:g}/{value['per_worker']:g}"
        return f"{value['name']}: {ceiling} workers, {value['source']} ({why})"
    if isinstance(value, dict) and "cap" in value:  # the knee
        return f"cap {'none yet' if value['cap'] is None else value['cap']} ({value['note']})"
    if isinstance(value, list):
        return "none" if not value else ", ".join(map(str, value))
    return str(value)
