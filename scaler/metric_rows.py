"""The per-queue and per-trigger series, kept as one row of plain values per queue and per
trigger, and turned into metric families at each scrape.

prometheus_client keeps one child per series: a metric object, its value and its lock. A queue
has 16 series and a trigger 13, so at 10,000 queues and 10,000 triggers that was about 300,000
children and 600,000 objects the garbage collector walked at each full collection (half of all
it walked), and about 150 MB. A row is one object: its values are tuples of floats and of
strings, which the collector stops tracking once it has seen them. Rows are replaced or changed
on the event loop and read on the metrics server's thread: the dicts of rows change under a
lock, and a scrape copies them under it; a row's fields are each replaced whole. Each family is
a collector of its own, so a scrape that names the metrics it wants builds only those.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "queue_age_scaler"
QUEUE_LABELS = ("broker", "queue", "format")
TRIGGER_LABELS = ("namespace", "scaled_object", "queue", "metric")
#: the workers' figures whose precision, source and age are exported per queue
FIGURES = ("in_flight", "consumers", "slots")
#: the signals whose precision is a series of its own
PRECISION_SIGNALS = ("age", "arrival_rate", "completion_rate", "time_to_drain")
#: the figures of the learned throughput curve, the label of queue_age_scaler_knee
KNEE_FIGURES = ("workers", "peak_per_second", "sigma", "kappa")

#: a queue's gauges of one value each, in the order of :attr:`QueueRow.values`: name, help
QUEUE_GAUGES = (
    ("queue_depth", "Jobs ready to run, not yet picked up"),
    ("queue_in_flight", "Jobs picked up and not finished"),
    ("queue_consumers", "Workers attached to the queue"),
    (
        "queue_slots",
        "Job slots of the workers serving the queue (their concurrency summed), where the "
        "library records it (Sidekiq's threads)",
    ),
    ("queue_paused", "1 while the job library holds the queue paused (BullMQ), else 0"),
    (
        "queue_consumer_capacity",
        "Share of time the queue could deliver to a consumer at once (RabbitMQ)",
    ),
    (
        "queue_oldest_age_seconds",
        "Age of the oldest waiting job at the last sample, as the policy reads it: from a job "
        "timestamp or estimated from the arrival history (precision: signal_precision)",
    ),
    (
        "queue_sample_interval_seconds",
        "The interval planned after the last sample: the trigger's sampleInterval while the "
        "queue is urgent (watched, near its target, changing, asked after a pause), longer up "
        "to serve --slow-sample-interval while idle or steady, or as the broker's budget "
        "allows. Estimated ages are as good as one interval; over a longer interval a list "
        "empties between samples more often, and its counts are then lower bounds "
        "(signal_precision)",
    ),
)
#: a trigger's gauges of one value each, in the order of :attr:`TriggerRow.values`
TRIGGER_GAUGES = (
    ("arrivals_per_second", "Jobs enqueued per second over the trigger's rateWindow"),
    ("completions_per_second", "Jobs taken or finished per second over the rateWindow"),
    ("time_to_drain_seconds", "Time the backlog needs to drain at current rates (+Inf: never)"),
    ("target_age_seconds", "The trigger's targetAge: the oldest-job age promised to users"),
    ("target_drain_time_seconds", "The trigger's targetDrainTime"),
    ("desired_workers", "Workers the policy asks for"),
    ("ceiling_workers", "Most workers the dependencies and maxWorkers allow (NaN: none)"),
    (
        "utilisation",
        "Busy share of the workers the broker shows: jobs in flight over their job slots "
        "(consumers x workerConcurrency), at most 1",
    ),
)

#: a figure's or a signal's precision and where it comes from
Provenance = tuple[str, str]


@dataclass(slots=True)
class QueueRow:
    """One queue's series."""

    #: the values of :data:`QUEUE_GAUGES`
    values: tuple[float, ...]
    #: each of :data:`FIGURES`: its age, and its precision and source
    figure_ages: tuple[float, ...]
    figure_provenances: tuple[Provenance, ...]
    samples: int = 0


