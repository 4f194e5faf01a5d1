"""Prometheus metrics: per queue (what the sampler saw) and per trigger (what was decided).

Unknown figures are exported as NaN, never as 0. Names follow Prometheus conventions: base units,
``_seconds``, ``_total`` on counters.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from brokers.base import QueueSnapshot
from scaler.limits import MAX_TRIGGER_SERIES
from scaler.metric_rows import (
    PREFIX,
    QUEUE_LABELS,
    MetricRows,
    Provenance,
    QueueRow,
    TriggerRow,
)
from scaler.signals import oldest_age

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from wsgiref.simple_server import WSGIServer

    from brokers.base import QueueSource
    from brokers.connections import Traffic
    from scaler.arrival_history import ArrivalHistory
    from scaler.budget_registry import BudgetShares
    from scaler.ceilings.headroom import Headroom
    from scaler.policy import Decision
    from scaler.pool_policy import PoolDecision
    from scaler.signals import QueueSignals
    from scaler.trigger_spec import TriggerSpec

PROBE_LABELS = ("dependency", "probe")
#: one pool's figures in a shared budget, the label of queue_age_scaler_shared_budget_workers
BUDGET_FIGURES = ("need", "held", "allotted", "granted")
#: label values come from trigger metadata, which anyone who may create a ScaledObject writes:
#: longer ones are cut to this many characters
MAX_LABEL_LENGTH = 120


def label(text: str) -> str:
    """A label value, cut to :data:`MAX_LABEL_LENGTH` characters."""
    return text if len(text) <= MAX_LABEL_LENGTH else text[: MAX_LABEL_LENGTH - 3] + "..."


def _queue_labels(source: QueueSource) -> tuple[str, str, str]:
    return (source.broker, label(source.queue), source.format)


def _value(number: float | None) -> float:
    return math.nan if number is None else number


def _figures(snapshot: QueueSnapshot) -> tuple[tuple[float, ...], tuple[Provenance, ...]]:
    """The age, and the precision and source, of each of the snapshot's workers' figures
    (:data:`FIGURES`)."""
    readings = snapshot.readings
    known = (snapshot.in_flight, snapshot.consumers, snapshot.slots)
    each = (readings.in_flight, readings.consumers, readings.slots)
    ages = tuple(
        reading.age if value is not None else math.nan
        for value, reading in zip(known, each, strict=True)
    )
    provenances = tuple(
        (reading.precision.value if value is not None else "unknown", reading.source)
        for value, reading in zip(known, each, strict=True)
    )
    return ages, provenances


def broker_kind(url: str) -> str:
    """The broker a URL is for, as a label (never the URL: it may hold a password)."""
    scheme = url.partition(":")[0].lower()
    if scheme in ("redis", "rediss", "unix"):
        return "redis"
    if scheme in ("amqp", "amqps"):
        return "rabbitmq"
    return label(scheme)


class _TrafficCollector(Collector):
    """What the samplers sent each kind of broker: read from the server's connections at each
    scrape."""

    def __init__(self) -> None:
        #: the traffic per broker URL (none until a server's connections are watched)
        self.read: Callable[[], Mapping[str, Traffic]] = dict

    def describe(self) -> Iterator[CounterMetricFamily]:
        """The families, without series: the registry learns their names from them (a scrape
        that names the metrics it wants, ``/metrics?name[]=...``, needs them)."""
        return _traffic_families({})

    def collect(self) -> Iterator[CounterMetricFamily]:
        totals: dict[str, tuple[int, int]] = {}
        for url, traffic in self.read().items():
            kind = broker_kind(url)
            sent, carried = totals.get(kind, (0, 0))
            totals[kind] = (sent + traffic.commands, carried + traffic.round_trips)
        return _traffic_families(totals)


def _traffic_families(
    totals: Mapping[str, tuple[int, int]],
) -> Iterator[CounterMetricFamily]:
    """The broker traffic's families: commands and round trips per kind of broker."""
    commands = CounterMetricFamily(
        f"{PREFIX}_broker_commands",
        "Commands the samplers sent (Redis: each command of a pipeline, MULTI and EXEC included)",
        labels=["broker"],
    )
    trips = CounterMetricFamily(
        f"{PREFIX}_broker_round_trips",
        "Round trips that carried them (Redis: one pipeline of many queues' reads)",
        labels=["broker"],
    )
    for kind, (sent, carried) in sorted(totals.items()):
        commands.add_metric([kind], sent)
        trips.add_metric([kind], carried)
    yield commands
    yield trips


