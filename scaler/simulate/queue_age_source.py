"""This project's scaler in the simulator: the simulated queue written into the in-memory broker
at each sample and read back through its adapter as the trigger's format shows it, the server's
own SampleHistory, and the server's own evaluation step (signals and policy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from brokers import registry
from brokers.memory import MemoryBroker, MemoryJob
from scaler.budget_registry import BudgetRegistry
from scaler.ceilings.headroom import Headroom, ProbeFigure
from scaler.ceilings.registry import REFRESH_INTERVAL as PROBE_EVERY
from scaler.errors import Unavailable
from scaler.evaluation import Evaluator, activity, metric_value
from scaler.policy import Decision
from scaler.sample_history import SampleHistory
from scaler.simulate.autoscaler import Observation
from scaler.simulate.keda import MetricType
from scaler.simulate.scenario import Scenario, ScenarioError
from scaler.trigger_spec import Metric, TriggerSpec

T = TypeVar("T")

#: the namespace of every simulated ScaledObject: Deployments on one dependency share it
SIMULATED_NAMESPACE = "sim"


class QueueAgeSource:
    """This project's scaler: the memory broker's adapter, the real history, signals and policy."""

    def __init__(
        self, scenario: Scenario, budgets: BudgetRegistry | None = None, pool: str = ""
    ) -> None:
        """``budgets``: the server's shared budgets, when several Deployments share the
        dependency (``pool``: this one's name), through which the decision goes as the
        server's does."""
        spec = scenario.spec
        self.budgets = budgets
        self.pool = pool
        source = spec.source
        if registry.format_info(source.format).snapshot_model is None:
            simulated = [n for n, f in registry.formats().items() if f.snapshot_model is not None]
            raise ScenarioError(
                f"trigger.format: {source.format} provides no snapshot model, so it is not "
                f"simulated; use one of {', '.join(simulated)}"
            )
        self.spec = spec
        self.concurrency = scenario.workers.concurrency
        broker = MemoryBroker()
        self.queue = broker.queue(source.queue)
        self.adapter = broker.open(source)
        self.history = SampleHistory()
        self.evaluator = Evaluator()
        self.next_sample = 0.0
        #: what the memory queue holds: the requeued jobs, then arrivals [head, arrivals)
        self._requeued = 0
        self._head = 0
        self.metric_type = (
            MetricType.AVERAGE_VALUE if spec.metric is Metric.WORKERS else MetricType.VALUE
        )
        self.target = spec.metric_target
        self.probes = [dep.probe for dep in spec.dependencies if dep.probe is not None]
        self.reading: tuple[Headroom, float] | None = None

    def observe(self, obs: Observation) -> None:
        if self.probes and (self.reading is None or obs.now - self.reading[1] >= PROBE_EVERY):
            # the probe reads the simulated dependency on its own interval, as the server's does
            self.reading = (Headroom(None, obs.dependency_slots, "simulated"), obs.now)
        if obs.now + 1e-9 < self.next_sample:
            return
        self.next_sample = obs.now + self.spec.sample_interval
        self._write(obs)
        self.history.append(
            self.adapter.read(obs.now),
            window=self.spec.rate_window,
            interval=self.spec.sample_interval,
        )

    def _write(self, obs: Observation) -> None:
        """Bring the memory queue to the simulated one: the new jobs join the push end, the
        jobs taken since the last sample leave the oldest end, the requeued go back in front."""
        queue, times = self.queue, obs.arrival_times
        first, end = queue.arrivals_total, obs.arrivals_total
        queue.push_all([b"%d" % job for job in range(first, end)], times[first:end])
        queue.take(self._requeued + obs.queue_head - self._head)
        queue.requeue(MemoryJob(b"%d" % job, times[job]) for job in obs.requeued)
        self._requeued, self._head = len(obs.requeued), obs.queue_head
        queue.in_flight = obs.in_flight
        queue.consumers, queue.draining = obs.ready + obs.draining, obs.draining
        queue.concurrency = self.concurrency
        queue.completions_total = obs.completions_total

    def read(self, obs: Observation) -> tuple[float | None, bool | None]:
        if not self.history:
            return None, None
        history = self.history
        figures: dict[str, ProbeFigure] = {}
        if self.reading is not None:
            reading, read_at = self.reading
            figure = ProbeFigure("postgres", reading, obs.now - read_at)
            figures = {name: figure for name in self.probes}
        evaluation = self.evaluator.evaluate(history.view, self.spec, history.arrivals, figures)
        decision = evaluation.decision
        if self.budgets is not None:
            decision = self.budgets.apply(
                SIMULATED_NAMESPACE,
                self.pool,
                self,
                self.spec,
                evaluation.signals,
                decision,
                obs.now,
            )
        return keda_answers(self.spec, decision)


def keda_answers(spec: TriggerSpec, decision: Decision) -> tuple[float | None, bool | None]:
    """The metric the HPA reads and the activity KEDA reads, as the server answers them; None
    for both where either is UNAVAILABLE: KEDA asks GetMetrics then IsActive in one
    ``GetMetricsAndActivity`` call, for its own poll and for the HPA's metric alike."""
    value = _answer(metric_value, spec, decision)
    active = _answer(activity, spec, decision)
    return (None, None) if value is None or active is None else (value, active)


def _answer(
    read: Callable[[TriggerSpec, Decision], T], spec: TriggerSpec, decision: Decision
) -> T | None:
    try:
        return read(spec, decision)
    except Unavailable:
        return None
