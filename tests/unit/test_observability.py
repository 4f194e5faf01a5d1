"""Metric names follow Prometheus' conventions, docs/metrics.md lists every one, and the Grafana
dashboard in deploy/ is valid JSON whose every PromQL expression names only metrics the scaler
exports, so a renamed metric cannot leave a silent empty panel. The queue's age gauge shows the
age the policy uses, estimated from the arrival history where jobs carry no timestamp."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.base import Precision, QueueSnapshot, QueueSource, Reading, WorkerReadings
from brokers.formats import End
from brokers.redis_options import ListLayout
from scaler.arrival_history import ArrivalHistory
from scaler.metric_rows import PREFIX
from scaler.metrics import Metrics
from scaler.signals import compute_signals

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "queue-age-scaler.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"
#: sample names each metric type exposes, after the family name
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gauge": ("",),
}
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "group_left", "group_right", "inf", "nan"}
#: what the issue asks the dashboard to show, as metrics that must appear together in a panel
REQUIRED_PANELS = [
    {"queue_age_scaler_queue_oldest_age_seconds", "queue_age_scaler_target_age_seconds"},
    {"queue_age_scaler_time_to_drain_seconds"},
    {
        "queue_age_scaler_desired_workers",
        "queue_age_scaler_ceiling_workers",
        "queue_age_scaler_queue_consumers",
    },
    {"queue_age_scaler_decision"},
    {"queue_age_scaler_sample_errors_total"},
]


def families() -> list[tuple[str, str]]:
    return [(family.name, family.type) for family in Metrics().registry.collect()]


def exported_samples() -> set[str]:
    return {name + suffix for name, kind in families() for suffix in SUFFIXES[kind]}


def test_metric_names_follow_the_conventions() -> None:
    for name, kind in families():
        assert name.startswith(f"{PREFIX}_"), name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name), name
        if {"age", "duration", "time", "latency"} & set(name.removeprefix(PREFIX).split("_")):
            assert name.endswith("_seconds"), f"{name}: a time is in seconds, named _seconds"
        assert not name.endswith("_total"), "the client adds _total to counters"
        if kind == "counter":
            assert f"{name}_total" in exported_samples()


def test_the_docs_list_every_metric() -> None:
    documented = set(re.findall(r"`(queue_age_scaler_[a-z0-9_]+)`", METRICS_DOC.read_text()))
    exposed = {name + ("_total" if kind == "counter" else "") for name, kind in families()}
    assert exposed - documented == set(), "docs/metrics.md misses these"
    assert documented - exposed == set(), "docs/metrics.md lists metrics the scaler lacks"


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    aggregations, keywords, labels, label values or range durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expression)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\boffset\s+-?\w+", "", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        if text[match.end() :].lstrip().startswith("(") or match.group().lower() in PROMQL_KEYWORDS:
            continue
        names.add(match.group())
    return names


def test_metric_names_are_found_in_promql() -> None:
    assert metric_names(
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{q=~"$q", x="b c"}[5m]))) '
        "> on (queue) group_left max by (queue) (b) or vector(0) unless c offset 5m"
    ) == {"a_bucket", "b", "c"}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in node.get("panels", []):
        yield panel
        yield from panels(panel)


def expressions() -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every template variable query."""
    for panel in panels(dashboard()):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
            assert match, query
            yield f"variable {variable['name']}", match.group(1)


def test_the_dashboard_is_grafana_json() -> None:
    board = dashboard()
    assert board["title"] and board["uid"] and isinstance(board["schemaVersion"], int)
    ids = [panel["id"] for panel in panels(board)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in panels(board):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}"
            assert panel["targets"] and panel["description"]
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24


@pytest.mark.parametrize("where, expression", list(expressions()))
def test_every_expression_names_exported_metrics(where: str, expression: str) -> None:
    names = metric_names(expression)
    assert names, f"{where}: no metric in {expression!r}"
    assert names <= exported_samples(), f"{where}: {names - exported_samples()} are not exported"


def test_the_dashboard_shows_what_operators_need() -> None:
    per_panel = [
        set().union(*(metric_names(t["expr"]) for t in panel.get("targets", [])))
        for panel in panels(dashboard())
    ]
    for required in REQUIRED_PANELS:
        assert any(required <= used for used in per_panel), f"no panel shows {required}"


# --- the oldest-age gauge ------------------------------------------------------------------------

RESQUE = QueueSource("redis", "redis://x", "mail", "resque", ListLayout("resque", End.HEAD))
AGE = f"{PREFIX}_queue_oldest_age_seconds"
AGE_LABELS = {"broker": "redis", "queue": "mail", "format": "resque"}


def sample(metrics: Metrics, arrivals: ArrivalHistory, snapshot: QueueSnapshot) -> float | None:
    """What the sampler does with a snapshot: the count into the history, then the metrics."""
    if snapshot.arrivals_total is not None:
        arrivals.add(snapshot.counted_at, snapshot.arrivals_total)
    metrics.record_sample(RESQUE, snapshot, 0.001, arrivals)
    return metrics.registry.get_sample_value(AGE, AGE_LABELS)


