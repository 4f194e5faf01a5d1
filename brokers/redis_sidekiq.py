"""Sidekiq queues -> QueueSnapshot: the queue's list (``brokers.redis_queues``) and the processes
Sidekiq registers, for the jobs in flight and the workers serving the queue.

The process registry, as Sidekiq 6, 7 and 8 write it (``lib/sidekiq/launcher.rb``, ``❤`` /
``heartbeat``, every 5 s; read back by ``Sidekiq::ProcessSet`` and ``Sidekiq::WorkSet`` in
``lib/sidekiq/api.rb``); ``P:`` is the namespace, where there is one:

- set ``P:processes`` of process identities;
- hash ``P:<identity>`` (expires after 60 s): ``beat`` (epoch seconds of the last heartbeat),
  ``busy``, ``quiet`` (``"true"`` once the process stops taking jobs: TSTP, or shutting down),
  ``info`` (JSON: ``queues`` and ``concurrency`` in 6 and 7; in 8 also ``capsules``, each with
  its ``concurrency`` and its queues as the keys of ``weights``, and the process's total
  ``concurrency`` as a field of the hash);
- hash ``P:<identity>:work`` (``:workers`` before 6.5), thread id -> JSON
  ``{"queue": ..., "payload": ..., "run_at": ...}``: the jobs running at the last heartbeat.

A process whose ``beat`` is more than :data:`BEAT_TIMEOUT` seconds old (by the scaler's clock)
is gone, as Sidekiq Web takes it; its hash may linger until it expires. Workers serving the
queue (``consumers``) = the live, not quiet, processes that listen to it (in Sidekiq 8, with a
capsule that does). A process is the unit the policy counts in, a replica of the Deployment, as
for every other format; its threads (``concurrency``) are its job slots, what
``workerConcurrency`` says. In flight = the running jobs of that queue in the live processes'
work hashes, quiet ones included (they finish what they hold). Both are as of each process's last
heartbeat, as Sidekiq Web shows them: up to 5 s old.

Where no process is registered at all (the set does not exist: Sidekiq removes its entry when a
process stops, and Redis the set with its last member), both stay unknown rather than 0: every
process may be stopped, or the queue is worked by clients that speak Sidekiq's queue format but
do not register (the policy then treats it as a list without workers, as before).

Scheduled jobs (``schedule``) and retries (``retry``) are sorted sets of their own: they are not
waiting until Sidekiq's poller pushes them onto the queue (setting ``enqueued_at`` then), so
they never count.
"""

from __future__ import annotations

import time
from typing import Any

from brokers.base import QueueSource
from brokers.connections import Connections
from brokers.payloads import MAX_PAYLOAD_BYTES
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout
from brokers.redis_registry import RegistryAdapter

#: a process whose last heartbeat is older than this is gone (Sidekiq's own 60 s)
BEAT_TIMEOUT = 60.0

#: KEYS processes; ARGV key prefix ("" or "P:"), queue, now (s), BEAT_TIMEOUT, entry bound:
#: {workers, in flight}, or {} when no process is registered
PROCESSES_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local prefix, queue, now, timeout = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local bound = tonumber(ARGV[5])
local head = '{"queue":' .. cjson.encode(queue) .. ','
local workers, running = 0, 0

local function listens(info)
  if type(info['capsules']) == 'table' then
    for _, capsule in pairs(info['capsules']) do
      if type(capsule['weights']) == 'table' and capsule['weights'][queue] ~= nil then
        return true
      end
    end
    return false
  end
  if type(info['queues']) == 'table' then
    for _, name in ipairs(info['queues']) do
      if name == queue then return true end
    end
  end
  return false
end

local function of_queue(entry)
  if string.sub(entry, 1, #head) == head then return true end
  if string.sub(entry, 1, 9) == '{"queue":' or #entry > bound then return false end
  local ok, work = pcall(cjson.decode, entry)
  return ok and type(work) == 'table' and work['queue'] == queue
end

for _, identity in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = prefix .. identity
  local f = redis.call('HMGET', key, 'info', 'beat', 'quiet')
  local beat = tonumber(f[2])
  if f[1] and beat and now - beat <= timeout and #f[1] <= bound then
    local ok, info = pcall(cjson.decode, f[1])
    if ok and type(info) == 'table' then
      if f[3] ~= 'true' and listens(info) then workers = workers + 1 end
      for _, suffix in ipairs({':work', ':workers'}) do
        for _, entry in ipairs(redis.call('HVALS', key .. suffix)) do
          if of_queue(entry) then running = running + 1 end
        end
      end
    end
  end
end
return {workers, running}
"""


class SidekiqAdapter(RegistryAdapter):
    """Samples one Sidekiq queue: its list, then the process registry."""

    def registry_command(self) -> Command:
        args = (self.prefix, self.queue, time.time(), BEAT_TIMEOUT, MAX_PAYLOAD_BYTES)
        return ("EVAL", PROCESSES_SCRIPT, 1, self.prefix + "processes", *args)

    def registry_counts(self, reply: list[Any]) -> tuple[int | None, int | None]:
        workers, running = reply
        return int(workers), int(running)


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
