"""The broker adapter contract: one queue's state as a :class:`QueueSnapshot`.

Every field but ``observed_at`` may be unknown (``None``). Unknown is never reported as zero.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class Precision(enum.StrEnum):
    """How far a figure can be trusted."""

    EXACT = "exact"
    ESTIMATE = "estimate"
    LOWER_BOUND = "lower-bound"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """One queue, as one sample saw it.

    ``arrivals_total`` and ``completions_total`` are monotonic counters, kept by the broker or
    by the adapter itself; only their differences mean anything. ``counts_exact`` is False when
    the counts added since the previous snapshot are lower bounds (an adapter lost track).
    ``counts_observed_at`` is when the counters were last brought up to date, where that is
    earlier than ``observed_at`` (RabbitMQ's management statistics are collected every few
    seconds); the rates and the arrival history use that time.
    """

    observed_at: float
    depth: int | None
    in_flight: int | None = None
    oldest_enqueued_at: float | None = None
    oldest_precision: Precision = Precision.UNKNOWN
    oldest_source: str = ""
    arrivals_total: int | None = None
    completions_total: int | None = None
    counts_exact: bool = True
    counts_source: str = ""
    consumers: int | None = None
    warnings: tuple[str, ...] = ()
    counts_observed_at: float | None = None
    #: share of time the queue could hand a message to a consumer at once (RabbitMQ)
    consumer_capacity: float | None = None
    #: whether the library holds the queue paused (BullMQ); None where it cannot be paused or
    #: the flag is not read
    paused: bool | None = None

    @property
    def counted_at(self) -> float:
        """When ``arrivals_total`` and ``completions_total`` were true."""
        return self.observed_at if self.counts_observed_at is None else self.counts_observed_at


class QueueAdapter(Protocol):
    """Samples one queue. Adapters may keep state between samples (list markers, say)."""

    broker: str
    queue: str

    async def sample(self) -> QueueSnapshot:
        """Read the queue once. Raises :class:`scaler.errors.BrokerUnavailable` on an outage."""
        ...

    async def aclose(self) -> None:
        """Release the connection this adapter holds."""
        ...
