"""Sidekiq queues -> QueueSnapshot: the queue's list (``brokers.redis_queues``) and the processes
Sidekiq registers, for the jobs in flight, the processes serving the queue and their threads.

The process registry, as Sidekiq 6, 7 and 8 write it (``lib/sidekiq/launcher.rb``, ``❤``, run
by the heartbeat thread every ``BEAT_PAUSE`` = 5 s; read back by ``Sidekiq::ProcessSet`` and
``Sidekiq::WorkSet`` in ``lib/sidekiq/api.rb``); ``P:`` is the namespace, where there is one:

- set ``P:processes`` of process identities (``host:pid:hex``), added at each heartbeat and
  removed as the process stops (``clear_heartbeat``); a process killed outright stays in it;
- hash ``P:<identity>`` (expires after 60 s), written at each heartbeat: ``beat`` (epoch
  seconds, a float), ``busy`` (threads running a job, of any queue), ``quiet`` (``"true"``
  once the process takes no more jobs: TSTP, or shutting down), ``rss``, ``rtt_us`` and ``info``
  (JSON, written once at start). ``info`` holds ``queues`` and the process's total
  ``concurrency`` (its threads) in 6 and 7, and from 7.1 ``weights``, one hash per capsule; in
  8.0.9+ also ``capsules``, name -> ``{concurrency, mode, weights}``, each capsule's threads and
  queues (the keys of ``weights``); 8.1.2 moved the total ``concurrency`` from ``info`` to a
  field of the hash;
- hash ``P:<identity>:work`` (``:workers`` before 6.5), thread id -> JSON
  ``{"queue": ..., "payload": ..., "run_at": ...}``: the jobs running at the heartbeat, rewritten
  (deleted, then set) in a transaction just before the process hash.

A process whose ``beat`` is more than :data:`BEAT_TIMEOUT` seconds old (by the scaler's clock)
is gone, as ``ProcessSet`` takes it; its hash may linger until it expires. Of the live
processes:

- ``consumers``: the processes that listen to the queue (in 8.0.9+, with a capsule that does)
  and are not quiet. A process is the unit the policy counts in, a replica of the Deployment, as
  for every other format. Exact: a process appears at its first heartbeat, as it starts, and
  leaves the set as it stops; only the quiet flag waits for the next heartbeat (up to 5 s), and
  a process killed outright counts until its beat is 60 s old, as in Sidekiq Web.
- ``slots``: their threads that serve the queue: the threads of the capsules that listen to it
  (8.0.9+), else the process's ``concurrency``. Exact, except in Sidekiq 7.1 to 8.0.8 for a
  process with several capsules (``weights`` has more than one): its total is all it records,
  some of which may serve other queues only, so the sum is an estimate (an upper bound).
  Sidekiq 7.0 with several capsules cannot be told from one: its total counts.
- ``in_flight``: the running jobs of the queue in the live processes' work hashes, quiet ones
  included (they finish what they hold). Sidekiq writes no fresher record: a job taken from the
  list (``BRPOP``) shows at the next heartbeat, a job done leaves at the next. So it is the
  truth as of each process's last heartbeat, up to 5 s (plus the beat's own time) before the
  sample, reported as an ``estimate`` with that age (``readings.in_flight.age``: the sample time
  less the oldest beat of the processes that count). ``busy`` is written at the same moment and
  counts every queue's jobs, so the work hash is the one to read.

Where no process is registered at all (the set does not exist: Sidekiq removes its entry when a
process stops, and Redis the set with its last member), all three stay unknown rather than 0:
every process may be stopped, or the queue is worked by clients that speak Sidekiq's queue
format but do not register (the policy then treats it as a list without workers, as before).

Scheduled jobs (``schedule``) and retries (``retry``) are sorted sets of their own: they are not
waiting until Sidekiq's poller pushes them onto the queue (setting ``enqueued_at`` then), so
they never count.
"""

from __future__ import annotations

import time
from typing import Any

from brokers.base import Precision, QueueSnapshot, QueueSource, Reading, WorkerReadings
from brokers.connections import Connections
from brokers.payloads import MAX_PAYLOAD_BYTES
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout
from brokers.redis_registry import RegistryAdapter, RegistryFigures

#: a process whose last heartbeat is older than this is gone (Sidekiq's own 60 s)
BEAT_TIMEOUT = 60.0
#: the sources of the figures: the work hashes, the process hashes, their concurrency
WORK, PROCESSES, CONCURRENCY = "sidekiq-work", "sidekiq-processes", "sidekiq-concurrency"

