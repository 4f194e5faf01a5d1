"""A pool trigger's evaluation step: each queue's signals from its own history, then the pool's
decision (:func:`scaler.pool_policy.decide_pool`). The server, ``probe`` and the simulator
evaluate pools through :class:`PoolEvaluator`, as single queues through
:class:`scaler.evaluation.Evaluator`: once per set of samples and probe figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from brokers.base import QueueSnapshot
from scaler.arrival_history import ArrivalHistory
from scaler.ceilings.headroom import ProbeFigure
from scaler.evaluation import Readings, readings
from scaler.pool_policy import PoolDecision, PoolMember, PoolState, decide_pool, member_spec
from scaler.pool_spec import PoolQueue
from scaler.signals import compute_signals
from scaler.trigger_spec import TriggerSpec

_NO_FIGURES: Mapping[str, ProbeFigure] = {}


@dataclass(frozen=True, slots=True)
class QueueHistory:
    """One queue of a pool and what its sampler holds: the snapshots (oldest first) and the
    longer arrival history."""

    queue: PoolQueue
    history: Sequence[QueueSnapshot]
    arrivals: ArrivalHistory | None = None


@dataclass(frozen=True, slots=True)
class PoolEvaluation:
    pool: PoolDecision
    #: False when this is the previous evaluation again (same samples, same probe figures)
    fresh: bool = True


class PoolEvaluator:
    """The evaluation step of one pool trigger, with its state and per-sample cache."""

    __slots__ = ("_last", "state")

    def __init__(self, state: PoolState | None = None) -> None:
        self.state = state or PoolState()
        self._last: tuple[tuple[tuple[str, float], ...], Readings, PoolEvaluation] | None = None

    def evaluate(
        self,
        queues: Sequence[QueueHistory],
        spec: TriggerSpec,
        figures: Mapping[str, ProbeFigure] = _NO_FIGURES,
    ) -> PoolEvaluation:
        """The pool's decision as of each queue's newest snapshot; the previous evaluation
        (``fresh`` False) when no queue has a new one and the probe figures are the same."""
        seen = tuple((q.queue.name, q.history[-1].observed_at) for q in queues)
        taken = readings(figures)
        last = self._last
        if last is not None and last[0] == seen and last[1] == taken:
            return last[2]
        members = []
        for queue in queues:
            member = member_spec(spec, queue.queue)
            signals = compute_signals(queue.history, member.rate_window, queue.arrivals)
            members.append(PoolMember(queue.queue, member, signals))
        now = max(m.signals.observed_at for m in members)
        decision, self.state = decide_pool(members, spec, now, self.state, figures)
        self._last = (seen, taken, PoolEvaluation(decision, fresh=False))
        return PoolEvaluation(decision)
