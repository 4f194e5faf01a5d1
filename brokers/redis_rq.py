"""RQ queues -> QueueSnapshot: the queue's list (``brokers.redis_queues``: depth, age, in flight,
workers, list-marker arrivals) and the completions RQ's workers count themselves.

As RQ 1.x to 3.0 writes them (``rq/worker/base.py``, ``rq/worker_registration.py``; ``P`` is
the prefix, ``rq``): set ``P:workers:<q>`` of the worker keys ``P:worker:<name>`` listening to
the queue; each worker's hash has ``queues`` (comma-separated) and ``successful_job_count`` and
``failed_job_count``, incremented as each job ends, whatever its ``result_ttl`` (the finished
registry keeps only jobs whose result is kept, so it undercounts). A worker that stops leaves
the set and its hash expires 60 s later (``register_death``), so its last counts are still read
at the next sample; a new worker starts from 0.

The completions since the last sample are the counters' increases, exact while every worker of
the queue listens to it alone (a worker of several queues does not say which queue a job came
from: the list marker's completions stand then, as they do while no RQ worker is registered)
and no worker vanished unread. Arrivals stay
the list marker's, so where the list empties between samples both are still flagged lower
bounds (one flag holds both), though the completions are right.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.base import QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout
from brokers.redis_queues import RedisQueueAdapter

COUNTS_SOURCE = "list-marker, rq-worker-counters"

#: KEYS the queue's workers set; ARGV the worker keys read last time:
#: {key, queues, successful, failed} for each worker in either whose hash still exists
COUNTERS_SCRIPT = """
local keys, seen = {}, {}
for _, key in ipairs(redis.call('SMEMBERS', KEYS[1])) do seen[key] = true table.insert(keys, key) end
for i = 1, #ARGV do if not seen[ARGV[i]] then table.insert(keys, ARGV[i]) end end
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
return out
"""


class RQAdapter:
    """Samples one RQ queue: its list, then its workers' job counters."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._list = RedisQueueAdapter(source, connections)
        prefix = (
            f"{source.options_as(ListLayout).key_prefix}:"
            if source.options_as(ListLayout).key_prefix
            else ""
        )
        self._workers_key = f"{prefix}workers:{source.queue}"
        #: worker key -> its jobs ended (successful + failed), at the last sample
        self._ended: dict[str, int] | None = None
        self._completions = 0
        #: the list marker's completions total at the last sample
        self._marker: int | None = None
        self._redis = RedisConnection(source, connections)

    async def sample(self) -> QueueSnapshot:
        snapshot = await self._list.sample()
        args: list[str | int] = [1, self._workers_key, *(self._ended or {})]
        script: Command = ("EVAL", COUNTERS_SCRIPT, *args)
        (flat,) = await self._redis.execute([script], transaction=False)
        ended, single_queue = _counters(flat, self.queue)
        previous, self._ended = self._ended, ended
        marker, self._marker = self._marker, snapshot.completions_total
        exact, source = snapshot.counts_exact, snapshot.counts_source
        counters = single_queue and bool(ended or previous)
        if counters:
            source = COUNTS_SOURCE
        if previous is None or marker is None or snapshot.completions_total is None:
            pass  # the first sample: the total starts here
        elif counters:
            exact = exact and all(key in ended for key in previous)  # none vanished unread
            self._completions += sum(max(0, n - previous.get(key, 0)) for key, n in ended.items())
        else:  # no RQ worker seen (the consumers are not RQ's), or one of several queues, which
            # does not say which queue a job came from
            self._completions += snapshot.completions_total - marker
        return replace(
            snapshot,
            completions_total=self._completions,
            counts_exact=exact,
            counts_source=source,
        )

    async def aclose(self) -> None:
        await self._list.aclose()
        await self._redis.aclose()


def _counters(flat: list[Any], queue: str) -> tuple[dict[str, int], bool]:
    """Each worker's jobs ended, and whether every worker listens to ``queue`` alone."""
    ended: dict[str, int] = {}
    single = True
    for key, queues, successful, failed in zip(*[iter(flat)] * 4, strict=True):
        name = key.decode() if isinstance(key, bytes) else str(key)
        listens = (queues.decode() if isinstance(queues, bytes) else str(queues)).split(",")
        single = single and listens == [queue]
        ended[name] = int(successful) + int(failed)
    return ended, single
