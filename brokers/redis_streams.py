"""A Redis Stream read by a consumer group -> QueueSnapshot.

Fields as Redis 7.0 reports them (redis/redis-doc ``commands/xinfo-stream.md``,
``xinfo-groups.md``, ``xinfo-consumers.md``; checked against Redis 7.0.15):

- depth = entries not yet delivered to the group = the group's ``lag``. ``lag`` is NULL after
  ``XGROUP CREATE``/``SETID`` at an arbitrary id, or with deleted or trimmed entries inside the
  undelivered range (and absent before 7.0): then the undelivered entries are counted with
  ``XRANGE key (<last-delivered-id> + COUNT`` :data:`COUNT_CAP`. At the cap the count is a lower
  bound; a snapshot has no depth precision, so it carries the warning ``depth_lower_bound``.
- oldest age = now − the ms part of the first undelivered entry's id, ``XRANGE key
  (<last-delivered-id> + COUNT 1`` (ids are ``<ms>-<seq>`` from the Redis node's clock,
  ``docs/data-types/streams.md``). Ids that are not times (explicitly given, before 2001) leave
  the age unknown with the warning ``entry_id_not_time``. "Now" is the Redis server's ``TIME``,
  the clock that made the ids; the age is then placed on the scaler's clock (``observed_at``).
- in flight = the group's ``pending`` (delivered, not acknowledged).
- arrivals = the stream's ``entries-added``; completions = the group's ``entries-read`` −
  ``pending`` (read and acknowledged, or read with NOACK), never below 0. A counter that goes
  down (the stream deleted and re-created, ``SETID`` backwards) is read downstream as a reset.
  ``entries-read`` is NULL after ``XGROUP CREATE``/``SETID`` at an arbitrary id; where ``lag``
  is known it is ``entries-added`` − ``lag``, else completions are unknown until Redis can
  work it out again.
- consumers = the group's consumers whose ``idle`` is below :data:`MIN_CONSUMER_IDLE` seconds
  or 5 × the interval between this adapter's samples, whichever is longer, so crashed
  consumers drop out. From Redis 7.2 ``idle`` counts from the consumer's last *attempted* read
  or claim (blocking reads on an empty stream included) and the new ``inactive`` from its last
  *successful* one (``commands/xinfo-consumers.md``): ``idle`` is the liveness signal, and
  ``inactive`` is not used, as it grows while a live consumer waits for work. Before 7.2
  ``idle`` meant what ``inactive`` means now (Redis 7.0.15 does not reset it on an empty read),
  so there a live consumer that waits on an empty stream, or works on one job for longer than
  the limit without reading, is not counted; while jobs wait, live consumers read and count.

One sample is one round trip: a Lua script that only reads (``EVAL``, touching only the
stream key, so cluster-safe) runs ``XINFO GROUPS``, ``XINFO STREAM``, ``XINFO CONSUMERS`` (only
where the group has consumers) and the ``XRANGE`` after the group's ``last-delivered-id`` (only
where entries wait), all at one instant; ``TYPE`` only where ``XINFO GROUPS`` fails (no such
key, or another type). Two round trips
would read a ``last-delivered-id`` that the group may have moved past before the ``XRANGE``;
and a missing stream or group fails ``XINFO`` with an error that ``RedisConnection.execute``
reports as an outage, while the script returns it as a status. ``RedisConnection.execute``
sends the script by its hash (``EVALSHA``), and in full where Redis does not hold it (a
restarted Redis that lost its script cache).

A missing stream key is an empty queue (as KEDA's redis-streams scaler reads it): nothing was
added yet, or the stream was deleted, which deletes its groups and their pending entries too.
Depth, in flight, consumers and both counters are then 0 (a stream created later counts
``entries-added`` from 0, so the counts stay exact) and the snapshot carries the warning
``stream_missing``, so a mistyped stream name shows. A stream without the group is
:class:`~brokers.errors.QueueMisconfigured`; a key of another type too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from brokers.base import Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.errors import QueueMisconfigured
from brokers.redis_connection import RedisConnection
from brokers.redis_options import StreamGroup

COUNTS_SOURCE = "stream-counters"
OLDEST_SOURCE = "entry-id"
#: most undelivered entries counted one by one when the group's lag is NULL
COUNT_CAP = 10_000
#: consumers idle longer than this (seconds), or 5 sample intervals if longer, are not counted
MIN_CONSUMER_IDLE = 30.0
IDLE_INTERVALS = 5
#: entry ids whose ms part is below this (2001-09-09) are not add times
MIN_ID_MS = 1_000_000_000_000

#: KEYS[1] stream; ARGV[1] group, ARGV[2] count cap. Replies {status, {TIME}, ...}: see _snapshot.
SCRIPT = """
local key, group_name, cap = KEYS[1], ARGV[1], tonumber(ARGV[2])
local now = redis.call('TIME')
local function fields(flat)
  local map = {}
  for i = 1, #flat, 2 do map[flat[i]] = flat[i + 1] end
  return map
