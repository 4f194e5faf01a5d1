"""The arq adapter against a real Redis, with jobs enqueued and run by arq itself.

Each test names its queue and job ids with a fresh token and deletes every key holding it
afterwards (the queue, ``arq:job:<id>``, ``arq:in-progress:<id>``, ``arq:retry:<id>``, the
health-check key).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.typing import WorkerCoroutine
from arq.worker import Worker, func
from redis.asyncio import ConnectionPool

from brokers.base import Precision, QueueSnapshot
from brokers.connections import Connections
from brokers.redis_arq import MIN_BATCH, ArqAdapter
from brokers.registry import open_adapter
from brokers.score_window import SETTLE_MS
from scaler.errors import QueueMisconfigured
from scaler.spec import parse_metadata

pytestmark = pytest.mark.integration

AGE_TOLERANCE = 1.0


@pytest.fixture
async def arq_pool(redis_url: str) -> AsyncIterator[ArqRedis]:
    pool = await create_pool(RedisSettings.from_dsn(redis_url))
    yield pool
    await pool.aclose()


@pytest.fixture
def queue(token: str) -> str:
    return f"arq:qas-{token}"


@pytest.fixture
async def adapter(
    connections: Connections, redis_url: str, queue: str
) -> AsyncIterator[ArqAdapter]:
    metadata = {"url": redis_url, "queue": queue, "format": "arq", "workerThroughput": "1"}
    opened = open_adapter(parse_metadata(metadata).source, connections)
    assert isinstance(opened, ArqAdapter)
    yield opened
    await opened.aclose()


class Producer:
    """Enqueues jobs with arq, ids holding the test's token."""

    def __init__(self, pool: ArqRedis, queue: str, token: str) -> None:
        self.pool, self.queue, self.token = pool, queue, token
        self.enqueued_at: list[float] = []

    async def enqueue(self, function: str = "work", **options: Any) -> str:
        job_id = f"{self.token}-{len(self.enqueued_at)}"
        self.enqueued_at.append(time.time())
        job = await self.pool.enqueue_job(
            function, _job_id=job_id, _queue_name=self.queue, **options
        )
        assert job is not None
        return job_id


@pytest.fixture
def producer(arq_pool: ArqRedis, queue: str, token: str) -> Producer:
    return Producer(arq_pool, queue, token)


@asynccontextmanager
async def running_worker(
    redis_url: str,
    queue: str,
    function: WorkerCoroutine,
    max_jobs: int,
) -> AsyncIterator[Worker]:
    """A real arq Worker on ``queue``, polling every 50 ms, stopped when its jobs are done."""
    # a connection per running job as they finish together (redis-py's pools default to 100)
    pool = ArqRedis(ConnectionPool.from_url(redis_url, max_connections=max_jobs + 10))
    worker = Worker(
        functions=[func(function, name="work")],
        redis_pool=pool,
        queue_name=queue,
        max_jobs=max_jobs,
        poll_delay=0.05,
        keep_result=0,
        handle_signals=False,
    )
    main = asyncio.create_task(worker.main())
    try:
        yield worker
    finally:
        # under load arq's main loop can lose a cancel (it then waits for a free job slot),
        # so cancel until it stops
        while not main.done():
            main.cancel()
            await asyncio.wait([main], timeout=0.5)
        if not main.cancelled():
            main.result()  # an error in the worker's loop
        await asyncio.wait_for(asyncio.gather(*worker.tasks.values()), timeout=5)
        await pool.aclose(close_connection_pool=True)


async def set_score(r: aioredis.Redis, queue: str, job_id: str, seconds_ago: float) -> None:
    """Move a job's score into the past, as if enqueued then (arq's layout otherwise kept)."""
    assert await r.zadd(queue, {job_id: int((time.time() - seconds_ago) * 1000)}, xx=True, ch=True)


def age(snapshot: QueueSnapshot) -> float:
    assert snapshot.oldest_enqueued_at is not None, snapshot
    assert snapshot.oldest_precision is Precision.EXACT
    assert snapshot.oldest_source == "score"
    return snapshot.observed_at - snapshot.oldest_enqueued_at


async def wait_until(condition: Callable[[], Awaitable[object]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_age_is_from_the_real_enqueue_time(
    adapter: ArqAdapter, producer: Producer, r: aioredis.Redis, queue: str
) -> None:
    ids = [await producer.enqueue() for _ in range(3)]
    await asyncio.sleep(0.3)
    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.consumers) == (3, 0, None)
    expected = snapshot.observed_at - producer.enqueued_at[0]
    assert age(snapshot) == pytest.approx(expected, abs=AGE_TOLERANCE)
    assert snapshot.warnings == ()

    for job_id, seconds_ago in zip(ids, (30.0, 20.0, 10.0), strict=True):
        await set_score(r, queue, job_id, seconds_ago)
    assert age(await adapter.sample()) == pytest.approx(30.0, abs=AGE_TOLERANCE)


async def test_deferred_jobs_wait_from_when_they_fall_due(
    adapter: ArqAdapter, producer: Producer
) -> None:
    await producer.enqueue(_defer_by=timedelta(seconds=1))
    await producer.enqueue(_defer_by=timedelta(hours=1))
    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.oldest_enqueued_at) == (0, 0, None)

    await asyncio.sleep(1.3)
    snapshot = await adapter.sample()
    assert snapshot.depth == 1
    due_at = producer.enqueued_at[0] + 1.0
    assert age(snapshot) == pytest.approx(snapshot.observed_at - due_at, abs=0.2)
    assert age(snapshot) < snapshot.observed_at - producer.enqueued_at[0] - 0.8


