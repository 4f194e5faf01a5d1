"""One trigger's evaluation step: signals from the history, then the policy's decision.

The server, ``probe``, the simulator and the benchmarks evaluate through :class:`Evaluator`, so
they compute the same figures the same way; the server and the simulator read KEDA's answers
from a decision through :func:`metric_value` and :func:`activity` (UNAVAILABLE where they
raise). It keeps the trigger's :class:`PolicyState` and the
last evaluation: KEDA asks GetMetrics and IsActive (and the HPA again) on the same sample and
the same probe figures, and the decision is made once per sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from brokers.base import QueueSnapshot
from scaler.arrival_history import ArrivalHistory
from scaler.ceilings.headroom import ProbeFigure
from scaler.errors import Unavailable
from scaler.policy import Decision, PolicyState, decide
from scaler.signals import QueueSignals, compute_signals
from scaler.trigger_spec import TriggerSpec

#: what a decision took from the probes: each one's reading and error (not its age)
Readings = tuple[tuple[str, object, str | None], ...]

_NO_FIGURES: Mapping[str, ProbeFigure] = {}


def readings(figures: Mapping[str, ProbeFigure]) -> Readings:
    if not figures:  # most triggers probe nothing: KEDA's every call comes here
        return ()
    return tuple((name, figure.reading, figure.error) for name, figure in sorted(figures.items()))


@dataclass(frozen=True, slots=True)
class Evaluation:
    signals: QueueSignals
    decision: Decision
    #: False when this is the previous evaluation again (same sample, same probe figures)
    fresh: bool = True


class Evaluator:
    """The evaluation step of one trigger, with its policy state and per-sample cache."""

    __slots__ = ("_last", "state")

    def __init__(self, state: PolicyState | None = None) -> None:
        self.state = state or PolicyState()
        self._last: tuple[float, Readings, Evaluation] | None = None

    def evaluate(
        self,
        history: Sequence[QueueSnapshot],
        spec: TriggerSpec,
        arrivals: ArrivalHistory | None = None,
        figures: Mapping[str, ProbeFigure] = _NO_FIGURES,
    ) -> Evaluation:
        """Signals as of the newest snapshot of ``history`` (oldest first) and the decision on
        them; the previous evaluation (``fresh`` False) when the newest sample and the probe
        figures are those it was made from."""
        seen = (history[-1].observed_at, readings(figures))
        last = self._last
        if last is not None and last[0] == seen[0] and last[1] == seen[1]:
            return last[2]
        signals = compute_signals(history, spec.rate_window, arrivals)
        decision, self.state = decide(
            signals, spec, signals.observed_at, self.state, figures, history
        )
        self._last = (*seen, Evaluation(signals, decision, fresh=False))
        return Evaluation(signals, decision)


def metric_value(spec: TriggerSpec, decision: Decision) -> float:
    """GetMetrics' value for the trigger's metric; :class:`Unavailable` where it is unknown (a
    probed ceiling with nothing to go on, no readable enqueue time, no rates yet)."""
    if decision.ceiling_unknown is not None:
        raise Unavailable(decision.ceiling_unknown)
    if decision.metric_value is None and spec.pool is not None:
        raise Unavailable(f"pool {spec.pool.text!r}: {decision.detail}")
    if decision.metric_value is None:
        raise Unavailable(
            f"the {spec.metric.value} of {spec.source.describe()} is unknown right now "
            "(no readable enqueue time, or no rates yet)"
        )
    return decision.metric_value


def activity(spec: TriggerSpec, decision: Decision) -> bool:
    """IsActive's answer; :class:`Unavailable` where the queue's depth is unknown."""
    if decision.active is None and spec.pool is not None:
        raise Unavailable(f"pool {spec.pool.text!r}: {decision.detail}")
    if decision.active is None:
        raise Unavailable(f"the depth of {spec.source.describe()} is unknown right now")
    return decision.active
