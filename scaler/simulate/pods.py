"""The simulated fleet's pods, and the speed of operations on a dependency whose throughput
follows the Universal Scalability Law."""

from __future__ import annotations

import enum
import math

INF = math.inf


class PodState(enum.IntEnum):
    BOOTING = 0
    READY = 1
    DRAINING = 2
    GONE = 3


class Pod:
    __slots__ = ("deadline", "jobs", "ready_at", "state")

    def __init__(self, ready_at: float) -> None:
        self.ready_at = ready_at
        self.state = PodState.BOOTING
        self.jobs: set[int] = set()
        self.deadline = INF


def usl_rate(demand: float, slots: float, sigma: float, kappa: float) -> float:
    """How fast each of ``demand`` operations runs: the slots run at most ``slots`` of them at
    once, m, at the USL's speed X(m) / m = 1 / (1 + sigma (m - 1) + kappa m (m - 1)); the rest
    wait their turn (processor sharing), so each runs m / demand of that."""
    if demand <= 0:
        return 1.0
    running = min(demand, slots)
    extra = max(0.0, running - 1)
    return running / demand / (1 + sigma * extra + kappa * running * extra)