async def test_a_job_held_by_a_real_worker_is_in_flight(
    adapter: ArqAdapter,
    producer: Producer,
    r: aioredis.Redis,
    redis_url: str,
    queue: str,
) -> None:
    release = asyncio.Event()

    async def work(ctx: dict[str, Any]) -> None:
        await release.wait()

    ids = [await producer.enqueue() for _ in range(3)]
    for job_id, seconds_ago in zip(ids, (30.0, 20.0, 10.0), strict=True):
        await set_score(r, queue, job_id, seconds_ago)
    async with running_worker(redis_url, queue, work, max_jobs=1):
        await wait_until(lambda: r.exists(f"arq:in-progress:{ids[0]}"))
        snapshot = await adapter.sample()
        assert (snapshot.depth, snapshot.in_flight) == (2, 1)
        assert age(snapshot) == pytest.approx(20.0, abs=AGE_TOLERANCE)  # the oldest waits no more
        assert snapshot.warnings == ()
        release.set()
        await wait_until(lambda: drained(r, queue))
    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.oldest_enqueued_at) == (0, 0, None)


async def test_more_running_jobs_than_one_batch_are_all_counted(
    adapter: ArqAdapter, producer: Producer, r: aioredis.Redis, redis_url: str, queue: str
) -> None:
    release = asyncio.Event()

    async def work(ctx: dict[str, Any]) -> None:
        await release.wait()

    running, waiting = MIN_BATCH + 50, 10
    ids = [await producer.enqueue() for _ in range(running + waiting)]
    async with running_worker(redis_url, queue, work, max_jobs=running) as worker:
        await wait_until(lambda: started(worker, running))
        snapshot = await adapter.sample()
        assert (snapshot.depth, snapshot.in_flight) == (waiting, running)
        assert snapshot.warnings == ()
        first_waiting = await r.zscore(queue, ids[running])
        assert first_waiting is not None
        assert snapshot.oldest_enqueued_at == pytest.approx(first_waiting / 1000)
        assert adapter._batch == 2 * running + 10  # the next sample reads them all at once
        release.set()
        await wait_until(lambda: drained(r, queue))


async def test_steady_load_with_a_backlog(
    adapter: ArqAdapter, producer: Producer, r: aioredis.Redis, redis_url: str, queue: str
) -> None:
    """A producer (about 40 jobs/s) and a worker (at most 40/s) over a backlog 5 s old."""

    async def work(ctx: dict[str, Any]) -> None:
        await asyncio.sleep(0.1)

    for job_id in [await producer.enqueue() for _ in range(60)]:
        await set_score(r, queue, job_id, 5.0)
    producing = asyncio.Event()

    async def produce() -> None:
        while producing.is_set():
            await producer.enqueue()
            await asyncio.sleep(0.02)

    producing.set()
    task = asyncio.create_task(produce())
    try:
        async with running_worker(redis_url, queue, work, max_jobs=4) as worker:
            await asyncio.sleep(SETTLE_MS / 1000 + 0.2)
            snapshots, completed = [], []
            for _ in range(13):
                snapshots.append(await adapter.sample())
                completed.append(worker.jobs_complete)
                await asyncio.sleep(0.25)
    finally:
        producing.clear()
        await task

    first, last = snapshots[0], snapshots[-1]
    assert all(s.counts_exact and s.counts_source == "score-window" for s in snapshots)
    assert all(s.depth and s.depth > 0 for s in snapshots)
    settle = SETTLE_MS / 1000
    arrived = sum(
        1
        for t in producer.enqueued_at
        if first.observed_at - settle < t <= last.observed_at - settle
    )
    assert last.arrivals_total is not None and first.arrivals_total is not None
    assert last.completions_total is not None and first.completions_total is not None
    assert arrived > 20
    assert last.arrivals_total - first.arrivals_total == pytest.approx(arrived, rel=0.15)
    finished = completed[-1] - completed[0]
    assert finished > 20
    assert last.completions_total - first.completions_total == pytest.approx(finished, rel=0.15)


async def test_a_missing_queue_is_empty_and_a_key_of_another_type_is_misconfigured(
    adapter: ArqAdapter, r: aioredis.Redis, queue: str
) -> None:
    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.counts_exact) == (0, 0, True)
    await r.rpush(queue, b"not a sorted set")
    with pytest.raises(QueueMisconfigured, match="not a sorted set"):
        await adapter.sample()


async def drained(r: aioredis.Redis, queue: str) -> bool:
    return await r.zcard(queue) == 0


async def started(worker: Worker, count: int) -> bool:
    return len(worker.tasks) >= count
