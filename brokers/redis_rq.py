"""RQ queues -> QueueSnapshot: the queue's list (``brokers.redis_queues``: depth, age, workers,
list-marker counts), the jobs in flight, and the arrivals and completions RQ's workers count.

As RQ 1.x to 3.0 writes them (``rq/worker/base.py``, ``rq/worker_registration.py``,
``rq/registry.py``, ``rq/queue.py``; ``P`` is the prefix, ``rq``):

- set ``P:workers:<q>`` of the worker keys ``P:worker:<name>`` listening to the queue; each
  worker's hash has ``queues`` (comma-separated), ``successful_job_count`` and
  ``failed_job_count``, each incremented in the transaction that ends a job (and removes it
  from the started registry), whatever its ``result_ttl``: the finished registry keeps only
  jobs whose result is kept (``result_ttl`` 0 keeps none), so it would undercount. A worker that
  stops leaves the set and its hash expires 60 s later (``register_death``): its last counts
  are read at the next sample. A new worker starts from 0; one that restarts under the same
  name starts its hash again (``register_birth``).
- in flight: the started registry ``P:wip:<q>`` (sorted set of ``<job id>:<execution id>``, a
  job id before 2.0) and, since RQ 1.16, the intermediate list ``P:queue:<q>:intermediate``
  where a worker of one queue moves each job it takes (``BLMOVE``) until it starts it; a job is
  in both for a moment, so it counts once.

Read in one script, in the transaction that reads the list (``RedisQueueAdapter.sample_with``):
the list's length, the jobs in flight and every worker's counters, at one moment. While every worker of the queue listens to it alone (a worker of several queues does
not say which queue a job came from), the jobs dequeued between two samples are the workers'
jobs ended plus the change in flight, and the arrivals are those plus the change in the list's
length, however often it empties: source ``rq-worker-counters``, exact unless a worker vanished
unread, restarted under its name, or a job left the registry without ending (the started
registry's cleanup of a job whose worker died). A worker that starts and stops between two
samples (``rq worker --burst``) is never seen: where the list marker is exact and counts more
arrivals, its counts stand. Otherwise (no RQ worker registered, as with consumers that are not
RQ's; a worker of several queues) the list marker's counts stand, lower bounds when the list
empties between samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from brokers.base import QueueSnapshot, QueueSource, Reading, WorkerReadings
from brokers.connections import Connections
from brokers.redis_connection import Command
from brokers.redis_options import ListLayout
from brokers.redis_queues import RedisQueueAdapter
from brokers.running_totals import Counted, RunningTotals

COUNTS_SOURCE = "rq-worker-counters"
#: the started registry is read in full below this many entries (else counted alone)
MAX_STARTED = 10_000

#: KEYS the queue's started registry, its workers set, its list, its intermediate list (the
#: first call names the first key, as a wrong key type is reported);
#: ARGV MAX_STARTED, then the worker keys read last time: {length, in flight, {key, queues,
#: successful, failed} for each worker in either whose hash still exists}
COUNTERS_SCRIPT = """
local started = redis.call('ZCARD', KEYS[1])
local in_flight = started
if started <= tonumber(ARGV[1]) then
  local running = {}
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    running[string.match(member, '^[^:]*')] = true
  end
  for _, id in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
    if not running[id] then in_flight = in_flight + 1 end
  end
end
local keys, seen = {}, {}
for _, key in ipairs(redis.call('SMEMBERS', KEYS[2])) do seen[key] = true table.insert(keys, key) end
for i = 2, #ARGV do if not seen[ARGV[i]] then table.insert(keys, ARGV[i]) end end
local out = {}
for _, key in ipairs(keys) do
  local f = redis.call('HMGET', key, 'queues', 'successful_job_count', 'failed_job_count')
  if f[1] then
    table.insert(out, key)
    table.insert(out, f[1])
    table.insert(out, f[2] or '0')
    table.insert(out, f[3] or '0')
  end
end
return {redis.call('LLEN', KEYS[3]), in_flight, out}
"""


@dataclass(frozen=True, slots=True)
class Counters:
    """One reading of the script: the list's length, the jobs in flight, each worker's jobs
    ended (successful + failed), and whether every worker listens to the queue alone."""

    length: int
    in_flight: int
    ended: dict[str, int]
    single_queue: bool


class RQAdapter:
    """Samples one RQ queue: its list, then the jobs in flight and the workers' job counters."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._list = RedisQueueAdapter(source, connections)
        layout = source.options_as(ListLayout)
        prefix = f"{layout.key_prefix}:" if layout.key_prefix else ""
        queue_key = f"{prefix}queue:{source.queue}"
        self._keys = (
            f"{prefix}wip:{source.queue}",
            f"{prefix}workers:{source.queue}",
            queue_key,
            f"{queue_key}:intermediate",
        )
        self._last: Counters | None = None
        self._totals = RunningTotals()

    async def sample(self) -> QueueSnapshot:
        previous = self._last
        known = previous.ended if previous is not None else {}
        args: list[str | int] = [4, *self._keys, MAX_STARTED, *known]
        script: Command = ("EVAL", COUNTERS_SCRIPT, *args)
        snapshot, (reply,) = await self._list.sample_with([script])
        now = self._last = _counters(reply, self.queue)
        counters = now.single_queue and bool(now.ended or known)
        counted = _since(previous, now) if counters and previous is not None else None
        snapshot = self._totals.add(snapshot, counted, COUNTS_SOURCE)
        readings = WorkerReadings(
            Reading(source="rq-started+intermediate"),
            Reading(source="rq-workers"),
            Reading(source="rq-workers"),
        )
        return replace(
            snapshot,
            in_flight=now.in_flight,
            # an RQ worker runs one job at a time (a work horse, or in its own process)
            slots=snapshot.consumers,
            readings=readings,
            # labelled by the counters wherever they are read, the marker's counts standing or not
            counts_source=COUNTS_SOURCE if counters else snapshot.counts_source,
        )

    async def aclose(self) -> None:
        await self._list.aclose()


def _counters(reply: list[Any], queue: str) -> Counters:
    """The script's reply, read."""
    length, in_flight, flat = reply
    ended: dict[str, int] = {}
    single = True
    for key, queues, successful, failed in zip(*[iter(flat)] * 4, strict=True):
        name = key.decode() if isinstance(key, bytes) else str(key)
        listens = (queues.decode() if isinstance(queues, bytes) else str(queues)).split(",")
        single = single and listens == [queue]
        ended[name] = int(successful) + int(failed)
    return Counters(int(length), int(in_flight), ended, single)


def _since(before: Counters, after: Counters) -> Counted:
    """Arrivals and jobs ended between two readings, and whether both are exact."""
    exact = all(key in after.ended for key in before.ended)  # none vanished unread
    done = 0
    for key, ended in after.ended.items():
        last = before.ended.get(key, 0)
        if ended < last:  # restarted under its name: its hash began again
            exact, last = False, 0
        done += ended - last
    arrived = after.length - before.length + done + after.in_flight - before.in_flight
    if arrived < 0:  # a job left the started registry without ending (its worker died)
        exact, arrived = False, 0
    return arrived, done, exact
