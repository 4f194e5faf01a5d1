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

- ``P:stat:processed:<id>``, incremented with ``P:stat:processed`` (every queue's) in the
  pipeline that ends each job (``done_working``), failed jobs too (they also count in
  ``stat:failed``); deleted with the worker's other keys when it unregisters (at shutdown, or
  pruned).

Workers serving the queue = live workers whose queues match it, one job slot each (a worker
forks a child per job and runs one at a time); in flight = the live workers' jobs of the queue,
written as each job starts and deleted as it ends, so live (exact at the sample). All unknown
while no worker is registered (the set does not exist), as for Sidekiq: the workers may not be
Resque's.

Arrivals and completions from the counters, read in the script with the list's length and the
jobs in flight, at one moment: the jobs ended between two samples are the increases of the
counters of the workers that listen to this queue alone (a worker of several queues does not say
which queue a job came from), and the arrivals are those plus the change in the list's length
and in flight, however often the list empties: source ``resque-worker-counters``. Exact unless a
job ended uncounted between the samples: ``stat:processed`` rose by more than every registered
worker's counter (a worker that ended jobs and unregistered between two samples, taking its
counter with it), a counter fell (its worker restarted under the same id, from 0), or the
arrivals came out negative (a job popped by a worker that had not yet written ``worker:<id>``,
counted an interval late). While a worker of several queues ended jobs between the samples, or no
worker of this queue alone is registered, the list marker's counts stand, lower bounds when the
list empties between samples.
"""

from __future__ import annotations

import fnmatch
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from brokers.base import QueueSnapshot, QueueSource, Reading, WorkerReadings
from brokers.connections import Connections
from brokers.payloads import MAX_PAYLOAD_BYTES
from brokers.redis_connection import Command
from brokers.redis_registry import RegistryAdapter, RegistryFigures
from brokers.running_totals import Counted, RunningTotals

#: Resque's prune_interval: heartbeat_interval (60 s) × 5
PRUNE_INTERVAL = 300.0

COUNTS_SOURCE = "resque-worker-counters"

#: KEYS workers, heartbeats, the queue's list, stat:processed; ARGV key prefix ("P:"), queue,
#: entry bound: {} when no worker is registered, else the list's length, stat:processed, then a
#: flat list of id, heartbeat, running-this-queue (0/1), its stat:processed:<id>
WORKERS_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local prefix, queue, bound = ARGV[1], ARGV[2], tonumber(ARGV[3])
local head = '{"queue":' .. cjson.encode(queue) .. ','
local out = {redis.call('LLEN', KEYS[3]), redis.call('GET', KEYS[4]) or '0'}
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
  table.insert(out, redis.call('GET', prefix .. 'stat:processed:' .. id) or '0')
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


@dataclass(frozen=True, slots=True)
class Counters:
    """One reading of the script: the list's length, the live workers' jobs of the queue, every
    registered worker's ``stat:processed:<id>``, ``stat:processed``, and which workers listen to
    this queue alone and which to it among others."""

    length: int
    in_flight: int
    processed: dict[str, int]
    total: int
    alone: frozenset[str]
    shared: frozenset[str]


def since(before: Counters, after: Counters) -> Counted | None:
    """Arrivals and jobs ended between two readings, and whether both are exact; None where the
    jobs of this queue cannot be told apart (a worker of several queues ended some)."""
    rises: dict[str, int] = {}
    exact = True
    for id_, processed in after.processed.items():
        last = before.processed.get(id_, 0)
        if processed < last:  # restarted under its id: its counter began again
            exact, last = False, 0
        rises[id_] = processed - last
    if any(rises.get(id_, 0) for id_ in after.shared):
        return None
    if after.total - before.total != sum(rises.values()):  # jobs ended uncounted, or a reset
        exact = False
    done = sum(rises.get(id_, 0) for id_ in after.alone)
    arrived = after.length - before.length + done + after.in_flight - before.in_flight
    if arrived < 0:  # a job taken, its worker:<id> not yet written: counted an interval late
        exact, arrived = False, 0
    return arrived, done, exact


def _counted(before: Counters | None, after: Counters | None) -> Counted | None:
    """The counters' arrivals and jobs ended between two samples, where both read the registry
    and a worker of this queue alone was registered at either."""
    if before is None or after is None or not (before.alone or after.alone):
        return None
    return since(before, after)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResqueFigures(RegistryFigures):
    """The registry's figures, with the counters read in the same script."""

    counters: Counters


class ResqueAdapter(RegistryAdapter[ResqueFigures]):
    """Samples one Resque queue: its list, then the worker registry and its counters."""

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        super().__init__(source, connections)
        self._last: Counters | None = None
        self._totals = RunningTotals()

    def registry_command(self) -> Command:
        keys = (
            self.prefix + "workers",
            self.prefix + "workers:heartbeat",
            self.prefix + "queue:" + self.queue,
            self.prefix + "stat:processed",
        )
        return ("EVAL", WORKERS_SCRIPT, 4, *keys, self.prefix, self.queue, MAX_PAYLOAD_BYTES)

    def registry_figures(self, reply: list[Any], snapshot: QueueSnapshot) -> ResqueFigures:
        now, workers, running = time.time(), 0, 0
        length, total, flat = reply[0], reply[1], reply[2:]
        processed: dict[str, int] = {}
        alone: set[str] = set()
        shared: set[str] = set()
        for raw_id, raw_beat, busy, count in zip(*[iter(flat)] * 4, strict=True):
            id_ = _text(raw_id)
            processed[id_] = int(count)
            if serves(id_, self.queue):
                (alone if id_.split(":", 2)[-1] == self.queue else shared).add(id_)
            if alive(_text(raw_beat), now):
                workers += serves(id_, self.queue)
                running += int(busy)
        counters = Counters(
            int(length), running, processed, int(total), frozenset(alone), frozenset(shared)
        )
        # a Resque worker runs one job at a time (it forks a child per job): a slot each
        readings = WorkerReadings(
            Reading(source="resque-working-on"),
            Reading(source="resque-workers"),
            Reading(source="resque-workers"),
        )
        return ResqueFigures(workers, running, workers, readings, counters=counters)

    async def sample(self) -> QueueSnapshot:
        snapshot, figures = await self.sample_registry()
        previous = self._last
        self._last = now = figures.counters if figures is not None else None
        # labelled by the counters only where their counts stand
        return self._totals.add(snapshot, _counted(previous, now), COUNTS_SOURCE)


def _text(raw: bytes | str) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
