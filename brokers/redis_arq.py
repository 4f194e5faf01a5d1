"""arq queues -> QueueSnapshot.

The layout, as verified in arq 0.25.0 and 0.26.3 (identical in both):

- ``arq/connections.py`` ``ArqRedis.enqueue_job``: ``ZADD <queue> {job_id: score}`` where the
  score is ``timestamp_ms()`` at enqueue, or the defer-until time in ms (``_defer_until``, or
  enqueue time + ``_defer_by``). ``<queue>`` is the queue name itself (default ``arq:queue``,
  ``arq/constants.py`` ``default_queue_name``), so the user's ``queue`` is the key.
- ``arq/worker.py`` ``Worker._poll_iteration``: ``ZRANGEBYSCORE <queue> -inf now`` (oldest
  first); ``start_jobs`` sets ``arq:in-progress:<job_id>`` (``in_progress_key_prefix``) with
  ``PSETEX`` and leaves the job in the set; ``finish_job`` removes it with ``ZREM`` (a retry
  instead adds its delay with ``ZINCRBY`` and deletes the in-progress key).
- ``<queue>:health-check`` (``health_check_key_suffix``) is one string that every worker of the
  queue overwrites, by default once an hour, with its own counts: it cannot tell how many
  workers there are, so ``consumers`` is unknown.

A job scored in the future is deferred: it is not waiting until due, and its age counts from
when it fell due (that is when it started waiting). A due job whose in-progress key exists is
running (in flight), not waiting.

"Now" is the scaler's clock: arq's producers score jobs and its workers decide what is due each
by their own clock, so no clock in the system is more authoritative; ``observed_at`` is the
same instant that decides what is due, so ages and due-ness agree.

One sample is two round trips. The first (MULTI/EXEC) counts the due jobs and reads the
``K`` oldest with their scores, plus the counts of :class:`brokers.score_window.ScoreWindow`.
The second (MULTI/EXEC) reads their in-progress keys with ``MGET`` and their scores again with
``ZMSCORE``, so a job that finished in between is neither waiting nor running. ``K`` follows
the running jobs, ``max(100, 2 × last in-flight + 10)``: arq takes due jobs oldest first, so
running jobs crowd the front of the set. While the last job read is still running more may
follow, and the next ``2K`` are read, up to :data:`MAX_SCAN` jobs; past that, ``in_flight`` is
a lower bound (warning ``in_flight_lower_bound``) and, if no waiting job was among them, the
age is unknown.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brokers.base import Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout
from brokers.score_window import ScoreWindow

COUNTS_SOURCE = "score-window"
OLDEST_SOURCE = "score"
MIN_BATCH = 100
MAX_SCAN = 10_000


@dataclass(frozen=True, slots=True)
class Scan:
    """What the oldest due jobs are doing, from reading their in-progress keys."""

    in_flight: int
    #: jobs counted as due that finished before their in-progress key was read
    gone: int
    #: score (ms) of the oldest due job that is not running
    oldest_waiting: float | None
    #: False when more running jobs may lie beyond the jobs read
    complete: bool


class ArqAdapter:
    """Samples one arq queue (a sorted set of job ids)."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._source = source
        key_prefix = source.options_as(ListLayout).key_prefix
        prefix = f"{key_prefix}:" if key_prefix else ""
        self._in_progress_prefix = f"{prefix}in-progress:".encode()
        self._window = ScoreWindow()
        self._batch = MIN_BATCH
        self._redis = RedisConnection(source, connections)

    async def sample(self) -> QueueSnapshot:
        now_ms = int(time.time() * 1000)
        cutoff = self._window.cutoff(now_ms)
        since = self._window.previous_cutoff
        key = self.queue
        commands: list[Command] = [
            ("ZCOUNT", key, "-inf", now_ms),
            ("ZRANGEBYSCORE", key, "-inf", now_ms, "WITHSCORES", "LIMIT", 0, self._batch),
            ("ZCOUNT", key, "-inf", cutoff),
        ]
        if since is not None:
            commands.append(("ZCOUNT", key, f"({since}", cutoff))
        replies = await self._redis.execute(commands, transaction=True)
        due: int = replies[0]
        scan = await self._scan(_pairs(replies[1]), now_ms, due)
        counts = self._window.observe(
            cutoff, replies[2], replies[3] if since is not None else None, scan.oldest_waiting
        )
        self._batch = max(MIN_BATCH, 2 * scan.in_flight + 10)

        oldest = scan.oldest_waiting
        return QueueSnapshot(
            observed_at=now_ms / 1000,
            depth=max(0, due - scan.in_flight - scan.gone),
            in_flight=scan.in_flight,
            oldest_enqueued_at=oldest / 1000 if oldest is not None else None,
            oldest_precision=Precision.EXACT if oldest is not None else Precision.UNKNOWN,
            oldest_source=OLDEST_SOURCE if oldest is not None else "",
            arrivals_total=counts.arrivals_total,
            completions_total=counts.completions_total,
            counts_exact=counts.exact,
            counts_source=COUNTS_SOURCE,
            consumers=None,
            warnings=() if scan.complete else ("in_flight_lower_bound",),
        )

    async def aclose(self) -> None:
        await self._redis.aclose()

    async def _scan(self, jobs: list[tuple[bytes, float]], now_ms: int, due: int) -> Scan:
        """Read the in-progress keys of ``jobs`` (the oldest due) and more while needed."""
        in_flight = gone = scanned = 0
        oldest: float | None = None
        while jobs:
            states = await self._states([job_id for job_id, _ in jobs], now_ms)
            last_running = False
            for (_, score), (running, present) in zip(jobs, states, strict=True):
                last_running = running and present
                if not present:
                    gone += 1
                elif running:
                    in_flight += 1
                elif oldest is None:
                    oldest = score
            scanned += len(jobs)
            if scanned >= due or (oldest is not None and not last_running):
                break
            if scanned >= MAX_SCAN:
                return Scan(in_flight, gone, oldest, complete=False)
            jobs = await self._due_jobs(now_ms, scanned, min(2 * len(jobs), MAX_SCAN - scanned))
        return Scan(in_flight, gone, oldest, complete=True)

    async def _states(self, job_ids: Sequence[bytes], now_ms: int) -> list[tuple[bool, bool]]:
        """(running, still due) for each job: a job retried since with a delay is due later."""
        keys = [self._in_progress_prefix + job_id for job_id in job_ids]
        running, scores = await self._redis.execute(
            [("MGET", keys[0], *keys[1:]), ("ZMSCORE", self.queue, *job_ids)], transaction=True
        )
        return [
            (flag is not None, score is not None and score <= now_ms)
            for flag, score in zip(running, scores, strict=True)
        ]

    async def _due_jobs(self, now_ms: int, offset: int, count: int) -> list[tuple[bytes, float]]:
        (reply,) = await self._redis.execute(
            [("ZRANGEBYSCORE", self.queue, "-inf", now_ms, "WITHSCORES", "LIMIT", offset, count)],
            transaction=False,
        )
        return _pairs(reply)


def _pairs(reply: Sequence[Any]) -> list[tuple[bytes, float]]:
    """``ZRANGEBYSCORE ... WITHSCORES`` as (member, score) pairs.

    Run through ``execute_command``, redis-py leaves the reply flat (RESP2) or as pairs (RESP3).
    """
    if reply and isinstance(reply[0], list):
        return [(member, float(score)) for member, score in reply]
    return [(reply[i], float(reply[i + 1])) for i in range(0, len(reply), 2)]
