"""BullMQ queues -> QueueSnapshot, read from BullMQ's own keys.

The layout, as BullMQ 5 and 6 write it (``src/commands/*.lua`` in taskforcesh/bullmq; checked
with the real Node BullMQ 6.7 in ``tests/integration/test_redis_bullmq.py``); ``P`` is the key
prefix (``bull``), ``<q>`` the queue:

- ``P:<q>:wait``: list of job ids without a priority, ``LPUSH`` (``addJobInTargetList``), taken
  with ``RPOPLPUSH`` to ``P:<q>:active`` (``fetchNextJob``): the oldest at the tail.
- ``P:<q>:prioritized``: sorted set of the jobs with a priority, scored
  ``priority × 2³² + counter`` (``getPriorityScore``, the counter ``P:<q>:pc`` counts up), taken
  with ``ZPOPMIN``. Within one priority the scores follow the order the jobs came in, so the
  oldest job of each priority is the first of its band: one ``ZRANGEBYSCORE band-start +inf
  LIMIT 0 1`` per priority in use finds them all, whatever the set's size, and only those
  jobs' hashes are read (at most :data:`MAX_BANDS` priorities; past that the age is a lower
  bound).
- ``P:<q>:delayed``: sorted set scored ``due-ms × 2¹² + counter`` (``getDelayedScore``).
  Workers move due jobs to ``wait`` or ``prioritized`` only when they fetch
  (``promoteDelayedJobs``), so a due job still in the set is waiting (with no worker running it
  waits for ever); it counts, its age from its due time. "Now" is the scaler's clock, as for arq.
- ``P:<q>:<id>``: the job hash; ``timestamp`` (ms) is when it was added and ``opts`` (JSON) its
  ``delay``: a waiting job's age counts from ``timestamp + delay``, when it became ready.
- ``P:<q>:active``: list of the jobs workers hold: in flight.
- ``P:<q>:meta``: hash; field ``paused`` exists while the queue is paused (``pause-7.lua``:
  jobs keep going to ``wait``). BullMQ before 5 renamed ``wait`` to ``P:<q>:paused`` instead:
  that list counts as waiting too, and its existence as paused.
- ``P:<q>:id``: the counter that numbers generated job ids (``INCR``): arrivals, exactly.
- ``P:<q>:events``: the events stream (``XADD`` ``added``, ``completed``, ``failed``...), kept
  to about ``opts.maxLenEvents`` entries (10000). Each sample counts the entries since the last
  one it read: ``completed`` and ``failed`` (a job that fails for good; a retry is not an
  event of either kind) are completions, ``added`` counts the jobs with ids of their own, which
  the counter misses. While the stream still holds the last entry read the counts are exact;
  once it was trimmed past it, they are lower bounds for that interval.
- Workers: each Worker names its blocking connection ``P:<base64(q)>`` or, given a name,
  ``P:<base64(q)>:w:<name>`` (``clientName`` in ``redis-queue-backend.ts``); ``CLIENT LIST``
  shows them, as ``Queue.getWorkers`` reads them. A Redis user without ``CLIENT`` (or a Redis
  that refuses it, such as some managed ones) leaves the workers unknown.

One sample is two round trips: one read-only script for the queue's keys, and ``CLIENT LIST``
(Redis runs no ``CLIENT`` command in a script).
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any

from brokers.base import Precision, QueueSnapshot, QueueSource, Reading, WorkerReadings
from brokers.connections import Connections
from brokers.errors import BrokerRefused
from brokers.payloads import MAX_PAYLOAD_BYTES, Stamp, checked_at
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout

COUNTS_SOURCE = "bullmq-events"
#: in flight from the active list, workers from their connections; their concurrency is kept
#: nowhere (a Worker's connection name does not carry it)
READINGS = WorkerReadings(
    Reading(source="bullmq-active"),
    Reading(source="bullmq-client-list"),
    Reading(Precision.UNKNOWN),
)
OLDEST_SOURCE = "payload:timestamp"
WORKERS_UNKNOWN = "workers_unknown"
PAUSED = "paused"
#: priorities whose oldest job is read; more in use make the age a lower bound
MAX_BANDS = 64
#: events read per sample; the rest wait for the next sample
MAX_EVENTS = 50_000

#: KEYS wait, paused, prioritized, delayed, active, meta, id, events;
#: ARGV job-key prefix, now (ms), events cursor ("" at first), MAX_BANDS, MAX_EVENTS, opts bound
SAMPLE_SCRIPT = """
local wait, legacy, prio, delayed = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local job_prefix, now = ARGV[1], tonumber(ARGV[2])
local bands_max, events_max, opts_max = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local BAND, DELAY = 0x100000000, 0x1000