@dataclass(slots=True)
class TriggerRow:
    """One trigger's series."""

    #: the values of :data:`TRIGGER_GAUGES`
    values: tuple[float, ...]
    #: the reason of the current decision
    reason: str
    #: each of :data:`PRECISION_SIGNALS`' precision and source
    provenances: tuple[Provenance, ...]
    #: each dependency's ceiling: its name, where the figure comes from, the workers
    ceilings: tuple[tuple[str, str, float], ...] = ()
    #: the learned throughput curve's :data:`KNEE_FIGURES`, once fitted
    knee: tuple[float, ...] | None = None
    #: a pool trigger's queues: name, need, allotment, 1 for the driving one else 0
    pool: tuple[tuple[str, float, float, float], ...] = ()


class MetricRows:
    """Every queue's and trigger's row, by their labels (:data:`QUEUE_LABELS`,
    :data:`TRIGGER_LABELS`), and the collectors that turn them into metric families."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, ...], QueueRow] = {}
        self.triggers: dict[tuple[str, ...], TriggerRow] = {}
        self.lock = threading.Lock()

    def add_queue(self, labels: tuple[str, ...], row: QueueRow) -> None:
        with self.lock:
            self.queues[labels] = row

    def add_trigger(self, labels: tuple[str, ...], row: TriggerRow) -> None:
        with self.lock:
            self.triggers[labels] = row

    def drop_queue(self, labels: tuple[str, ...]) -> None:
        with self.lock:
            self.queues.pop(labels, None)

    def drop_trigger(self, labels: tuple[str, ...]) -> None:
        with self.lock:
            self.triggers.pop(labels, None)

    def queue_rows(self) -> list[tuple[tuple[str, ...], QueueRow]]:
        with self.lock:
            return list(self.queues.items())

    def trigger_rows(self) -> list[tuple[tuple[str, ...], TriggerRow]]:
        with self.lock:
            return list(self.triggers.items())

    def collectors(self) -> list[Collector]:
        """One collector per family, to register: a scrape that names the metrics it wants
        (``/metrics?name[]=...``) builds those families only (at 10,000 queues, all of them
        are about 290,000 series, seconds of the metrics thread holding the GIL)."""
        queues, triggers = self.queue_rows, self.trigger_rows
        return [
            *(_Family(queues, make, add) for make, add in _QUEUE_FAMILIES),
            *(_Family(triggers, make, add) for make, add in _TRIGGER_FAMILIES),
        ]


class _Family(Collector):
    """One metric family, built from the rows at each scrape."""

    def __init__(
        self,
        rows: Callable[[], list[tuple[tuple[str, ...], Any]]],
        make: Callable[[], Metric],
        add: Callable[[Metric, tuple[str, ...], Any], None],
    ) -> None:
        self._rows, self._make, self._add = rows, make, add

    def describe(self) -> Iterator[Metric]:
        """The family without series: the registry learns its name from it."""
        yield self._make()

    def collect(self) -> Iterator[Metric]:
        family = self._make()
        for labels, row in self._rows():
            self._add(family, labels, row)
        yield family


def _gauge(name: str, doc: str, labels: Iterable[str]) -> Callable[[], Metric]:
    return lambda: GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))


def _value_at(index: int) -> Callable[[Metric, tuple[str, ...], QueueRow | TriggerRow], None]:
    """The series of one of a row's ``values`` (a queue's or a trigger's)."""

    def add(family: Metric, labels: tuple[str, ...], row: QueueRow | TriggerRow) -> None:
        cast("GaugeMetricFamily", family).add_metric(labels, row.values[index])

    return add


def _add_samples(family: Metric, labels: tuple[str, ...], row: QueueRow) -> None:
    cast("CounterMetricFamily", family).add_metric(labels, row.samples)


def _add_figure_provenances(family: Metric, labels: tuple[str, ...], row: QueueRow) -> None:
    for name, (precision, source) in zip(FIGURES, row.figure_provenances, strict=True):
        cast("GaugeMetricFamily", family).add_metric((*labels, name, precision, source), 1)


def _add_figure_ages(family: Metric, labels: tuple[str, ...], row: QueueRow) -> None:
    for name, seconds in zip(FIGURES, row.figure_ages, strict=True):
        cast("GaugeMetricFamily", family).add_metric((*labels, name), seconds)


