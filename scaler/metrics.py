"""Prometheus metrics: per queue (what the sampler saw) and per trigger (what was decided).

Unknown figures are exported as NaN, never as 0. Names follow Prometheus conventions: base units,
``_seconds``, ``_total`` on counters.
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from brokers.base import QueueSnapshot
from scaler.limits import MAX_TRIGGER_SERIES
from scaler.signals import oldest_age

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from wsgiref.simple_server import WSGIServer

    from brokers.base import QueueSource
    from brokers.connections import Traffic
    from scaler.arrival_history import ArrivalHistory
    from scaler.budget_registry import BudgetShares
    from scaler.ceilings.headroom import Headroom
    from scaler.ceilings.limit import Ceiling
    from scaler.policy import Decision
    from scaler.pool_policy import PoolDecision
    from scaler.signals import QueueSignals
    from scaler.trigger_spec import TriggerSpec

PREFIX = "queue_age_scaler"
QUEUE_LABELS = ("broker", "queue", "format")
TRIGGER_LABELS = ("namespace", "scaled_object", "queue", "metric")
#: the figures of the learned throughput curve, the label of queue_age_scaler_knee
KNEE_FIGURES = ("workers", "peak_per_second", "sigma", "kappa")
#: the signals whose precision is a series of its own
PRECISION_SIGNALS = ("age", "arrival_rate", "completion_rate", "time_to_drain")
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


#: the workers' figures whose precision, source and age are exported per queue
_FIGURES = ("in_flight", "consumers", "slots")


@dataclass(frozen=True, slots=True)
class _QueueSeries:
    """One queue's series, as ``labels()`` gave them."""

    samples: Any
    interval: Any
    depth: Any
    in_flight: Any
    consumers: Any
    slots: Any
    paused: Any
    capacity: Any
    oldest_age: Any
    figure_ages: tuple[Any, ...]


