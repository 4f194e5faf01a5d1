"""What an autoscaler in the simulator sees at each control tick (:class:`Observation`) and what
it answers (:class:`Autoscaler`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Observation:
    """The fleet and the queue at one control tick, as the autoscalers may read them."""

    now: float
    depth: int
    in_flight: int
    #: enqueue time of the oldest waiting job; None when nothing waits
    oldest_enqueued_at: float | None
    arrivals_total: int
    #: deliveries, redeliveries included
    starts_total: int
    completions_total: int
    booting: int
    ready: int
    draining: int
    #: CPU the ready pods use, in pod requests (2.5 = two and a half pods' worth)
    cpu_ready: float
    #: arrival number of the oldest job in arrival order that still waits (list markers)
    queue_head: int
    #: arrival numbers of the jobs put back at the head of the queue after their worker was
    #: killed, oldest end first
    requeued: tuple[int, ...]
    #: enqueue time of each job by arrival number; only the first ``arrivals_total`` have come
    arrival_times: Sequence[float] = field(repr=False)
    #: slots the workers may hold in all now (the dependency's less the API's and others'
    #: sessions), as a PostgreSQL probe reads them; 0 without a dependency
    dependency_slots: float = 0.0


class Autoscaler(Protocol):
    """One policy: the replicas it starts with, and its answer at every control tick."""

    def initial_replicas(self) -> int: ...

    def step(self, obs: Observation, replicas: int) -> int: ...
