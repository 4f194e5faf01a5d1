"""Dramatiq queues -> QueueSnapshot: the queue's list (``brokers.redis_queues``), the heartbeats
and the per-worker acknowledgement sets, for the jobs in flight and the worker processes.

As Dramatiq's Redis broker writes them (``dramatiq/brokers/redis/dispatch.lua``, 1.x and 2.x;
``P`` is the namespace, ``dramatiq``): every broker instance (one per process, a worker's or a
producer's) has a ``worker_id`` (a uuid) and puts it in the sorted set ``P:__heartbeats__``,
scored by the time (ms) of its latest command (enqueue, fetch, ack...); a worker ``SADD``s each
message it fetches to ``P:__acks__.<worker_id>.<queue>`` and removes it on ack or nack (Redis
drops the set with its last member). A broker whose heartbeat is older than 60 s
(``DEFAULT_HEARTBEAT_TIMEOUT``) is dead; the next maintenance puts its messages back on the
queue. A consumer polls its queue at least every second while it has room for more messages
(``_RedisConsumer.__next__``, its backoff capped at the worker's 1 s timeout), and prefetches up
to twice its threads (``Worker.queue_prefetch``).

- ``in_flight``: the live brokers' ack sets of the queue: what Dramatiq's consumers prefetched
  counts as well as what runs (as RabbitMQ's unacknowledged messages do). Live: exact.
- ``consumers``: the live worker processes that consume the queue. Nothing records which queues
  a process consumes, and producers beat too, so a process counts once it is seen holding a
  message of the queue (a non-empty ack set) and for as long as it beats. Once jobs have waited
  at every sample for a poll interval (:data:`POLL_SECONDS`), every consumer of the queue has
  held some (it fetches whenever it has room), so the count is exact; otherwise a consumer that
  has held nothing since the scaler started may not be seen: a lower bound. A process counts, not a pod: ``dramatiq`` starts one per
  CPU unless told (``--processes``), so the policy's workers are the processes. A stopped
  process counts until its heartbeat is 60 s old, as for Dramatiq.
- ``slots``: not kept (a process's ``--threads`` is recorded nowhere).

All unknown while no broker beats (the set does not exist).
"""

from __future__ import annotations

import time
from typing import Any

from brokers.base import Precision, QueueSnapshot, QueueSource, Reading, WorkerReadings
from brokers.connections import Connections
from brokers.redis_connection import Command
from brokers.redis_registry import RegistryAdapter, RegistryFigures

#: Dramatiq's DEFAULT_HEARTBEAT_TIMEOUT, ms
HEARTBEAT_TIMEOUT_MS = 60_000
#: a consumer with room polls its queue at least this often (its backoff is capped at the
#: worker's timeout, 1 s by default)
POLL_SECONDS = 1.0
ACKS, HEARTBEATS = "dramatiq-acks", "dramatiq-heartbeats+acks"

#: KEYS heartbeats; ARGV namespace, queue, now (ms), timeout (ms), the consumers seen before:
#: {} without heartbeats, else {in flight, {live brokers holding messages of the queue}, {the
#: consumers seen before that still beat}}
ACKS_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local since = tonumber(ARGV[3]) - tonumber(ARGV[4])
local live = redis.call('ZRANGEBYSCORE', KEYS[1], since, '+inf')
local running, holding, still = 0, {}, {}
for _, id in ipairs(live) do
  local held = redis.call('SCARD', ARGV[1] .. ':__acks__.' .. id .. '.' .. ARGV[2])
  if held > 0 then table.insert(holding, id) end
  running = running + held
end
for i = 5, #ARGV do
  local beat = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if beat and tonumber(beat) >= since then table.insert(still, ARGV[i]) end
end
return {running, holding, still}
"""


class DramatiqAdapter(RegistryAdapter[RegistryFigures]):
    """Samples one Dramatiq queue: its list, then the live brokers' ack sets."""

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        super().__init__(source, connections)
        #: the worker ids seen holding a message of the queue, while they beat
        self._consumers: set[str] = set()
        #: the first of the samples in a row that found jobs waiting
        self._waiting_since: float | None = None

    def registry_command(self) -> Command:
        namespace = self.prefix.removesuffix(":")
        now_ms = int(time.time() * 1000)
        args: list[str | int] = [1, f"{namespace}:__heartbeats__", namespace, self.queue]
        args += [now_ms, HEARTBEAT_TIMEOUT_MS, *sorted(self._consumers)]
        return ("EVAL", ACKS_SCRIPT, *args)

    def registry_figures(self, reply: list[Any], snapshot: QueueSnapshot) -> RegistryFigures:
        running, holding, still = reply
        self._consumers = {_text(id_) for id_ in (*holding, *still)}
        # jobs waited at every sample for a poll interval: every consumer has held some
        if not snapshot.depth:
            self._waiting_since = None
        elif self._waiting_since is None:
            self._waiting_since = snapshot.observed_at
        waited = snapshot.observed_at - (self._waiting_since or snapshot.observed_at)
        seen = (
            Precision.EXACT if snapshot.depth and waited >= POLL_SECONDS else Precision.LOWER_BOUND
        )
        readings = WorkerReadings(
            in_flight=Reading(source=ACKS),
            consumers=Reading(seen, HEARTBEATS),
            slots=Reading(Precision.UNKNOWN),
        )
        return RegistryFigures(len(self._consumers), int(running), None, readings)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw
