"""A queue kept in a Redis list whose library also registers its workers (Sidekiq, Resque,
Dramatiq): the
list's snapshot (``brokers.redis_queues``), then one read-only script over the registry for the
workers serving the queue and the jobs in flight."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.base import QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.errors import BrokerRefused
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout
from brokers.redis_queues import RedisQueueAdapter

#: the Redis user may read the queue but not the workers' registry (an ACL limited to the
#: queue's keys, say): the workers and the jobs in flight stay unknown
REGISTRY_REFUSED = "registry_refused"


class RegistryAdapter:
    """Samples the list, then the registry. Subclasses say how to read their registry."""

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

    def registry_counts(self, reply: list[Any]) -> tuple[int | None, int | None]:
        """Workers serving the queue and jobs in flight (None: not kept), from the script's
        (non-empty) reply."""
        raise NotImplementedError

    async def sample(self) -> QueueSnapshot:
        snapshot = await self._list.sample()
        if self._refused:
            return replace(snapshot, warnings=(*snapshot.warnings, REGISTRY_REFUSED))
        try:
            (reply,) = await self._redis.execute([self.registry_command()], transaction=False)
        except BrokerRefused:  # the list was read with the same credentials: not the password
            self._refused = True
            return replace(snapshot, warnings=(*snapshot.warnings, REGISTRY_REFUSED))
        if not reply:  # no worker registered: none runs, or the workers are not the library's
            return snapshot
        consumers, in_flight = self.registry_counts(reply)
        return replace(snapshot, consumers=consumers, in_flight=in_flight)

    async def aclose(self) -> None:
        await self._list.aclose()
        await self._redis.aclose()
