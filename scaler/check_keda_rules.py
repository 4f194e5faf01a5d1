"""KEDA's own rules for an external trigger, as ``check`` applies them offline: values are
strings, ``scalerAddress`` is set, ``metricType`` fits the metric and the resource's kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from scaler.check_findings import Finding, Where
from scaler.trigger_spec import Metric


def keda_rules(where: Where, at: str, metadata: Mapping[Any, Any]) -> list[Finding]:
    findings: list[Finding] = []
    for key, value in metadata.items():
        if not isinstance(value, str):
            findings.append(
                where.problem(
                    f"{at}.metadata.{key}",
                    f"got {value!r} (YAML {type(value).__name__}); trigger metadata values are "
                    f'strings: quote it ({key}: "{yaml_scalar(value)}")',
                )
            )
    if not metadata.get("scalerAddress"):
        findings.append(
            where.problem(
                f"{at}.metadata.scalerAddress",
                "missing; set it to the scaler's HOST:PORT (queue-age-scaler.keda:6000, or "
                "localhost:6000 beside the KEDA operator)",
            )
        )
    return findings


def metric_type_rules(
    where: Where,
    kind: str,
    fallback: bool,
    at: str,
    trigger: Mapping[str, Any],
    metadata: Mapping[Any, Any],
) -> list[Finding]:
    findings: list[Finding] = []
    metric = metadata.get("metric", Metric.WORKERS.value)
    metric_type = trigger.get("metricType", "AverageValue")
    path = f"{at}.metricType"
    if metric_type == "Utilization":
        findings.append(
            where.problem(path, "KEDA rejects Utilization for external triggers; remove it")
        )
    elif kind == "ScaledJob":
        if metric != Metric.WORKERS.value:
            findings.append(
                where.problem(
                    f"{at}.metadata.metric",
                    f"got {metric!r}; a ScaledJob works only with AverageValue, which fits metric "
                    "workers: remove metric",
                )
            )
        if metric_type != "AverageValue":
            findings.append(
                where.problem(
                    path,
                    f"got {metric_type!r}; a ScaledJob reads only AverageValue: remove metricType",
                )
            )
        if trigger.get("type") == "external-push":
            findings.append(
                where.warning(
                    f"{at}.type",
                    "KEDA ignores pushed activity for a ScaledJob (it still polls); use type external",
                )
            )
    elif metric == Metric.WORKERS.value and metric_type != "AverageValue":
        findings.append(
            where.problem(
                path,
                f"got {metric_type!r}; metric workers is a worker count with target 1: remove "
                "metricType (AverageValue is the default)",
            )
        )
    elif metric in (Metric.AGE.value, Metric.DRAIN_TIME.value) and metric_type != "Value":
        findings.append(
            where.problem(
                path,
                f"got {metric_type!r}; metric {metric} reports seconds for the whole queue: set "
                "metricType: Value",
            )
        )
    if fallback and metric_type == "Value":
        findings.append(
            where.warning(
                path,
                "KEDA applies spec.fallback only to AverageValue triggers: this one gets none "
                "when the scaler answers with an error (metric workers would)",
            )
        )
    return findings


def yaml_scalar(value: object) -> str:
    return str(yaml.safe_dump(value, default_flow_style=True)).strip().removesuffix("...").strip()