def _value(number: float | None) -> float:
    return math.nan if number is None else number


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

    def collect(self) -> Iterator[CounterMetricFamily]:
        commands = CounterMetricFamily(
            f"{PREFIX}_broker_commands",
            "Commands the samplers sent (Redis: each command of a pipeline, MULTI and EXEC "
            "included)",
            labels=["broker"],
        )
        trips = CounterMetricFamily(
            f"{PREFIX}_broker_round_trips",
            "Round trips that carried them (Redis: one pipeline of many queues' reads)",
            labels=["broker"],
        )
        totals: dict[str, list[int]] = {}
        for url, traffic in self.read().items():
            total = totals.setdefault(broker_kind(url), [0, 0])
            total[0] += traffic.commands
            total[1] += traffic.round_trips
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

        def queue_gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", doc, QUEUE_LABELS, registry=r)

        def trigger_gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", doc, TRIGGER_LABELS, registry=r)

        self.depth = queue_gauge("queue_depth", "Jobs ready to run, not yet picked up")
        self.in_flight = queue_gauge("queue_in_flight", "Jobs picked up and not finished")
        self.consumers = queue_gauge("queue_consumers", "Workers attached to the queue")
        self.slots = queue_gauge(
            "queue_slots",
            "Job slots of the workers serving the queue (their concurrency summed), where the "
            "library records it (Sidekiq's threads)",
        )
        self.figure_precision = Gauge(
            f"{PREFIX}_queue_figure_precision",
            "1 for how precise the queue's in_flight, consumers and slots are, and where they "
            "come from",
            (*QUEUE_LABELS, "figure", "precision", "source"),
            registry=r,
        )
        self.figure_age = Gauge(
            f"{PREFIX}_queue_figure_age_seconds",
            "How old the queue's in_flight, consumers and slots were when read: a figure the "
            "library writes at a heartbeat is as old as the heartbeat (Sidekiq's, up to 5 s)",
            (*QUEUE_LABELS, "figure"),
            registry=r,
        )
        self.paused = queue_gauge(
            "queue_paused", "1 while the job library holds the queue paused (BullMQ), else 0"
        )
        self.consumer_capacity = queue_gauge(
            "queue_consumer_capacity",
            "Share of time the queue could deliver to a consumer at once (RabbitMQ)",
        )
        self.oldest_age = queue_gauge(
            "queue_oldest_age_seconds",
            "Age of the oldest waiting job at the last sample, as the policy reads it: from a job "
            "timestamp or estimated from the arrival history (precision: signal_precision)",
        )
        self.sample_interval = queue_gauge(
            "queue_sample_interval_seconds",
            "The interval planned after the last sample: the trigger's sampleInterval while the "
            "queue is urgent (watched, near its target, changing, asked after a pause), longer up "
            "to serve --slow-sample-interval while idle or steady, or as the broker's budget "
            "allows. Estimated ages are as good as one interval; over a longer interval a list "
            "empties between samples more often, and its counts are then lower bounds "
            "(signal_precision)",
        )
        self.samples = Counter(f"{PREFIX}_samples", "Samples taken", QUEUE_LABELS, registry=r)
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
        self.arrival_rate = trigger_gauge(
            "arrivals_per_second", "Jobs enqueued per second over the trigger's rateWindow"
        )
        self.completion_rate = trigger_gauge(
            "completions_per_second", "Jobs taken or finished per second over the rateWindow"
        )
        self.time_to_drain = trigger_gauge(
            "time_to_drain_seconds",
            "Time the backlog needs to drain at current rates (+Inf: never)",
        )
        self.target_age = trigger_gauge(
            "target_age_seconds", "The trigger's targetAge: the oldest-job age promised to users"
        )
        self.target_drain_time = trigger_gauge(
            "target_drain_time_seconds", "The trigger's targetDrainTime"
        )
        self.desired_workers = trigger_gauge("desired_workers", "Workers the policy asks for")
        self.ceiling = trigger_gauge(
            "ceiling_workers", "Most workers the dependencies and maxWorkers allow (NaN: none)"
        )
        self.utilisation = trigger_gauge(
            "utilisation",
            "Busy share of the workers the broker shows: jobs in flight over their job slots "
            "(consumers x workerConcurrency), at most 1",
        )
        self.decision = Gauge(
            f"{PREFIX}_decision",
            "1 for the reason behind the trigger's current decision",
            (*TRIGGER_LABELS, "reason"),
            registry=r,
        )
        self.precision = Gauge(
            f"{PREFIX}_signal_precision",
            "1 for how precise each signal of the trigger is, and where it comes from",
            (*TRIGGER_LABELS, "signal", "precision", "source"),
            registry=r,
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
        self.dependency_ceiling = Gauge(
            f"{PREFIX}_dependency_ceiling_workers",
            "Most workers each dependency of the trigger allows now, and where the figure comes "
            "from: static, live, last good, fallback or hold",
            (*TRIGGER_LABELS, "dependency", "source"),
            registry=r,
        )
        self.knee = Gauge(
            f"{PREFIX}_knee",
            "The throughput curve learned from the pool (learnKnee): workers where completions "
            "peak, the peak in jobs/s, and USL's sigma and kappa",
            (*TRIGGER_LABELS, "figure"),
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
        self.pool_need = Gauge(
            f"{PREFIX}_pool_queue_needed_workers",
            "A pool trigger's queue: the workers serving it alone that it needs to meet its own "
            "targetAge (the pool's desired_workers is their sum, under its bounds)",
            (*TRIGGER_LABELS, "pool_queue"),
            registry=r,
        )
        self.pool_allotted = Gauge(
            f"{PREFIX}_pool_queue_allotted_workers",
            "A pool trigger's queue: what it gets of the pool's desired workers under the "
            "serving order (strict: the higher queues first; weighted: by weight)",
            (*TRIGGER_LABELS, "pool_queue"),
            registry=r,
        )
        self.pool_driving = Gauge(
            f"{PREFIX}_pool_queue_driving",
            "1 for the queue of a pool trigger that drives its decision (the one left shortest "
            "under a ceiling, else the one that needs most), 0 for the others",
            (*TRIGGER_LABELS, "pool_queue"),
            registry=r,
        )
        self._pool_queues: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._reasons: dict[tuple[str, ...], str] = {}
        #: each trigger's dependencies' ceiling sources, by dependency
        self._ceiling_sources: dict[tuple[str, ...], dict[str, str]] = {}
        self._precisions: dict[tuple[str, ...], tuple[str, str]] = {}
        self._figure_precisions: dict[tuple[str, ...], tuple[str, str]] = {}
        #: each sampled queue's series, looked up once (``labels()`` costs a lock and a
        #: validation per call: most of a sample's CPU at thousands of queues)
        self._queue_series: dict[tuple[str, ...], _QueueSeries] = {}
        #: each trigger's one-value gauges (``_trigger_gauges``), looked up once
        self._trigger_series: dict[tuple[str, ...], tuple[Any, ...]] = {}
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
        series = self._queue_series.get(labels)
        if series is None:
            series = self._queue_series[labels] = self._series_of(labels)
        series.samples.inc()
        series.interval.set(_value(interval))
        self.sample_duration.observe(seconds)
        series.depth.set(_value(snapshot.depth))
        series.in_flight.set(_value(snapshot.in_flight))
        series.consumers.set(_value(snapshot.consumers))
        series.slots.set(_value(snapshot.slots))
        self._record_figures(labels, snapshot, series)
        series.paused.set(_value(snapshot.paused))
        series.capacity.set(_value(snapshot.consumer_capacity))
        # the age the policy uses (exact, estimated or a lower bound; NaN only when unknown): it
        # depends on the newest snapshot and the arrival history alone, not on any rate window
        age = oldest_age(snapshot, arrivals)
        series.oldest_age.set(_value(age.value))
        for kind in snapshot.warnings:
            self.sample_warnings.labels(*labels, kind).inc()

    def _series_of(self, labels: tuple[str, ...]) -> _QueueSeries:
        return _QueueSeries(
            samples=self.samples.labels(*labels),
            interval=self.sample_interval.labels(*labels),
            depth=self.depth.labels(*labels),
            in_flight=self.in_flight.labels(*labels),
            consumers=self.consumers.labels(*labels),
            slots=self.slots.labels(*labels),
            paused=self.paused.labels(*labels),
            capacity=self.consumer_capacity.labels(*labels),
            oldest_age=self.oldest_age.labels(*labels),
            figure_ages=tuple(self.figure_age.labels(*labels, name) for name in _FIGURES),
        )

    def _record_figures(
        self, labels: tuple[str, ...], snapshot: QueueSnapshot, series: _QueueSeries
    ) -> None:
        """The precision, source and age of the snapshot's workers' figures."""
        readings = snapshot.readings
        with self._lock:
            for name, value, reading, age in zip(
                _FIGURES,
                (snapshot.in_flight, snapshot.consumers, snapshot.slots),
                (readings.in_flight, readings.consumers, readings.slots),
                series.figure_ages,
                strict=True,
            ):
                known = value is not None
                key = (*labels, name)
                now = (reading.precision.value if known else "unknown", reading.source)
                before = self._figure_precisions.get(key)
                if before != now:  # unchanged: its series is there, at 1, already
                    if before is not None:
                        self.figure_precision.remove(*key, *before)
                    self._figure_precisions[key] = now
                    self.figure_precision.labels(*key, *now).set(1)
                age.set(reading.age if known else math.nan)

    def watch_traffic(self, read: Callable[[], Mapping[str, Traffic]]) -> None:
        """Export the broker traffic ``read`` returns (per broker URL) at each scrape."""
        self._traffic.read = read

    def record_sample_error(self, source: QueueSource, error: str) -> None:
        self.sample_errors.labels(*_queue_labels(source), error).inc()

    def forget_queue(self, source: QueueSource) -> None:
        labels = _queue_labels(source)
        self._queue_series.pop(labels, None)
        for gauge in (
            self.depth,
            self.in_flight,
            self.consumers,
            self.slots,
            self.paused,
            self.consumer_capacity,
            self.oldest_age,
            self.sample_interval,
        ):
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        with self._lock:
            for key in [k for k in self._figure_precisions if k[: len(labels)] == labels]:
                self.figure_precision.remove(*key, *self._figure_precisions.pop(key))
                self.figure_age.remove(*key)

    # -- per trigger --------------------------------------------------------------------------

    @staticmethod
    def trigger_labels(namespace: str, name: str, spec: TriggerSpec) -> tuple[str, ...]:
        return (label(namespace), label(name), label(spec.source.queue), spec.metric.value)

    def _trigger_gauges(self) -> tuple[Gauge, ...]:
        """A trigger's gauges of one value each, in the order record_decision sets them."""
        return (
            self.arrival_rate,
            self.completion_rate,
            self.time_to_drain,
            self.target_age,
            self.target_drain_time,
            self.desired_workers,
            self.ceiling,
            self.utilisation,
        )

    def forget_trigger(self, labels: tuple[str, ...]) -> None:
        """Drop every series of a trigger that KEDA no longer asks about."""
        self._trigger_series.pop(labels, None)
        for gauge in self._trigger_gauges():
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        for name in KNEE_FIGURES:
            with contextlib.suppress(KeyError):
                self.knee.remove(*labels, name)
        self._forget_pool_queues(labels, ())
        with self._lock:
            reason = self._reasons.pop(labels, None)
            if reason is not None:
                self.decision.remove(*labels, reason)
            for signal in PRECISION_SIGNALS:  # by key: a scan of all keys per trigger
                precision = self._precisions.pop((*labels, signal), None)  # made a sweep
                if precision is not None:  # of 10,000 triggers take minutes
                    self.precision.remove(*labels, signal, *precision)
            for dependency, source in self._ceiling_sources.pop(labels, {}).items():
                self.dependency_ceiling.remove(*labels, dependency, source)

    def record_decision(
        self,
        namespace: str,
        name: str,
        spec: TriggerSpec,
        signals: QueueSignals,
        decision: Decision,
    ) -> None:
        labels = self.trigger_labels(namespace, name, spec)
        with self._lock:
            if labels not in self._reasons and len(self._reasons) >= self._max_trigger_series:
                self.series_dropped.inc()
                return
        series = self._trigger_series.get(labels)
        if series is None:
            series = self._trigger_series[labels] = tuple(
                gauge.labels(*labels) for gauge in self._trigger_gauges()
            )
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
        for child, value in zip(series, values, strict=True):
            child.set(value)
        reason = label(decision.reason_label)
        with self._lock:
            previous = self._reasons.get(labels)
            if previous is not None and previous != reason:
                self.decision.remove(*labels, previous)
            self._reasons[labels] = reason
            precisions = (
                signals.oldest_age,
                signals.arrival_rate,
                signals.completion_rate,
                signals.time_to_drain,
            )
            for signal, figure in zip(PRECISION_SIGNALS, precisions, strict=True):
                key, now = (*labels, signal), (figure.precision.value, figure.source)
                before = self._precisions.get(key)
                if before == now:  # its series is there, at 1, already
                    continue
                if before is not None:
                    self.precision.remove(*key, *before)
                self._precisions[key] = now
                self.precision.labels(*key, *now).set(1)
        if previous != reason:
            self.decision.labels(*labels, reason).set(1)
        if decision.ceiling_parts is not None:
            self._record_ceiling(labels, decision.ceiling_parts)
        fit = decision.knee.fit if decision.knee is not None else None
        if fit is not None:
            figures = (fit.workers, fit.peak, fit.sigma, fit.kappa)
            for name, value in zip(KNEE_FIGURES, figures, strict=True):
                self.knee.labels(*labels, name).set(value)

    def record_pool(self, namespace: str, name: str, spec: TriggerSpec, pool: PoolDecision) -> None:
        """Each queue of a pool trigger: its need, its allotment and whether it drives."""
        labels = self.trigger_labels(namespace, name, spec)
        with self._lock:
            if labels not in self._reasons:  # record_decision dropped the trigger's series
                return
        names = tuple(label(queue.name) for queue in pool.queues)
        self._forget_pool_queues(labels, names)
        for queue, shown in zip(pool.queues, names, strict=True):
            self.pool_need.labels(*labels, shown).set(queue.need)
            self.pool_allotted.labels(*labels, shown).set(queue.allotted)
            self.pool_driving.labels(*labels, shown).set(1 if queue.name == pool.driving else 0)
        with self._lock:
            self._pool_queues[labels] = names

    def _forget_pool_queues(self, labels: tuple[str, ...], keep: tuple[str, ...]) -> None:
        """Drop the series of a pool's queues that are not in ``keep`` (a glob's match gone)."""
        with self._lock:
            before = self._pool_queues.pop(labels, ())
        for queue in set(before) - set(keep):
            for gauge in (self.pool_need, self.pool_allotted, self.pool_driving):
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels, queue)

    def _record_ceiling(self, labels: tuple[str, ...], ceiling: Ceiling) -> None:
        """Each dependency's ceiling, under its current source only."""
        with self._lock:
            for part in ceiling.each:
                if part.name == "maxWorkers":
                    continue
                dependency, source = label(part.name), str(part.source)
                sources = self._ceiling_sources.setdefault(labels, {})
                before = sources.get(dependency)
                if before is not None and before != source:
                    self.dependency_ceiling.remove(*labels, dependency, before)
                sources[dependency] = source
                self.dependency_ceiling.labels(*labels, dependency, source).set(
                    _value(part.workers)
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
