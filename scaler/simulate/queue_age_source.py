"""This project's scaler in the simulator: the simulated queue sampled into snapshots as the
trigger's format shows it, then the server's own signals and policy."""

from __future__ import annotations

import collections

from brokers.base import Precision, QueueSnapshot
from brokers.formats import FORMATS, End
from brokers.list_marker import ListMarker
from scaler.arrival_history import ArrivalHistory
from scaler.policy import PolicyState, decide
from scaler.signals import compute_signals
from scaler.simulate.autoscaler import Observation
from scaler.simulate.keda import MetricType
from scaler.simulate.scenario import Scenario, ScenarioError
from scaler.trigger_spec import Metric

#: formats whose jobs carry their enqueue time where the adapter reads it
_TIMESTAMPED = frozenset({"sidekiq", "rq", "bullmq", "dramatiq", "stream"})
#: formats whose arrivals and completions are counted by the library or broker itself
_OWN_COUNTS = {"stream": "stream-counters", "bullmq": "bullmq-events"}


class QueueAgeSource:
    """This project's scaler: snapshots as the format shows them, the real signals and policy."""

    def __init__(self, scenario: Scenario) -> None:
        spec = scenario.spec
        source = spec.source
        if source.format == "arq":
            raise ScenarioError(
                "trigger.format: arq (a sorted set) is not simulated; use rq or list"
            )
        info = FORMATS[source.format]
        self.spec = spec
        self.stream = source.format == "stream"
        #: the counts a format keeps itself, exact however fast the queue empties
        self.counts_source = _OWN_COUNTS.get(source.format)
        self.in_flight = info.reports_in_flight
        self.consumers = info.reports_consumers
        self.timestamped = source.format in _TIMESTAMPED or source.timestamp_field is not None
        self.push_end = info.oldest_end.opposite
        self.marker = ListMarker(self.push_end)
        self.history: collections.deque[QueueSnapshot] = collections.deque()
        self.arrivals = ArrivalHistory()
        self.state = PolicyState()
        self.next_sample = 0.0
        self.metric_type = (
            MetricType.AVERAGE_VALUE if spec.metric is Metric.WORKERS else MetricType.VALUE
        )
        self.target = spec.metric_target

    def observe(self, obs: Observation) -> None:
        if obs.now + 1e-9 < self.next_sample:
            return
        self.next_sample = obs.now + self.spec.sample_interval
        snapshot = self.snapshot(obs)
        self.history.append(snapshot)
        # as the server's Sampler trims: the rate window and two intervals more
        keep_from = obs.now - self.spec.rate_window - 2 * self.spec.sample_interval
        while len(self.history) > 2 and self.history[1].observed_at <= keep_from:
            self.history.popleft()
        if snapshot.arrivals_total is not None:
            self.arrivals.add(snapshot.observed_at, snapshot.arrivals_total)

    def snapshot(self, obs: Observation) -> QueueSnapshot:
        if self.counts_source is not None:
            arrivals, completions, exact = obs.arrivals_total, obs.completions_total, True
            source = self.counts_source
        else:
            counts = self.marker.observe(obs.depth, self._marker_position(obs), _newest(obs))
            arrivals, completions, exact = (
                counts.arrivals_total,
                counts.completions_total,
                counts.exact,
            )
            source = "list-marker"
        timed = self.timestamped and obs.oldest_enqueued_at is not None
        return QueueSnapshot(
            observed_at=obs.now,
            depth=obs.depth,
            in_flight=obs.in_flight if self.in_flight else None,
            oldest_enqueued_at=obs.oldest_enqueued_at if timed else None,
            oldest_precision=Precision.EXACT if timed else Precision.UNKNOWN,
            oldest_source="entry-id" if self.stream else "payload" if timed else "",
            arrivals_total=arrivals,
            completions_total=completions,
            counts_exact=exact,
            counts_source=source,
            consumers=obs.ready + obs.draining if self.consumers else None,
        )

    def _marker_position(self, obs: Observation) -> list[int] | None:
        """What ``LPOS`` answers for the previous marker: its index from the head, if still there."""
        query = self.marker.query()
        if query is None:
            return None
        job = int(query.marker)
        if not obs.queue_head <= job < obs.arrivals_total:
            return []
        newer = obs.arrivals_total - 1 - job
        return [newer if self.push_end is End.HEAD else obs.depth - 1 - newer]

    def read(self, obs: Observation) -> tuple[float | None, bool | None]:
        if not self.history:
            return None, None
        signals = compute_signals(tuple(self.history), self.spec.rate_window, self.arrivals)
        decision, self.state = decide(signals, self.spec, signals.observed_at, self.state)
        return decision.metric_value, decision.active


def _newest(obs: Observation) -> bytes | None:
    """The job at the push end, as the marker: its arrival number."""
    if obs.depth == 0:
        return None
    if obs.arrivals_total > obs.queue_head:
        return str(obs.arrivals_total - 1).encode()
    return b"-1"  # only requeued jobs wait: a marker that will not be found again
