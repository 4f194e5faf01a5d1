"""What a trigger asks for, parsed: the frozen :class:`TriggerSpec`, its queue source and its
shared dependencies (:mod:`scaler.spec` builds them from KEDA's metadata). The queue source is
the adapter contract's (:class:`brokers.base.QueueSource`)."""

from __future__ import annotations

import enum
import functools
import math
import re
from dataclasses import dataclass, field

from brokers.base import QueueSource
from scaler.pool_spec import PoolSpec
from scaler.sample_schedule import Demand

DEFAULT_TARGET_AGE = 60.0
DEFAULT_RATE_WINDOW = 60.0
DEFAULT_SAMPLE_INTERVAL = 1.0
#: ``dependencyScope: none``: the trigger shares its dependencies' limits with nobody
NOT_SHARED = "none"


class Metric(enum.StrEnum):
    WORKERS = "workers"
    AGE = "age"
    DRAIN_TIME = "drainTime"


@dataclass(frozen=True, slots=True)
class Dependency:
    """A shared dependency: ``limit`` slots in all, ``per_worker`` held by each worker.

    A probed dependency (``probe``: the connection profile it reads) takes its slots from the
    probe's live reading; ``limit`` is then the static fallback, or None without one.
    """

    name: str
    limit: float | None
    per_worker: float
    #: the connection profile the probe reads, as the scaler's configuration names it
    probe: str | None = None
    #: that profile's URL (with credentials: never shown)
    probe_url: str | None = field(default=None, repr=False)
    #: the probe's kind: postgres, mysql, redis or http
    probe_kind: str | None = None

    @property
    def max_workers(self) -> int | None:
        """The workers ``limit`` allows; None for a probe without a static fallback."""
        if self.limit is None:
            return None
        return math.floor(self.limit / self.per_worker + 1e-9)


@dataclass(frozen=True)
class TriggerSpec:
    source: QueueSource
    metric: Metric = Metric.WORKERS
    target_age: float = DEFAULT_TARGET_AGE
    target_drain_time: float = DEFAULT_TARGET_AGE
    #: jobs per second one worker completes; None = learn it from observed workers
    worker_throughput: float | None = None
    worker_concurrency: int | None = None
    min_workers: int = 0
    max_workers: int | None = None
    dependencies: tuple[Dependency, ...] = ()
    activation_age: float = 0.0
    activation_depth: int = 0
    rate_window: float = DEFAULT_RATE_WINDOW
    sample_interval: float = DEFAULT_SAMPLE_INTERVAL
    #: the longest interval between two samples of the queue while it is idle or steady
    #: (``slowSampleInterval``); None: the server's ``--slow-sample-interval``
    slow_sample_interval: float | None = None
    #: the workers' Deployment's ``terminationGracePeriodSeconds`` (``gracePeriod``): a pod let
    #: go stops within it, its jobs done or not; None: not given (see :mod:`scaler.draining`)
    grace_period: float | None = None
    #: cap the ceiling at the throughput knee learned from the pool (``learnKnee``)
    learn_knee: bool = False
    #: which triggers share the dependencies' limits (``dependencyScope``): None, the default
    #: (a static dependency within the namespace, a probed one with every trigger that probes
    #: the same profile); :data:`NOT_SHARED`; or a name that groups triggers of the namespace
    dependency_scope: str | None = None
    #: this trigger's pool's share of contested slots relative to others (``dependencyWeight``)
    dependency_weight: float = 1.0
    #: the queues of a pool trigger (``queues``), None for a single queue; ``source.queue`` is
    #: then the entries as written, and each queue is sampled with a source of its own
    pool: PoolSpec | None = None

    @property
    def ceiling(self) -> tuple[int | None, str]:
        """The most workers allowed by ``maxWorkers`` and the static dependencies, and what sets
        that limit; probed dependencies are added by the policy from their live readings."""
        best: tuple[int | None, str] = (self.max_workers, "maxWorkers")
        for dep in self.dependencies:
            workers = dep.max_workers
            if dep.probe is None and workers is not None and (best[0] is None or workers < best[0]):
                best = (workers, dep.name)
        return best

    @property
    def has_ceiling(self) -> bool:
        """Whether anything bounds the workers: ``maxWorkers`` or a dependency (static or probed)."""
        return self.max_workers is not None or bool(self.dependencies)

    @functools.cached_property
    def demand(self) -> Demand:
        """What this trigger asks of its queue's sampler (built once: KEDA's every call asks)."""
        return Demand(
            self.sample_interval, self.rate_window, self.target_age, self.slow_sample_interval
        )

    @functools.cached_property
    def metric_name(self) -> str:
        named = self.source.queue if self.pool is None else f"pool {self.pool.text}"
        queue = re.sub(r"[^a-z0-9]+", "-", named.lower()).strip("-") or "queue"
        metric = re.sub(r"(?<!^)([A-Z])", r"-\1", self.metric.value).lower()
        return f"queue-age-{metric}-{queue}"[:200]

    @property
    def metric_target(self) -> float:
        if self.metric is Metric.AGE:
            return self.target_age
        if self.metric is Metric.DRAIN_TIME:
            return self.target_drain_time
        return 1.0
