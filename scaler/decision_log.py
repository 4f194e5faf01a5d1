"""A scaling decision as the service logs it: as log fields (the keys of the JSON object) and
as a line for a person."""

from __future__ import annotations

from scaler import logs
from scaler.policy import Decision
from scaler.pool_policy import PoolDecision
from scaler.signals import QueueSignals
from scaler.trigger_spec import TriggerSpec

#: a trigger KEDA asks about, by namespace, ScaledObject and spec
TriggerKey = tuple[str, str, TriggerSpec]


def decision_fields(
    namespace: str,
    name: str,
    spec: TriggerSpec,
    signals: QueueSignals,
    decision: Decision,
    pool: PoolDecision | None = None,
) -> dict[str, object]:
    """A decision and its inputs as log fields (keys of the object in JSON logs); for a pool,
    the signals are the driving queue's, and ``pool_queues`` has each queue's part."""
    fields = _fields(namespace, name, spec, signals, decision)
    if pool is not None:
        fields["driving_queue"] = pool.driving
        fields["pool_queues"] = [
            {
                "queue": q.name,
                "needed_workers": round(q.need, 3),
                "allotted_workers": round(q.allotted, 3),
                "depth": q.signals.depth,
                "oldest_age_seconds": q.signals.oldest_age.value,
                "reason": q.decision.reason_label,
            }
            for q in pool.queues
        ]
    return fields


def _fields(
    namespace: str, name: str, spec: TriggerSpec, signals: QueueSignals, decision: Decision
) -> dict[str, object]:
    return {
        "namespace": namespace,
        "scaled_object": name,
        "broker": spec.source.broker,
        "queue": spec.source.queue,
        "format": spec.source.format,
        "metric": spec.metric.value,
        "desired_workers": decision.desired_workers,
        "reason": decision.reason_text,
        "ceiling_workers": decision.ceiling,
        "limited_by": decision.limited_by,
        "metric_value": decision.metric_value,
        "needed_workers": decision.needed,
        "worker_throughput": decision.throughput,
        "utilisation": decision.utilisation,
        "ceiling_warnings": list(decision.ceiling_warnings) or None,
        "depth": signals.depth,
        "in_flight": signals.in_flight,
        "consumers": signals.consumers,
        "oldest_age_seconds": signals.oldest_age.value,
        "oldest_age_precision": signals.oldest_age.precision.value,
        "oldest_age_source": signals.oldest_age.source,
        "arrivals_per_second": signals.arrival_rate.value,
        "completions_per_second": signals.completion_rate.value,
        "time_to_drain_seconds": signals.time_to_drain.value,
        "target_age_seconds": spec.target_age,
        "target_drain_time_seconds": spec.target_drain_time,
    }


def decision_text(key: TriggerKey, signals: QueueSignals, decision: Decision) -> str:
    """A decision for a person: its figures as people write them, the unknown ones said so,
    and the counts the format does not show left out."""
    namespace, name, spec = key
    parts = [f"depth={'unknown' if signals.depth is None else signals.depth}"]
    if signals.in_flight is not None:
        parts.append(f"in_flight={signals.in_flight}")
    age, arrivals, completions = signals.oldest_age, signals.arrival_rate, signals.completion_rate
    parts += [
        logs.figure("age", age.value, "s", age.precision),
        logs.figure("arrivals", arrivals.value, "/s", arrivals.precision),
        logs.figure("completions", completions.value, "/s", completions.precision),
        logs.figure("drain", signals.time_to_drain.value, "s", signals.time_to_drain.precision),
    ]
    if signals.consumers is not None:
        parts.append(f"consumers={signals.consumers}")
    if decision.ceiling is not None:
        parts.append(f"ceiling={decision.ceiling}")
    workers = f"{decision.desired_workers} worker{'' if decision.desired_workers == 1 else 's'}"
    return (
        f"{namespace}/{name} {spec.source.describe()}: {workers} ({decision.reason_text}); "
        + " ".join(parts)
    )
