"""Resque queues -> QueueSnapshot: the queue's list (``brokers.redis_queues``) and Resque's worker
registry, for the jobs in flight and the workers serving the queue.

The registry, as Resque 1.x to 3.0 writes it (``lib/resque/data_store.rb`` and
``lib/resque/worker.rb``; ``P`` is the namespace, ``resque``):

- set ``P:workers`` of worker ids ``<host>:<pid>:<queues>``, the queues as given to the worker,
  comma-separated: names, ``*`` (every queue), globs (``File.fnmatch``), or ``!name`` to skip;
- ``P:worker:<id>``, while the worker runs a job: JSON ``{"queue", "run_at", "payload"}``
  (``working_on``), deleted when it is done;
- hash ``P:workers:heartbeat``, worker id -> ISO 8601 time, written every
  ``Resque.heartbeat_interval`` (60 s); a worker whose heartbeat is older than
  ``Resque.prune_interval`` (5 intervals) is dead, and Resque prunes it. So is it here.

Workers serving the queue = live workers whose queues match it, one job slot each (a worker
forks a child per job and runs one at a time); in flight = the live workers' jobs of the queue,
written as each job starts and deleted as it ends, so live (exact at the sample). All unknown
while no worker is registered (the set does not exist), as for Sidekiq: the workers may not be
Resque's.
"""

from __future__ import annotations

import fnmatch
import time
from datetime import datetime
from typing import Any

from brokers.base import QueueSnapshot, Reading, WorkerReadings
from brokers.payloads import MAX_PAYLOAD_BYTES
from brokers.redis_connection import Command
from brokers.redis_registry import RegistryAdapter, RegistryFigures

#: Resque's prune_interval: heartbeat_interval (60 s) × 5
PRUNE_INTERVAL = 300.0

#: KEYS workers, heartbeats; ARGV key prefix ("P:"), queue, entry bound:
#: {} when no worker is registered, else a flat list of id, heartbeat, running-this-queue (0/1)
WORKERS_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local prefix, queue, bound = ARGV[1], ARGV[2], tonumber(ARGV[3])
local head = '{"queue":' .. cjson.encode(queue) .. ','
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = prefix .. 'worker:' .. id
  local running = 0
  local size = redis.call('STRLEN', key)
  if size > 0 then
    local start = redis.call('GETRANGE', key, 0, #head - 1)
    if start == head then
      running = 1
    elseif string.sub(start, 1, 9) ~= '{"queue":' and size <= bound then
      local ok, work = pcall(cjson.decode, redis.call('GET', key))
      if ok and type(work) == 'table' and work['queue'] == queue then running = 1 end
    end
  end
  table.insert(out, id)
  table.insert(out, redis.call('HGET', KEYS[2], id) or '')
  table.insert(out, running)
end
return out
"""


def serves(worker_id: str, queue: str) -> bool:
    """Whether the worker ``<host>:<pid>:<queues>`` takes jobs from ``queue``, as
    ``Resque::Worker#queues`` matches them (globs, ``!`` to skip)."""
    patterns = worker_id.split(":", 2)[-1].split(",")
    skip = [p[1:] for p in patterns if p.startswith("!")]
    take = [p for p in patterns if not p.startswith("!")]
    if any(fnmatch.fnmatchcase(queue, p) for p in skip):
        return False
    return any(fnmatch.fnmatchcase(queue, p) for p in take)


def alive(heartbeat: str, now: float) -> bool:
    """A heartbeat within ``PRUNE_INTERVAL``; a worker that never beat (an old Resque) counts."""
    if not heartbeat:
        return True
    try:
        return now - datetime.fromisoformat(heartbeat).timestamp() <= PRUNE_INTERVAL
    except ValueError:
        return True


class ResqueAdapter(RegistryAdapter):
    """Samples one Resque queue: its list, then the worker registry."""

    def registry_command(self) -> Command:
        keys = (self.prefix + "workers", self.prefix + "workers:heartbeat")
        return ("EVAL", WORKERS_SCRIPT, 2, *keys, self.prefix, self.queue, MAX_PAYLOAD_BYTES)

    def registry_figures(self, reply: list[Any], snapshot: QueueSnapshot) -> RegistryFigures:
        now, workers, running = time.time(), 0, 0
        for raw_id, raw_beat, busy in zip(reply[0::3], reply[1::3], reply[2::3], strict=True):
            if alive(_text(raw_beat), now):
                workers += serves(_text(raw_id), self.queue)
                running += int(busy)
        # a Resque worker runs one job at a time (it forks a child per job): a slot each
        readings = WorkerReadings(
            Reading(source="resque-working-on"),
            Reading(source="resque-workers"),
            Reading(source="resque-workers"),
        )
        return RegistryFigures(workers, running, workers, readings)


def _text(raw: bytes | str) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
