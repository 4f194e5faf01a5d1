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
from scaler.budget_registry import budget_key
from scaler.ceilings.headroom import ProbeFigure
from scaler.ceilings.registry import PROBE_TIMEOUT, ProbeRegistry
from scaler.evaluation import Evaluator
from scaler.metrics import Metrics
from scaler.policy import Decision
from scaler.pool_evaluation import PoolEvaluator, QueueHistory
from scaler.pool_policy import PoolDecision, QueueShare, member_spec
from scaler.pool_queues import PoolQueues
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
    if spec.pool is not None:
        return await _probe_pool(spec, duration, bounds)
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
    out = report(spec, evaluation.signals, decision, len(history), figures, namespace)
    # what the samples warned about (an unreadable timestamp, a management API that is down...)
    out["warnings"] = sorted({kind for snapshot in history for kind in snapshot.warnings})
    out["warnings"] += decision.ceiling_warnings  # a probe that cannot read, and what it does
    out.update(_sampling(spec, sampler.urgency))
    return out


async def _probe_pool(spec: TriggerSpec, duration: float, bounds: Bounds) -> dict[str, Any]:
    """``probe`` of a pool trigger: each of its queues sampled, then the pool's decision."""
    metrics = Metrics()
    connections = Connections()
    samplers = SamplerRegistry(open_adapter, metrics, connections=connections)
    probes = ProbeRegistry(metrics)
    try:
        queues = await PoolQueues(connections, max_queues=bounds.max_pool_queues).resolve(spec)
        each = [samplers.get(member_spec(spec, queue)) for queue in queues]
        await probes.figures(spec, first_timeout=0.0)
        await asyncio.sleep(duration)
        histories = [await sampler.history(first_timeout=1.0) for sampler in each]
        figures = await probes.figures(spec, first_timeout=PROBE_TIMEOUT)
    finally:
        await samplers.aclose()
        await probes.aclose()
        await connections.aclose()
    evaluator = PoolEvaluator()
    for end in range(2, min(len(history) for history in histories)):  # replay, as in probe()
        evaluator.evaluate(
            [QueueHistory(q, h[:end]) for q, h in zip(queues, histories, strict=True)], spec
        )
    final = [
        QueueHistory(q, h, sampler.arrivals)
        for q, h, sampler in zip(queues, histories, each, strict=True)
    ]
    pool = evaluator.evaluate(final, spec, figures).pool
    out = pool_report(spec, pool, figures)
    out["warnings"] = sorted(
        {kind for history in histories for s in history for kind in s.warnings}
    )
    out["warnings"] += pool.decision.ceiling_warnings
    return out


def pool_report(
    spec: TriggerSpec, pool: PoolDecision, figures: Mapping[str, ProbeFigure] | None = None
) -> dict[str, Any]:
    """A pool trigger's report: the pool's answer, then each queue and its part of it."""
    assert spec.pool is not None
    decision = pool.decision
    out: dict[str, Any] = {
        "queues": spec.pool.text,
        "queue_order": spec.pool.order.value,
        "broker": spec.source.broker,
        "format": spec.source.format,
        "metric": spec.metric.value,
        "metric_name": spec.metric_name,
        "metric_value": _number(decision.metric_value),
        "desired_workers": decision.desired_workers,
        "needed_workers": _number(decision.needed),
        "ceiling": decision.ceiling,
        "reason": decision.reason_text,
        "driving_queue": pool.driving,
        "utilisation": _number(decision.utilisation),
        "active": decision.active,
        "pool": [_pool_queue(queue, queue.name == pool.driving) for queue in pool.queues],
    }
    if decision.ceiling_parts is not None:  # the budgets named without a namespace
        out["dependencies"] = _dependencies(spec, decision, figures or {}, "")
    if decision.ceiling_unknown is not None:
        out["ceiling_unknown"] = decision.ceiling_unknown
    return out


