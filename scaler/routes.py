"""What each exact ScaledObjectRef KEDA sends resolved to, so that a repeat costs one lookup.

KEDA sends every ScaledObject's ref (name, namespace, trigger metadata) on each call, the same
again and again. The service resolves a ref it has not seen through the limits, the spec cache
and the trigger table; a :class:`Route` remembers the result by the ref's deterministic wire
bytes (its map sorted by key), so the same ref later skips all three. Only refs that parsed get a
route (refusals are remembered by the spec cache), only small ones (``MAX_ROUTE_BYTES``), and at
most ``ROUTE_CACHE_SIZE`` of them, least recently used dropped first: bounded whatever tenants
send.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scaler.decision_log import TriggerKey
from scaler.generated import externalscaler_pb2 as pb
from scaler.spec_cache import Lru
from scaler.trigger_spec import TriggerSpec

if TYPE_CHECKING:
    from scaler.evaluation import Evaluator
    from scaler.policy import Decision
    from scaler.pool_evaluation import PoolEvaluator
    from scaler.sampler import Sampler

#: routes kept: above a replica's 10,000 triggers
ROUTE_CACHE_SIZE = 16_384
#: a ref whose wire form is longer is resolved afresh on each call (KEDA's are a few hundred)
MAX_ROUTE_BYTES = 2048
#: a route that asked its sampler this recently does not ask again: KEDA's GetMetricSpec,
#: GetMetrics and IsActive for one ref come within milliseconds, and an ask only keeps the
#: sampler and the trigger's demand alive (for minutes) and notes KEDA's pauses (of a minute)
ASK_REPEAT = 1.0


@dataclass(slots=True)
class Trigger:
    """What the service keeps per trigger between KEDA's calls."""

    asked: float
    #: the policy state and the last evaluation
    evaluator: Evaluator
    #: the last decision logged (reason, workers)
    logged: tuple[str, int] | None = None
    #: the last decision recorded in the metrics (the shared budgets change it between samples)
    recorded: Decision | None = None
    #: a pool trigger's state and last evaluation (``evaluator`` is then unused)
    pool: PoolEvaluator | None = None
    #: set when the service forgot the trigger (not asked about for long): a route holding it
    #: looks the trigger up again
    forgotten: bool = False


@dataclass(slots=True)
class Route:
    """One ref's spec and trigger, and the answers built from them last."""

    spec: TriggerSpec
    key: TriggerKey
    trigger: Trigger | None = None
    #: the sampler of a single-queue trigger's queue, as the registry last handed it out ...
    sampler: Sampler | None = None
    #: ... and when this route last asked it (:data:`ASK_REPEAT`)
    asked_at: float = -math.inf
    metric_spec: pb.GetMetricSpecResponse | None = None
    #: the GetMetrics answer of ``answered``, the decision it was built from
    metric_values: pb.GetMetricsResponse | None = None
    answered: Decision | None = None


class Routes:
    """Routes by the ref's wire bytes, bounded."""

    def __init__(self, size: int = ROUTE_CACHE_SIZE, max_bytes: int = MAX_ROUTE_BYTES) -> None:
        self._routes: Lru[bytes, Route] = Lru(size)
        self._max_bytes = max_bytes

    def __len__(self) -> int:
        return len(self._routes)

    @staticmethod
    def wire(ref: pb.ScaledObjectRef) -> bytes:
        return ref.SerializeToString(deterministic=True)

    def get(self, wire: bytes) -> Route | None:
        return self._routes.get(wire)

    def put(self, wire: bytes, route: Route) -> None:
        if len(wire) <= self._max_bytes:
            self._routes.put(wire, route)