class Metrics:
    """The metrics of one server, in a registry of their own."""

    def __init__(self, *, max_trigger_series: int = MAX_TRIGGER_SERIES) -> None:
        """``max_trigger_series``: the most triggers with series of their own; the decisions of
        others are counted in ``series_dropped_total`` (a trigger is forgotten 10 minutes after
        KEDA last asks about it)."""
        self.registry = CollectorRegistry()
        self._max_trigger_series = max_trigger_series
        r = self.registry
        #: each queue's and each trigger's series, as rows of plain values (metric_rows.py)
        self._rows = MetricRows()
        for collector in self._rows.collectors():
            r.register(collector)
        self._traffic = _TrafficCollector()
        r.register(self._traffic)
        self.sample_errors = Counter(
            f"{PREFIX}_sample_errors", "Samples that failed", (*QUEUE_LABELS, "error"), registry=r
        )
        self.sample_warnings = Counter(
            f"{PREFIX}_sample_warnings",
            "Samples with a warning: a job timestamp unreadable or in the future, a count that is "
            "only a lower bound, a missing stream",
            (*QUEUE_LABELS, "kind"),
            registry=r,
        )
        self.sample_duration = Histogram(
            f"{PREFIX}_sample_duration_seconds", "Time one sample took", registry=r
        )
        self.rpc_errors = Counter(
            f"{PREFIX}_rpc_errors", "RPCs answered with an error", ("method", "code"), registry=r
        )
        self.series_dropped = Counter(
            f"{PREFIX}_series_dropped",
            "Decisions not exported because as many triggers as the limit have series already",
            registry=r,
        )
        self.dependency_slots = Gauge(
            f"{PREFIX}_dependency_slots",
            "A dependency probe's newest good reading: figure=usable, the slots the workers may "
            "hold in all (theirs included; requests/s for an API), figure=free, the slots nobody "
            "holds (NaN: the probe does not tell)",
            (*PROBE_LABELS, "figure"),
            registry=r,
        )
        self.dependency_age = Gauge(
            f"{PREFIX}_dependency_reading_age_seconds",
            "Seconds since a dependency probe's newest good reading",
            PROBE_LABELS,
            registry=r,
        )
        self.dependency_errors = Counter(
            f"{PREFIX}_dependency_probe_errors",
            "Dependency probe readings that failed",
            PROBE_LABELS,
            registry=r,
        )
        self.budget_slots = Gauge(
            f"{PREFIX}_shared_budget_slots",
            "A dependency limit shared between pools (ScaledObjects): its slots, the smallest "
            "limit its pools' triggers name",
            ("budget",),
            registry=r,
        )
        self.budget_workers = Gauge(
            f"{PREFIX}_shared_budget_workers",
            "One pool's part of a shared dependency budget, in its workers: figure=need (what it "
            "would run alone), held (what it may still run), allotted (its fair share), granted "
            "(what it is answered now)",
            ("budget", "pool", "figure"),
            registry=r,
        )
        self._budget_pools: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    # -- per queue ----------------------------------------------------------------------------

    def record_sample(
        self,
        source: QueueSource,
        snapshot: QueueSnapshot,
        seconds: float,
        arrivals: ArrivalHistory | None = None,
        *,
        interval: float | None = None,
    ) -> None:
        """One sample of ``source``; ``arrivals``, the queue's arrival history with the sample in
        it, estimates the age where the sample has no enqueue time, as the policy does;
        ``interval`` the one planned until the next."""
        labels = _queue_labels(source)
        self.sample_duration.observe(seconds)
        # the age the policy uses (exact, estimated or a lower bound; NaN only when unknown): it
        # depends on the newest snapshot and the arrival history alone, not on any rate window
        values = (
            _value(snapshot.depth),
            _value(snapshot.in_flight),
            _value(snapshot.consumers),
            _value(snapshot.slots),
            _value(snapshot.paused),
            _value(snapshot.consumer_capacity),
            _value(oldest_age(snapshot, arrivals).value),
            _value(interval),
        )
        ages, provenances = _figures(snapshot)
        row = self._rows.queues.get(labels)
        if row is None:
            self._rows.add_queue(labels, QueueRow(values, ages, provenances, 1))
        else:
            row.values, row.figure_ages, row.figure_provenances = values, ages, provenances
            row.samples += 1
        for kind in snapshot.warnings:
            self.sample_warnings.labels(*labels, kind).inc()

    def watch_traffic(self, read: Callable[[], Mapping[str, Traffic]]) -> None:
        """Export the broker traffic ``read`` returns (per broker URL) at each scrape."""
        self._traffic.read = read

    def record_sample_error(self, source: QueueSource, error: str) -> None:
        self.sample_errors.labels(*_queue_labels(source), error).inc()

    def forget_queue(self, source: QueueSource) -> None:
        self._rows.drop_queue(_queue_labels(source))

    # -- per trigger --------------------------------------------------------------------------

    @staticmethod
    def trigger_labels(namespace: str, name: str, spec: TriggerSpec) -> tuple[str, ...]:
        return (label(namespace), label(name), label(spec.source.queue), spec.metric.value)

    def forget_trigger(self, labels: tuple[str, ...]) -> None:
        """Drop every series of a trigger that KEDA no longer asks about."""
        self._rows.drop_trigger(labels)

    def record_decision(
        self,
        namespace: str,
        name: str,
        spec: TriggerSpec,
        signals: QueueSignals,
        decision: Decision,
    ) -> None:
        labels = self.trigger_labels(namespace, name, spec)
        values = (
            _value(signals.arrival_rate.value),
            _value(signals.completion_rate.value),
            _value(signals.time_to_drain.value),
            spec.target_age,
            spec.target_drain_time,
            decision.desired_workers,
            _value(decision.ceiling),
            _value(decision.utilisation),
        )
        reason = label(decision.reason_label)
        provenances = tuple(
            (figure.precision.value, figure.source)
            for figure in (
                signals.oldest_age,
                signals.arrival_rate,
                signals.completion_rate,
                signals.time_to_drain,
            )
        )
        row = self._rows.triggers.get(labels)
        if row is None:
            if len(self._rows.triggers) >= self._max_trigger_series:
                self.series_dropped.inc()
                return
            row = TriggerRow(values, reason, provenances)
            self._rows.add_trigger(labels, row)
        else:
            row.values, row.reason, row.provenances = values, reason, provenances
        if decision.ceiling_parts is not None:
            row.ceilings = tuple(
                (label(part.name), str(part.source), _value(part.workers))
                for part in decision.ceiling_parts.each
                if part.name != "maxWorkers"
            )
        fit = decision.knee.fit if decision.knee is not None else None
        if fit is not None:
            row.knee = (fit.workers, fit.peak, fit.sigma, fit.kappa)

    def record_pool(self, namespace: str, name: str, spec: TriggerSpec, pool: PoolDecision) -> None:
        """Each queue of a pool trigger: its need, its allotment and whether it drives."""
        row = self._rows.triggers.get(self.trigger_labels(namespace, name, spec))
        if row is None:  # record_decision dropped the trigger's series
            return
        row.pool = tuple(
            (label(queue.name), queue.need, queue.allotted, 1 if queue.name == pool.driving else 0)
            for queue in pool.queues
        )

    # -- per shared budget -------------------------------------------------------------------

    def record_budget(self, budget: BudgetShares) -> None:
        """A shared budget as last split: its slots and each pool's figures."""
        name = label(budget.key.label)
        self.budget_slots.labels(name).set(budget.limit)
        pools = {label(share.pool) for share in budget.pools}
        with self._lock:
            for gone in self._budget_pools.get(name, set()) - pools:
                self._forget_budget_pool(name, gone)
            self._budget_pools[name] = pools
        for share in budget.pools:
            for figure in BUDGET_FIGURES:
                value = getattr(share, figure)
                self.budget_workers.labels(name, label(share.pool), figure).set(value)

    def keep_budgets(self, budgets: list[BudgetShares]) -> None:
        """Drop the series of every budget not in ``budgets`` (their pools all went idle)."""
        kept = {label(b.key.label) for b in budgets}
        with self._lock:
            for name in [n for n in self._budget_pools if n not in kept]:
                for pool in self._budget_pools.pop(name):
                    self._forget_budget_pool(name, pool)
                with contextlib.suppress(KeyError):
                    self.budget_slots.remove(name)
        for budget in budgets:
            self.record_budget(budget)

    def _forget_budget_pool(self, name: str, pool: str) -> None:
        for figure in BUDGET_FIGURES:
            with contextlib.suppress(KeyError):
                self.budget_workers.remove(name, pool, figure)

    # -- per dependency probe -----------------------------------------------------------------

    def record_probe(
        self, name: str, kind: str, reading: Headroom, age: Callable[[], float | None]
    ) -> None:
        """A probe's good reading; ``age`` gives the reading's age when scraped."""
        labels = (label(name), kind)
        self.dependency_slots.labels(*labels, "usable").set(_value(reading.usable))
        self.dependency_slots.labels(*labels, "free").set(_value(reading.free))
        self.dependency_age.labels(*labels).set_function(lambda: _value(age()))

    def record_probe_error(self, name: str, kind: str) -> None:
        self.dependency_errors.labels(label(name), kind).inc()

    def forget_probe(self, name: str, kind: str) -> None:
        labels = (label(name), kind)
        for figure in ("usable", "free"):
            with contextlib.suppress(KeyError):
                self.dependency_slots.remove(*labels, figure)
        with contextlib.suppress(KeyError):
            self.dependency_age.remove(*labels)

    def record_rpc_error(self, method: str, code: str) -> None:
        self.rpc_errors.labels(method, code).inc()

    def serve_http(self, host: str, port: int) -> tuple[WSGIServer, int]:
        """Serve ``/metrics`` on a daemon thread; returns the server and its bound port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server, server.server_port