def _pool_queue(queue: QueueShare, driving: bool) -> dict[str, Any]:
    signals, decision = queue.signals, queue.decision
    return {
        "queue": queue.name,
        "weight": queue.weight,
        "depth": signals.depth,
        "in_flight": signals.in_flight,
        "workers_share": signals.consumers,
        "oldest_age_seconds": _number(signals.oldest_age.value),
        "age_precision": signals.oldest_age.precision.value,
        "arrival_rate": _number(signals.arrival_rate.value),
        "worker_throughput": _number(decision.throughput),
        "needed_workers": _number(queue.need),
        "allotted_workers": _number(queue.allotted),
        "reason": decision.reason_text,
        "active": decision.active,
        "driving": driving,
    }


def _sampling(spec: TriggerSpec, urgency: Urgency) -> dict[str, Any]:
    """How a server at its defaults would read this queue now, and what that does to the
    figures' precision (probe itself reads it every ``sampleInterval``)."""
    fast = urgency.fast or urgency.read_on_ask  # near its target: read fresh for each call
    slow = SLOW_INTERVAL if spec.slow_sample_interval is None else spec.slow_sample_interval
    interval = spec.sample_interval if fast else max(spec.sample_interval, slow)
    why = ("read when asked" if urgency.read_on_ask else "fast") if fast else "slow"
    return {
        "urgency": urgency.name.lower().replace("_", " "),
        "server_sample_interval_seconds": interval,
        "sampling": (
            f"{why}: a server reads this queue every {interval:g}s now (sampleInterval "
            f"{spec.sample_interval:g}s while watched, changing or asked after a pause; up to "
            f"--slow-sample-interval, {SLOW_INTERVAL:g}s by default, while idle or steady; near "
            "targetAge, also whenever KEDA asks); an estimated age is good to about one interval, and over a longer one a "
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


def _worker_figures(report: dict[str, Any], signals: QueueSignals) -> None:
    """How in flight, consumers and slots were read: precision, source, and how old the figure
    was (a figure written at the library's heartbeat is as old as the heartbeat)."""
    readings = signals.readings
    for name, value, reading in (
        ("in_flight", signals.in_flight, readings.in_flight),
        ("consumers", signals.consumers, readings.consumers),
        ("slots", signals.slots, readings.slots),
    ):
        known = value is not None
        report[f"{name}_precision"] = reading.precision.value if known else "unknown"
        report[f"{name}_source"] = (reading.source or None) if known else None
        report[f"{name}_age_seconds"] = round(reading.age, 3) if known else None


def report(
    spec: TriggerSpec,
    signals: QueueSignals,
    decision: Decision,
    samples: int,
    figures: Mapping[str, ProbeFigure] | None = None,
    namespace: str | None = None,
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
        "slots": signals.slots,
        "paused": signals.paused,
    }
    _worker_figures(out, signals)
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
        out["dependencies"] = _dependencies(spec, decision, figures or {}, namespace or "")
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
    spec: TriggerSpec, decision: Decision, figures: Mapping[str, ProbeFigure], namespace: str
) -> list[dict[str, Any]]:
    """Each dependency's ceiling, the budget it shares with other ScaledObjects (``probe``
    sees this trigger alone: the server splits that budget between those that ask it), and
    for a probed one its figure, age and source."""
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
        key = budget_key(namespace, spec, dep)
        item["shared_budget"] = key.label if key is not None else None
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
        shared = value.get("shared_budget")
        alone = f", shared budget {shared} (this trigger alone here)" if shared else ""
        return f"{value['name']}: {ceiling} workers, {value['source']} ({why}){alone}"
    if isinstance(value, dict) and "allotted_workers" in value:  # a queue of a pool
        age = value["oldest_age_seconds"]
        shown = "unknown" if age is None else f"{age:g}s"
        mark = "  <- drives the decision" if value["driving"] else ""
        return (
            f"{value['queue']}: needs {value['needed_workers']:g}, gets "
            f"{value['allotted_workers']:g} ({value['reason']}; depth "
            f"{_shown(value['depth'])}, oldest {shown}){mark}"
        )
    if isinstance(value, dict) and "cap" in value:  # the knee
        return f"cap {'none yet' if value['cap'] is None else value['cap']} ({value['note']})"
    if isinstance(value, list):
        return "none" if not value else ", ".join(map(str, value))
    return str(value)