end
local groups = redis.pcall('XINFO', 'GROUPS', key)
if groups['err'] then -- no such key, or another type: TYPE tells which
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return {'missing', now} end
  if kind ~= 'stream' then return {'wrongtype', now, kind} end
  return groups
end
local group
for _, flat in ipairs(groups) do
  local candidate = fields(flat)
  if candidate['name'] == group_name then group = candidate end
end
if not group then return {'nogroup', now} end
local stream = fields(redis.call('XINFO', 'STREAM', key))
local idle = {}
if group['consumers'] > 0 then
  for _, flat in ipairs(redis.call('XINFO', 'CONSUMERS', key, group_name)) do
    idle[#idle + 1] = fields(flat)['idle']
  end
end
local start = '(' .. group['last-delivered-id']
local lag = group['lag']
local undelivered, first
if lag then
  undelivered = lag
  if lag > 0 then first = redis.call('XRANGE', key, start, '+', 'COUNT', 1)[1] end
else
  local entries = redis.call('XRANGE', key, start, '+', 'COUNT', cap)
  undelivered = #entries
  first = entries[1]
end
return {
  'ok', now, stream['entries-added'] or -1, group['entries-read'] or -1, group['pending'],
  undelivered, lag and 1 or 0, first and first[1] or '', idle,
}
"""


class StreamAdapter:
    """Samples one consumer group's backlog on one stream."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._source = source
        self._group = source.options_as(StreamGroup).consumer_group
        self._previous_sample: float | None = None
        self._redis = RedisConnection(source, connections)

    async def sample(self) -> QueueSnapshot:
        (reply,) = await self._redis.execute(
            [("EVAL", SCRIPT, 1, self.queue, self._group, COUNT_CAP)], transaction=False
        )
        observed_at = time.time()
        idle_limit = self._idle_limit(observed_at)
        status = reply[0].decode()
        if status == "missing":
            return QueueSnapshot(
                observed_at=observed_at,
                depth=0,
                in_flight=0,
                arrivals_total=0,
                completions_total=0,
                counts_source=COUNTS_SOURCE,
                consumers=0,
                warnings=("stream_missing",),
            )
        if status == "wrongtype":
            raise QueueMisconfigured(
                f"{self._source.describe()}: key {self.queue!r} is a {reply[2].decode()}, "
                "not a stream as format stream expects"
            )
        if status == "nogroup":
            raise QueueMisconfigured(
                f"{self._source.describe()}: stream {self.queue!r} has no consumer group "
                f"{self._group!r}; create it with XGROUP CREATE {self.queue} {self._group} 0 "
                "(or $ for new entries only), or fix consumerGroup"
            )
        return self._snapshot(reply, observed_at, idle_limit)

    async def aclose(self) -> None:
        await self._redis.aclose()

    def _idle_limit(self, observed_at: float) -> float:
        """Seconds of idleness after which a consumer no longer counts as attached."""
        previous, self._previous_sample = self._previous_sample, observed_at
        interval = observed_at - previous if previous is not None else 0.0
        return max(MIN_CONSUMER_IDLE, IDLE_INTERVALS * interval)

    def _snapshot(
        self, reply: Sequence[Any], observed_at: float, idle_limit: float
    ) -> QueueSnapshot:
        _, now, added, read, pending, undelivered, lag_known, first_id, idle = reply
        server_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        warnings: list[str] = []
        if not lag_known and undelivered >= COUNT_CAP:
            warnings.append("depth_lower_bound")
        oldest: float | None = None
        if undelivered and first_id:
            id_ms = int(first_id.split(b"-")[0])
            if id_ms >= MIN_ID_MS:
                oldest = observed_at - (server_ms - id_ms) / 1000
            else:
                warnings.append("entry_id_not_time")
        return QueueSnapshot(
            observed_at=observed_at,
            depth=undelivered,
            in_flight=pending,
            oldest_enqueued_at=oldest,
            oldest_precision=Precision.EXACT if oldest is not None else Precision.UNKNOWN,
            oldest_source=OLDEST_SOURCE if oldest is not None else "",
            arrivals_total=added if added >= 0 else None,
            completions_total=_completions(
                added, read, pending, undelivered if lag_known else None
            ),
            counts_source=COUNTS_SOURCE,
            consumers=sum(1 for ms in idle if ms < idle_limit * 1000),
            warnings=tuple(warnings),
        )


def _completions(added: int, read: int, pending: int, lag: int | None) -> int | None:
    """Entries the group read and acknowledged: ``entries-read`` − ``pending``, never below 0.

    Where ``entries-read`` is NULL (-1 here) but ``lag`` is not (Redis still works the lag out
    after ``XGROUP CREATE`` at an id before the first entry), entries read = added − lag.
    """
    if lag is not None and added >= 0:
        read = added - lag
    if read < 0:
        return None
    return max(0, read - pending)