local candidates = {}
local function tail(key)
  local id = redis.call('LINDEX', key, -1)
  if id then table.insert(candidates, id) end
  return redis.call('LLEN', key)
end
local wait_len, legacy_len = tail(wait), tail(legacy)

local prio_len = redis.call('ZCARD', prio)
local bands_complete, low = 1, '-inf'
for _ = 1, bands_max do
  local head = redis.call('ZRANGEBYSCORE', prio, low, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #head == 0 then low = nil break end
  table.insert(candidates, head[1])
  low = (math.floor(tonumber(head[2]) / BAND) + 1) * BAND
end
if low and redis.call('ZCOUNT', prio, low, '+inf') > 0 then bands_complete = 0 end

local due_before = (now + 1) * DELAY - 1
local due = redis.call('ZCOUNT', delayed, 0, due_before)
local oldest = false
if due > 0 then
  local first = redis.call('ZRANGE', delayed, 0, 0, 'WITHSCORES')
  oldest = math.floor(tonumber(first[2]) / DELAY)
end
for _, id in ipairs(candidates) do
  local key = job_prefix .. id
  local stamp = tonumber(redis.call('HGET', key, 'timestamp'))
  if stamp then
    local delay = 0
    local size = redis.call('HSTRLEN', key, 'opts')
    if size > 0 and size <= opts_max then
      local ok, opts = pcall(cjson.decode, redis.call('HGET', key, 'opts'))
      if ok and type(opts) == 'table' and type(opts['delay']) == 'number' then delay = opts['delay'] end
    end
    local ready = stamp + delay
    if not oldest or ready < oldest then oldest = ready end
  end
end

local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function after(a, b)
  local am, as = id_parts(a)
  local bm, bs = id_parts(b)
  return am > bm or (am == bm and as > bs)
end
local events, cursor = KEYS[8], ARGV[3]
local added, finished, covered, read = 0, 0, 1, 0
local last = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
local last_id = last[1] and last[1][1] or '0-0'
if cursor == '' or after(cursor, last_id) then
  cursor, covered = last_id, 0  -- first sample, or the stream was made again
else
  local first = redis.call('XRANGE', events, '-', '+', 'COUNT', 1)
  -- the stream no longer holds the entry last read: some since then may be gone
  if cursor ~= '0-0' and first[1] and after(first[1][1], cursor) then covered = 0 end
  while read < events_max do
    local batch = redis.call('XRANGE', events, '(' .. cursor, '+', 'COUNT', 1000)
    if #batch == 0 then break end
    for _, entry in ipairs(batch) do
      local fields = entry[2]
      for i = 1, #fields, 2 do
        if fields[i] == 'event' then
          local kind = fields[i + 1]
          if kind == 'added' then added = added + 1
          elseif kind == 'completed' or kind == 'failed' then finished = finished + 1 end
          break
        end
      end
      cursor = entry[1]
    end
    read = read + #batch
  end
end

return {wait_len + legacy_len + prio_len + due, redis.call('LLEN', KEYS[5]),
  redis.call('HEXISTS', KEYS[6], 'paused') == 1 or redis.call('EXISTS', legacy) == 1,
  tonumber(redis.call('GET', KEYS[7]) or '0'), oldest, bands_complete,
  cursor, added, finished, covered}
"""


@dataclass(frozen=True, slots=True)
class Reply:
    """What one run of the script saw."""

    depth: int
    active: int
    paused: bool
    id_counter: int
    #: when the oldest waiting job became ready (ms), None if none waits
    oldest_ms: float | None
    #: False when more priorities are in use than were read
    bands_complete: bool
    cursor: str
    added: int
    finished: int
    #: False when the events stream no longer held the previous sample's last entry
    covered: bool

    @classmethod
    def parse(cls, reply: list[Any]) -> Reply:
        depth, active, paused, counter, oldest, bands, cursor, added, finished, covered = reply
        return cls(
            depth=int(depth),
            active=int(active),
            paused=bool(paused),
            id_counter=int(counter),
            oldest_ms=float(oldest) if oldest is not None else None,
            bands_complete=bool(bands),
            cursor=cursor.decode() if isinstance(cursor, bytes) else str(cursor),
            added=int(added),
            finished=int(finished),
            covered=bool(covered),
        )


def worker_names(prefix: str, queue: str) -> tuple[str, str]:
    """The connection name of an unnamed Worker of ``queue``, and the start of a named one's."""
    base = f"{prefix}:{base64.b64encode(queue.encode()).decode()}"
    return base, f"{base}:w:"


def count_workers(client_list: str, prefix: str, queue: str) -> int:
    """Workers of ``queue`` in a ``CLIENT LIST`` reply, as ``Queue.getWorkers`` matches them."""
    exact, named = worker_names(prefix, queue)
    count = 0
    for line in client_list.splitlines():
        for field in line.split(" "):
            if field.startswith("name="):
                name = field[5:]
                count += name == exact or name.startswith(named)
                break
    return count


class BullMQAdapter:
    """Samples one BullMQ queue. Keeps the events cursor and the running totals."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        prefix = source.options_as(ListLayout).key_prefix or "bull"
        self._prefix = prefix
        base = f"{prefix}:{source.queue}:"
        self._keys = [
            base + name
            for name in (
                "wait",
                "paused",
                "prioritized",
                "delayed",
                "active",
                "meta",
                "id",
                "events",
            )
        ]
        self._job_prefix = base
        self._cursor = ""
        self._last_id: int | None = None
        self._arrivals = 0
        self._completions = 0
        self._client_list_refused = False
        self._redis = RedisConnection(source, connections)

    async def sample(self) -> QueueSnapshot:
        now = time.time()
        args: list[str | int] = [len(self._keys), *self._keys, self._job_prefix, int(now * 1000)]
        args += [self._cursor, MAX_BANDS, MAX_EVENTS, MAX_PAYLOAD_BYTES]
        command: Command = ("EVAL", SAMPLE_SCRIPT, *args)
        (raw,) = await self._redis.execute([command], transaction=False)
        reply = Reply.parse(raw)
        exact = self._count(reply)
        workers = await self._workers()
        warnings = [PAUSED] if reply.paused else []
        if workers is None:
            warnings.append(WORKERS_UNKNOWN)
        stamp = Stamp(None)
        if reply.depth and reply.oldest_ms is not None:
            # a producer's clock ahead of ours is clamped (age 0, an estimate), an absurd one
            # dropped, as for times read from payloads
            stamp = checked_at(Stamp(reply.oldest_ms / 1000, "timestamp"), now)
        if stamp.warning:
            warnings.append(stamp.warning)
        return QueueSnapshot(
            observed_at=now,
            depth=reply.depth,
            in_flight=reply.active,
            oldest_enqueued_at=stamp.enqueued_at,
            oldest_precision=_precision(reply, stamp),
            oldest_source=OLDEST_SOURCE if stamp.enqueued_at is not None else "",
            arrivals_total=self._arrivals,
            completions_total=self._completions,
            counts_exact=exact,
            counts_source=COUNTS_SOURCE,
            consumers=workers,
            warnings=tuple(warnings),
            paused=reply.paused,
            readings=READINGS,
        )

    def _count(self, reply: Reply) -> bool:
        """Bring the totals up to ``reply``; True when the interval's counts are exact."""
        self._cursor = reply.cursor
        previous, self._last_id = self._last_id, reply.id_counter
        if previous is None:  # the first sample: the totals start here
            self._arrivals = reply.id_counter
            return True
        generated = reply.id_counter - previous
        counter_ok = generated >= 0  # a counter that went down: the queue was obliterated
        self._arrivals += max(generated if counter_ok else 0, reply.added)
        self._completions += reply.finished
        return reply.covered and counter_ok

    async def _workers(self) -> int | None:
        if self._client_list_refused:
            return None
        try:
            (listing,) = await self._redis.execute([("CLIENT", "LIST")], transaction=False)
        except BrokerRefused:  # no CLIENT for this user: the workers stay unknown
            self._client_list_refused = True
            return None
        text = listing.decode(errors="replace") if isinstance(listing, bytes) else str(listing)
        return count_workers(text, self._prefix, self.queue)

    async def aclose(self) -> None:
        await self._redis.aclose()


def _precision(reply: Reply, stamp: Stamp) -> Precision:
    if stamp.enqueued_at is None:
        return Precision.UNKNOWN
    if not reply.bands_complete:  # a priority not read may hold an older job
        return Precision.LOWER_BOUND
    return Precision.ESTIMATE if stamp.warning else Precision.EXACT
