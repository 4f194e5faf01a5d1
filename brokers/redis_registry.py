"""A queue kept in a Redis list whose library also registers its workers (Sidekiq, Resque,
Dramatiq): the
list's snapshot (``brokers.redis_queues``), then one read-only script over the registry for the
workers serving the queue and the jobs in flight."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from brokers.base import QueueSnapshot, QueueSource, WorkerReadings
from brokers.connections import Connections
from brokers.errors import BrokerRefused
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout
from brokers.redis_queues import RedisQueueAdapter

#: a registry read missing by one queue's sample stands for the others' on the same Redis for
#: this long (the libraries write their registries every few seconds: Sidekiq's heartbeat is 5 s)
MISSING_REUSE = 1.0
#: the Redis user may read the queue but not the workers' registry (an ACL limited to the
#: queue's keys, say): the workers and the jobs in flight stay unknown
REGISTRY_REFUSED = "registry_refused"


@dataclass(frozen=True, slots=True)
class RegistryFigures:
    """What a registry says of the queue's workers (None: not kept), and how it was read."""

    consumers: int | None
    in_flight: int | None
    slots: int | None = None
    readings: WorkerReadings = field(default_factory=WorkerReadings)


FiguresT = TypeVar("FiguresT", bound=RegistryFigures)


class RegistryAdapter(Generic[FiguresT]):
    """Samples the list, then the registry. Subclasses say how to read their registry, and what
    figures they take from it."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._list = RedisQueueAdapter(source, connections)
        #: the namespace, as the library joins it to its keys
        self.prefix = (
            f"{source.options_as(ListLayout).key_prefix}:"
            if source.options_as(ListLayout).key_prefix
            else ""
        )
        self._redis = RedisConnection(source, connections)
        self._refused = False

    def registry_command(self) -> Command:
        """The script that reads the registry; its reply is empty when no worker is registered."""
        raise NotImplementedError

    def registry_key(self) -> str | None:
        """The key whose absence means that no worker is registered (the script's reply then
        empty), where there is one: read missing by one queue's sample, it is not read again by
        the others' on the same Redis for :data:`MISSING_REUSE` seconds."""
        return None

    def registry_figures(self, reply: list[Any], snapshot: QueueSnapshot) -> FiguresT:
        """Workers serving the queue, their job slots and the jobs in flight, from the script's
        (non-empty) reply; ``snapshot`` is the list's, read just before."""
        raise NotImplementedError

    async def sample(self) -> QueueSnapshot:
        snapshot, _ = await self.sample_registry()
        return snapshot

    async def sample_registry(self) -> tuple[QueueSnapshot, FiguresT | None]:
        """The sample, and the registry's figures where it was read (None: refused, or no worker
        registered)."""
        snapshot = await self._list.sample()
        if self._refused:
            return replace(snapshot, warnings=(*snapshot.warnings, REGISTRY_REFUSED)), None
        key, now = self.registry_key(), time.monotonic()
        if key is not None and self._redis.seen_missing(key, now, MISSING_REUSE):
            return snapshot, None  # no worker registered, as another queue's sample just read
        try:
            (reply,) = await self._redis.execute([self.registry_command()], transaction=False)
        except BrokerRefused:  # the list was read with the same credentials: not the password
            self._refused = True
            return replace(snapshot, warnings=(*snapshot.warnings, REGISTRY_REFUSED)), None
        if not reply:  # no worker registered: none runs, or the workers are not the library's
            if key is not None:
                self._redis.note_missing(key, now)
            return snapshot, None
        figures = self.registry_figures(reply, snapshot)
        sampled = replace(
            snapshot,
            consumers=figures.consumers,
            in_flight=figures.in_flight,
            slots=figures.slots,
            readings=figures.readings,
        )
        return sampled, figures

    async def aclose(self) -> None:
        await self._list.aclose()
        await self._redis.aclose()
