"""The broker adapter contract: the queue a trigger names (:class:`QueueSource`), how an adapter
is made for it (:data:`AdapterFactory`) and one queue's state as a :class:`QueueSnapshot`.

Every snapshot field but ``observed_at`` may be unknown (``None``). Unknown is never reported as
zero. This package imports nothing from ``scaler``: a format from another distribution needs
only brokers/ (:mod:`brokers.format_api` describes a format, :mod:`brokers.errors` the errors).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from brokers.connections import Connections

OptionsT = TypeVar("OptionsT")


class End(enum.StrEnum):
    """An end of a Redis list. ``head`` is index 0 (where LPUSH adds), ``tail`` is index -1."""

    HEAD = "head"
    TAIL = "tail"

    @property
    def opposite(self) -> End:
        return End.TAIL if self is End.HEAD else End.HEAD


@dataclass(frozen=True, slots=True)
class NoOptions:
    """The options of a format that has none."""


@dataclass(frozen=True, slots=True)
class QueueSource:
    """Identifies one queue on one broker: one sampler serves every trigger with an equal source.

    ``options`` are the format's own (a list's key prefix and ends, a stream's consumer group, a
    management URL...), as its broker module parsed them: one frozen, hashable value."""

    broker: str
    url: str = field(repr=False)
    queue: str
    format: str
    options: Hashable = NoOptions()

    def describe(self) -> str:
        """For messages and logs: never includes the URL."""
        return f"{self.broker} queue {self.queue!r} ({self.format})"

    def options_as(self, kind: type[OptionsT]) -> OptionsT:
        """The options, as the adapter of this format expects them."""
        if not isinstance(self.options, kind):
            raise TypeError(
                f"{self.describe()}: options {type(self.options).__name__}, expected {kind.__name__}"
            )
        return self.options


class Precision(enum.StrEnum):
    """How far a figure can be trusted."""

    EXACT = "exact"
    ESTIMATE = "estimate"
    LOWER_BOUND = "lower-bound"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Reading:
    """How one of the workers' figures (in flight, consumers, slots) was read: how far to trust
    it, where it comes from, and how old it was: a figure the library writes at a heartbeat is
    as old as the heartbeat (Sidekiq's, up to 5 s). The default: exact and live."""

    precision: Precision = Precision.EXACT
    source: str = ""
    #: seconds between the library's writing of the figure and the sample
    age: float = 0.0


@dataclass(frozen=True, slots=True)
class WorkerReadings:
    """How a snapshot's ``in_flight``, ``consumers`` and ``slots`` were read."""

    in_flight: Reading = Reading()
    consumers: Reading = Reading()
    slots: Reading = Reading()


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
    #: the job slots of the ``consumers``: their concurrency summed (a Sidekiq process's
    #: threads), where the library records it; None where it does not
    slots: int | None = None
    #: how ``in_flight``, ``consumers`` and ``slots`` were read (precision, source, age)
    readings: WorkerReadings = WorkerReadings()

    @property
    def counted_at(self) -> float:
        """When ``arrivals_total`` and ``completions_total`` were true."""
        return self.observed_at if self.counts_observed_at is None else self.counts_observed_at


class QueueAdapter(Protocol):
    """Samples one queue. Adapters may keep state between samples (list markers, say)."""

    broker: str
    queue: str

    async def sample(self) -> QueueSnapshot:
        """Read the queue once. Raises :class:`brokers.errors.BrokerUnavailable` on an outage."""
        ...

    async def aclose(self) -> None:
        """Release the connection this adapter holds."""
        ...


#: how a format's adapter is made for a queue (``FormatInfo.adapter`` names one), given the
#: connections of the server that runs it (:class:`brokers.connections.Connections`), which it
#: shares with the server's other adapters and releases in ``aclose``
AdapterFactory = Callable[[QueueSource, "Connections"], QueueAdapter]

#: how a format lists the queues its broker holds (``FormatInfo.queue_lister`` names one), given a
#: source on that broker (its queue is not read) and the server's connections: the names, as a
#: trigger's ``queue`` would give them. Raises :class:`brokers.errors.BrokerUnavailable` on an
#: outage, like a sample
QueueLister = Callable[[QueueSource, "Connections"], Awaitable[tuple[str, ...]]]