def test_the_age_gauge_shows_the_arrival_history_estimate() -> None:
    metrics, arrivals = Metrics(), ArrivalHistory()
    # 10 jobs a second from t=100, none taken: no timestamps, only the marker's arrival count
    for t in range(10):
        snapshot = QueueSnapshot(
            observed_at=100.0 + t, depth=10 * t, arrivals_total=10 * t, counts_source="list-marker"
        )
        shown = sample(metrics, arrivals, snapshot)
    expected = compute_signals((snapshot,), 30.0, arrivals).oldest_age
    assert expected.precision is Precision.ESTIMATE and expected.source == "arrival-history"
    assert shown == expected.value == pytest.approx(8.95)  # the first job came in 100..101


def test_the_age_gauge_shows_a_lower_bound_for_jobs_older_than_the_history() -> None:
    metrics, arrivals = Metrics(), ArrivalHistory()
    for t in range(4):  # 20 jobs already waiting when sampling started
        shown = sample(
            metrics, arrivals, QueueSnapshot(observed_at=50.0 + t, depth=20, arrivals_total=0)
        )
    assert shown == 3.0  # all we know: at least as old as the history


def test_the_age_gauge_is_nan_only_when_the_age_is_unknown() -> None:
    metrics, arrivals = Metrics(), ArrivalHistory()
    # jobs wait, no timestamp and no count (RabbitMQ with its management API down, say)
    shown = sample(metrics, arrivals, QueueSnapshot(observed_at=10.0, depth=5))
    assert shown is not None and math.isnan(shown)
    assert sample(metrics, arrivals, QueueSnapshot(observed_at=11.0, depth=0)) == 0.0
    stamped = QueueSnapshot(
        observed_at=12.0, depth=3, oldest_enqueued_at=2.0, oldest_precision=Precision.EXACT
    )
    assert sample(metrics, arrivals, stamped) == 10.0


def test_forgetting_the_queue_drops_the_age_gauge() -> None:
    metrics, arrivals = Metrics(), ArrivalHistory()
    for t in range(1, 5):
        shown = sample(
            metrics, arrivals, QueueSnapshot(observed_at=float(t), depth=t, arrivals_total=t)
        )
    assert shown == 3.0  # the first job came by t=1, the history's start
    metrics.forget_queue(RESQUE)  # the sampler stopped
    assert metrics.registry.get_sample_value(AGE, AGE_LABELS) is None


def test_the_workers_figures_with_their_precision_source_and_age() -> None:
    """A Sidekiq-like sample: in flight as of a heartbeat 3 s old (an estimate), processes and
    threads exact; then one whose workers are unknown; then the queue is forgotten."""
    metrics = Metrics()
    readings = WorkerReadings(
        Reading(Precision.ESTIMATE, "sidekiq-work", 3.0),
        Reading(Precision.EXACT, "sidekiq-processes", 3.0),
        Reading(Precision.EXACT, "sidekiq-concurrency", 3.0),
    )
    busy = QueueSnapshot(
        observed_at=1.0, depth=4, in_flight=7, consumers=2, slots=20, readings=readings
    )
    metrics.record_sample(RESQUE, busy, 0.001)
    value = metrics.registry.get_sample_value
    figure = f"{PREFIX}_queue_figure_precision"
    assert value(f"{PREFIX}_queue_slots", AGE_LABELS) == 20
    estimate = AGE_LABELS | {"figure": "in_flight", "precision": "estimate"}
    assert value(figure, estimate | {"source": "sidekiq-work"}) == 1
    assert value(f"{PREFIX}_queue_figure_age_seconds", AGE_LABELS | {"figure": "in_flight"}) == 3
    metrics.record_sample(RESQUE, QueueSnapshot(observed_at=2.0, depth=4), 0.001)
    assert value(figure, estimate | {"source": "sidekiq-work"}) is None  # replaced, not kept
    unknown = AGE_LABELS | {"figure": "slots", "precision": "unknown", "source": ""}
    assert value(figure, unknown) == 1
    assert math.isnan(value(f"{PREFIX}_queue_slots", AGE_LABELS) or 0.0)
    metrics.forget_queue(RESQUE)
    assert value(figure, unknown) is None


def test_the_utilisation_gauge_and_forgetting_the_trigger() -> None:
    from scaler.policy import PolicyState, decide
    from scaler.spec import parse_metadata

    metrics = Metrics()
    spec = parse_metadata({"url": "redis://x", "queue": "mail", "format": "rq", "jobDuration": "1s", "workerConcurrency": "4"})  # fmt: skip
    snapshot = QueueSnapshot(observed_at=10.0, depth=3, in_flight=6, consumers=3)
    signals = compute_signals((snapshot,), 60.0)
    decision, _ = decide(signals, spec, 10.0, PolicyState())
    metrics.record_decision("shop", "mailer", spec, signals, decision)
    labels = {"namespace": "shop", "scaled_object": "mailer", "queue": "mail", "metric": "workers"}
    assert metrics.registry.get_sample_value(f"{PREFIX}_utilisation", labels) == 0.5  # 6 of 12
    metrics.forget_trigger(Metrics.trigger_labels("shop", "mailer", spec))
    assert metrics.registry.get_sample_value(f"{PREFIX}_utilisation", labels) is None
    assert metrics.registry.get_sample_value(f"{PREFIX}_desired_workers", labels) is None
