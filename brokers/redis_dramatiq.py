"""Dramatiq queues -> QueueSnapshot: the queue's list (``brokers.redis_queues``) and the
per-worker acknowledgement sets, for the jobs in flight.

As Dramatiq's Redis broker writes them (``dramatiq/brokers/redis/dispatch.lua``, 1.x and 2.x;
``P`` is the namespace, ``dramatiq``): every broker (a worker process, or a producer) puts its
``worker_id`` in the sorted set ``P:__heartbeats__``, scored by the time (ms) of its latest
command; a worker ``SADD``s each message it fetches to ``P:__acks__.<worker_id>.<queue>`` and
removes it on ack or nack. A broker whose heartbeat is older than 60 s
(``DEFAULT_HEARTBEAT_TIMEOUT``) is dead; the next maintenance puts its messages back on the
queue. In flight = the live brokers' ack sets of the queue: what Dramatiq's consumers prefetched
counts as well as what runs (as RabbitMQ's unacknowledged messages do).

The workers stay unknown: producers beat too, a beat is per process (``dramatiq`` starts one
per CPU by default), not per replica, and nothing records which queues a process consumes.
"""

from __future__ import annotations

import time
from typing import Any

from brokers.redis_connection import Command
from brokers.redis_registry import RegistryAdapter

#: Dramatiq's DEFAULT_HEARTBEAT_TIMEOUT, ms
HEARTBEAT_TIMEOUT_MS = 60_000

#: KEYS heartbeats; ARGV namespace, queue, now (ms), timeout (ms): {} without heartbeats, else
#: {in flight}
ACKS_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], tonumber(ARGV[3]) - tonumber(ARGV[4]), '+inf')
local running = 0
for _, id in ipairs(live) do
  running = running + redis.call('SCARD', ARGV[1] .. ':__acks__.' .. id .. '.' .. ARGV[2])
end
return {running}
"""


class DramatiqAdapter(RegistryAdapter):
    """Samples one Dramatiq queue: its list, then the live workers' ack sets."""

    def registry_command(self) -> Command:
        namespace = self.prefix.removesuffix(":")
        now_ms = int(time.time() * 1000)
        heartbeats = f"{namespace}:__heartbeats__"
        return (
            "EVAL",
            ACKS_SCRIPT,
            1,
            heartbeats,
            namespace,
            self.queue,
            now_ms,
            HEARTBEAT_TIMEOUT_MS,
        )

    def registry_counts(self, reply: list[Any]) -> tuple[int | None, int | None]:
        return None, int(reply[0])