_QUEUE_FAMILIES: tuple[
    tuple[Callable[[], Metric], Callable[[Metric, tuple[str, ...], QueueRow], None]], ...
] = (
    *(
        (_gauge(name, doc, QUEUE_LABELS), _value_at(index))
        for index, (name, doc) in enumerate(QUEUE_GAUGES)
    ),
    (
        lambda: CounterMetricFamily(f"{PREFIX}_samples", "Samples taken", labels=QUEUE_LABELS),
        _add_samples,
    ),
    (
        _gauge(
            "queue_figure_precision",
            "1 for how precise the queue's in_flight, consumers and slots are, and where they "
            "come from",
            (*QUEUE_LABELS, "figure", "precision", "source"),
        ),
        _add_figure_provenances,
    ),
    (
        _gauge(
            "queue_figure_age_seconds",
            "How old the queue's in_flight, consumers and slots were when read: a figure the "
            "library writes at a heartbeat is as old as the heartbeat (Sidekiq's, up to 5 s)",
            (*QUEUE_LABELS, "figure"),
        ),
        _add_figure_ages,
    ),
)


def _add_reason(family: Metric, labels: tuple[str, ...], row: TriggerRow) -> None:
    cast("GaugeMetricFamily", family).add_metric((*labels, row.reason), 1)


def _add_provenances(family: Metric, labels: tuple[str, ...], row: TriggerRow) -> None:
    for signal, (shown, source) in zip(PRECISION_SIGNALS, row.provenances, strict=True):
        cast("GaugeMetricFamily", family).add_metric((*labels, signal, shown, source), 1)


def _add_ceilings(family: Metric, labels: tuple[str, ...], row: TriggerRow) -> None:
    for dependency, source, workers in row.ceilings:
        cast("GaugeMetricFamily", family).add_metric((*labels, dependency, source), workers)


def _add_knee(family: Metric, labels: tuple[str, ...], row: TriggerRow) -> None:
    if row.knee is not None:
        for name, value in zip(KNEE_FIGURES, row.knee, strict=True):
            cast("GaugeMetricFamily", family).add_metric((*labels, name), value)


def _pool_figure(index: int) -> Callable[[Metric, tuple[str, ...], TriggerRow], None]:
    def add(family: Metric, labels: tuple[str, ...], row: TriggerRow) -> None:
        for name, *figures in row.pool:
            cast("GaugeMetricFamily", family).add_metric((*labels, name), figures[index])

    return add


_POOL_GAUGES = (
    (
        "pool_queue_needed_workers",
        "A pool trigger's queue: the workers serving it alone that it needs to meet its own "
        "targetAge (the pool's desired_workers is their sum, under its bounds)",
    ),
    (
        "pool_queue_allotted_workers",
        "A pool trigger's queue: what it gets of the pool's desired workers under the serving "
        "order (strict: the higher queues first; weighted: by weight)",
    ),
    (
        "pool_queue_driving",
        "1 for the queue of a pool trigger that drives its decision (the one left shortest "
        "under a ceiling, else the one that needs most), 0 for the others",
    ),
)

_TRIGGER_FAMILIES: tuple[
    tuple[Callable[[], Metric], Callable[[Metric, tuple[str, ...], TriggerRow], None]], ...
] = (
    *(
        (_gauge(name, doc, TRIGGER_LABELS), _value_at(index))
        for index, (name, doc) in enumerate(TRIGGER_GAUGES)
    ),
    (
        _gauge(
            "decision",
            "1 for the reason behind the trigger's current decision",
            (*TRIGGER_LABELS, "reason"),
        ),
        _add_reason,
    ),
    (
        _gauge(
            "signal_precision",
            "1 for how precise each signal of the trigger is, and where it comes from",
            (*TRIGGER_LABELS, "signal", "precision", "source"),
        ),
        _add_provenances,
    ),
    (
        _gauge(
            "dependency_ceiling_workers",
            "Most workers each dependency of the trigger allows now, and where the figure "
            "comes from: static, live, last good, fallback or hold",
            (*TRIGGER_LABELS, "dependency", "source"),
        ),
        _add_ceilings,
    ),
    (
        _gauge(
            "knee",
            "The throughput curve learned from the pool (learnKnee): workers where completions "
            "peak, the peak in jobs/s, and USL's sigma and kappa",
            (*TRIGGER_LABELS, "figure"),
        ),
        _add_knee,
    ),
    *(
        (_gauge(name, doc, (*TRIGGER_LABELS, "pool_queue")), _pool_figure(index))
        for index, (name, doc) in enumerate(_POOL_GAUGES)
    ),
)