#: KEYS processes; ARGV key prefix ("" or "P:"), queue, now (s), BEAT_TIMEOUT, entry bound:
#: {processes, slots, processes whose slots may serve other queues too, in flight, the oldest
#: beat of the processes counted (a string: Lua would truncate a number)}, or {} when no process
#: is registered
PROCESSES_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local prefix, queue, now, timeout = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local bound = tonumber(ARGV[5])
local head = '{"queue":' .. cjson.encode(queue) .. ','
local processes, slots, shared, running, oldest = 0, 0, 0, 0, nil

-- whether the process listens to the queue, its threads that serve it, and whether that share
-- is known (Sidekiq 7 and 8.0 list one total and every capsule's queues together)
local function serving(info, total)
  if type(info['capsules']) == 'table' then
    local listens, n = false, 0
    for _, capsule in pairs(info['capsules']) do
      if type(capsule) == 'table' and type(capsule['weights']) == 'table'
          and capsule['weights'][queue] ~= nil then
        listens, n = true, n + (tonumber(capsule['concurrency']) or 0)
      end
    end
    return listens, n, true
  end
  if type(info['queues']) == 'table' then
    for _, name in ipairs(info['queues']) do
      if name == queue then
        local capsules = type(info['weights']) == 'table' and #info['weights'] or 1
        return true, total, capsules <= 1
      end
    end
  end
  return false, 0, true
end

local function of_queue(entry)
  if string.sub(entry, 1, #head) == head then return true end
  if string.sub(entry, 1, 9) == '{"queue":' or #entry > bound then return false end
  local ok, work = pcall(cjson.decode, entry)
  return ok and type(work) == 'table' and work['queue'] == queue
end

for _, identity in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = prefix .. identity
  local f = redis.call('HMGET', key, 'info', 'beat', 'quiet', 'concurrency')
  local beat = tonumber(f[2])
  if f[1] and beat and now - beat <= timeout and #f[1] <= bound then
    local ok, info = pcall(cjson.decode, f[1])
    if ok and type(info) == 'table' then
      local total = tonumber(f[4]) or tonumber(info['concurrency']) or 0
      local listens, n, known = serving(info, total)
      local held = 0
      for _, suffix in ipairs({':work', ':workers'}) do
        for _, entry in ipairs(redis.call('HVALS', key .. suffix)) do
          if of_queue(entry) then held = held + 1 end
        end
      end
      if listens and f[3] ~= 'true' then
        processes, slots = processes + 1, slots + n
        if not known then shared = shared + 1 end
      end
      running = running + held
      if (listens or held > 0) and (oldest == nil or beat < oldest) then oldest = beat end
    end
  end
end
return {processes, slots, shared, running, oldest and tostring(oldest) or ''}
"""


class SidekiqAdapter(RegistryAdapter[RegistryFigures]):
    """Samples one Sidekiq queue: its list, then the process registry."""

    def registry_command(self) -> Command:
        args = (self.prefix, self.queue, time.time(), BEAT_TIMEOUT, MAX_PAYLOAD_BYTES)
        return ("EVAL", PROCESSES_SCRIPT, 1, self.prefix + "processes", *args)

    def registry_key(self) -> str:
        return self.prefix + "processes"  # the script answers {} at once where it is missing

    def registry_figures(self, reply: list[Any], snapshot: QueueSnapshot) -> RegistryFigures:
        processes, slots, shared, running, oldest = reply
        # the figures are as of each process's last heartbeat: as old as the oldest one counted
        age = max(0.0, snapshot.observed_at - float(oldest)) if oldest else 0.0
        readings = WorkerReadings(
            in_flight=Reading(Precision.ESTIMATE if oldest else Precision.EXACT, WORK, age),
            consumers=Reading(Precision.EXACT, PROCESSES, age),
            slots=Reading(Precision.ESTIMATE if int(shared) else Precision.EXACT, CONCURRENCY, age),
        )
        return RegistryFigures(int(processes), int(running), int(slots), readings)


async def list_queues(source: QueueSource, connections: Connections) -> tuple[str, ...]:
    """The queues Sidekiq knows: the names in its set ``P:queues``, which a push adds to
    (``Sidekiq::Client``) and ``Sidekiq::Queue#clear`` removes from (``Sidekiq::Queue.all`` reads
    it), in name order."""
    prefix = source.options_as(ListLayout).key_prefix
    connection = RedisConnection(source, connections)
    try:
        (members,) = await connection.execute(
            [("SMEMBERS", f"{prefix}:queues" if prefix else "queues")], transaction=False
        )
    finally:
        await connection.aclose()
    return tuple(sorted(_text(member) for member in members))


def _text(member: bytes | str) -> str:
    return member.decode(errors="replace") if isinstance(member, bytes) else member
