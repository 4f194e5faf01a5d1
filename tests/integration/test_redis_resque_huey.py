"""The list adapter against a real Redis for Resque (raw payloads, as Ruby's Resque writes them)
and Huey (jobs enqueued and taken by the real huey).

Neither library stores an enqueue time, so the age stays unknown (the scaler estimates it from
the arrival history), except for Resque payloads whose producer adds ``timestamp``. Each test
uses names holding a fresh token and deletes every key holding the token afterwards.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from huey import RedisHuey

from brokers.base import Precision, QueueAdapter, QueueSnapshot
from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.spec import parse_metadata
from tests.integration.steady import Steady, assert_counts_match, sample_steady_traffic

pytestmark = pytest.mark.integration

AGE_TOLERANCE = 1.0
#: the oldest, middle and newest job, in seconds before now
AGES = (30.0, 20.0, 10.0)


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
async def open_queue(
    connections: Connections, redis_url: str
) -> AsyncIterator[Callable[..., QueueAdapter]]:
    """Opens adapters the way the scaler does (trigger metadata -> source -> registry)."""
    adapters: list[QueueAdapter] = []

    def open_(format_name: str, queue: str, **layout: str) -> QueueAdapter:
        metadata = {"url": redis_url, "queue": queue, "format": format_name, **layout}
        adapter = open_adapter(
            parse_metadata({**metadata, "workerThroughput": "1"}).source, connections
        )
        adapters.append(adapter)
        return adapter

    yield open_
    for adapter in adapters:
        await adapter.aclose()


def assert_unknown_age(snapshot: QueueSnapshot) -> None:
    assert snapshot.oldest_enqueued_at is None
    assert snapshot.oldest_precision is Precision.UNKNOWN
    assert snapshot.warnings == ()


# --- Resque -------------------------------------------------------------------------------------

_job_ids = itertools.count()


def resque_job(seconds_ago: float | None = None, **fields: object) -> str:
    """A job as ``Resque.push`` encodes it; ``seconds_ago`` adds Judoscale's ``timestamp``."""
    job: dict[str, object] = {"class": "ResizeImage", "args": [next(_job_ids), "large"]}
    if seconds_ago is not None:
        job["timestamp"] = time.time() - seconds_ago
    return json.dumps({**job, **fields})


async def test_resque_depth_and_unknown_age(
    r: aioredis.Redis, token: str, open_queue: Callable[..., QueueAdapter]
) -> None:
    queue = f"images-{token}"
    await r.rpush(f"resque:queue:{queue}", *(resque_job() for _ in range(3)))
    snapshot = await open_queue("resque", queue).sample()
    assert snapshot.depth == 3
    assert snapshot.in_flight is None and snapshot.consumers is None
    assert_unknown_age(snapshot)  # no timestamp: unknown, never 0, and no warning


async def test_resque_timestamp_gives_the_exact_age_of_the_job_at_the_head(
    r: aioredis.Redis, token: str, open_queue: Callable[..., QueueAdapter]
) -> None:
    queue = f"images-{token}"
    for seconds_ago in AGES:  # RPUSH, oldest first, as Resque.push does
        await r.rpush(f"resque:queue:{queue}", resque_job(seconds_ago))
    snapshot = await open_queue("resque", queue).sample()
    assert snapshot.depth == 3
    assert snapshot.oldest_enqueued_at is not None
    assert snapshot.observed_at - snapshot.oldest_enqueued_at == pytest.approx(
        AGES[0], abs=AGE_TOLERANCE
    )
    assert snapshot.oldest_precision is Precision.EXACT
    assert snapshot.oldest_source == "payload:timestamp"
    assert snapshot.warnings == ()


async def test_resque_namespace_as_key_prefix_and_a_bad_timestamp(
    r: aioredis.Redis, token: str, open_queue: Callable[..., QueueAdapter]
) -> None:
    queue = f"images-{token}"
    await r.rpush(f"myapp:queue:{queue}", resque_job(timestamp="yesterday"), resque_job(5))
    await r.rpush(f"resque:queue:{queue}", resque_job(99))  # the default namespace: ignored
    snapshot = await open_queue("resque", queue, keyPrefix="myapp").sample()
    assert snapshot.depth == 2
    assert snapshot.oldest_enqueued_at is None
    assert snapshot.warnings == ("unparseable_timestamp",)


async def test_resque_workers_and_in_flight_from_the_worker_registry(
    r: aioredis.Redis, token: str, open_queue: Callable[..., QueueAdapter]
) -> None:
    """The registry as Resque 3.0 writes it (``register_worker``, ``working_on``,
    ``heartbeat!``), under a namespace of this test's own."""
    ns, queue = f"qas-{token}", "images"
    now = time.time()

    async def worker(id_: str, beat_ago: float | None, running: str | None = None) -> None:
        await r.sadd(f"{ns}:workers", id_)
        if beat_ago is not None:
            beat = datetime.fromtimestamp(now - beat_ago, UTC).isoformat(timespec="seconds")
            await r.hset(f"{ns}:workers:heartbeat", id_, beat)
        if running is not None:
            work = {
                "queue": running,
                "run_at": "2026-01-01T00:00:00Z",
                "payload": json.loads(resque_job()),
            }
            await r.set(f"{ns}:worker:{id_}", json.dumps(work, separators=(",", ":")))

    await r.rpush(f"{ns}:queue:{queue}", resque_job(), resque_job())
    await worker("web-1:101:images,mail", 10, running=queue)
    await worker("web-1:102:*", 20, running="mail")
    await worker("web-2:201:im*,!imports", 30, running=queue)
    await worker("web-2:202:mail", 40)  # another queue only
    await worker(
        "web-3:301:images", 301, running=queue
    )  # its heartbeat is older than prune_interval
    await worker("old-1:401:!images,*", None)  # skips the queue; no heartbeat (Resque before 2)
    snapshot = await open_queue("resque", queue, keyPrefix=ns).sample()
    assert snapshot.depth == 2
    assert snapshot.consumers == 3 and snapshot.in_flight == 2


async def test_resque_counts_from_the_workers_counters_however_often_the_list_empties(
    r: aioredis.Redis, token: str, open_queue: Callable[..., QueueAdapter]
) -> None:
    """Jobs pushed and taken between two samples, the list empty at both, counted from what
    Resque 3.0 writes as a job starts (``working_on``) and ends (``done_working``'s pipeline:
    ``DEL worker:<id>``, ``INCRBY stat:processed 1``, ``INCRBY stat:processed:<id> 1``)."""
    ns, queue = f"qas-{token}", "images"
    beat = datetime.now(UTC).isoformat(timespec="seconds")
    alone, other, shared = "web-1:101:images", "web-1:102:mail", "web-2:201:images,mail"
    for id_ in (alone, other, shared):
        await r.sadd(f"{ns}:workers", id_)
        await r.hset(f"{ns}:workers:heartbeat", id_, beat)

    async def take(worker: str, queue_name: str) -> None:
        assert await r.lpop(f"{ns}:queue:{queue_name}") is not None
        work = {"queue": queue_name, "run_at": beat, "payload": json.loads(resque_job())}
        await r.set(f"{ns}:worker:{worker}", json.dumps(work, separators=(",", ":")))

    async def end(worker: str) -> None:
        async with r.pipeline(transaction=False) as pipe:
            pipe.delete(f"{ns}:worker:{worker}")
            pipe.incrby(f"{ns}:stat:processed", 1)
            pipe.incrby(f"{ns}:stat:processed:{worker}", 1)
            await pipe.execute()

    adapter = open_queue("resque", queue, keyPrefix=ns)
    first = await adapter.sample()
    for _ in range(5):  # pushed and done: the list is empty again
        await r.rpush(f"{ns}:queue:{queue}", resque_job())
        await take(alone, queue)
        await end(alone)
    await r.rpush(f"{ns}:queue:{queue}", resque_job())
    await take(alone, queue)  # running at the sample
    await r.rpush(f"{ns}:queue:mail", resque_job())
    await take(other, "mail")  # another queue's worker: its jobs are not this queue's
    await end(other)
    second = await adapter.sample()
    assert second.depth == 0 and second.in_flight == 1
    assert second.counts_source == "resque-worker-counters" and second.counts_exact
    assert second.arrivals_total is not None and first.arrivals_total is not None
    assert second.completions_total is not None and first.completions_total is not None
    assert second.arrivals_total - first.arrivals_total == 6
    assert second.completions_total - first.completions_total == 5

    await end(alone)
    await r.rpush(f"{ns}:queue:{queue}", resque_job())
    await take(shared, queue)
    await end(shared)  # a worker of two queues ended a job: whose, Resque does not say
    third = await adapter.sample()
    assert third.counts_source != "resque-worker-counters"

    await r.rpush(f"{ns}:queue:{queue}", resque_job(), resque_job())
    await take(alone, queue)
    await end(alone)
    # the worker ends a job and unregisters before the next sample: its counter goes with it
    await r.delete(f"{ns}:stat:processed:{alone}")
    fourth = await adapter.sample()
    assert fourth.depth == 1
    assert fourth.counts_source == "resque-worker-counters" and not fourth.counts_exact


async def test_resque_steady_traffic_counts_are_exact(
    r: aioredis.Redis,
    sync_redis: redis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    queue = f"images-{token}"
    key = f"resque:queue:{queue}"
    await r.rpush(key, *(resque_job() for _ in range(100)))

    def push() -> bool:
        sync_redis.rpush(key, resque_job())
        return True

    def pop() -> bool:
        return sync_redis.lpop(key) is not None

    producer, consumer = Steady(60, push), Steady(40, pop)
    first, snapshots, last = await sample_steady_traffic(
        open_queue("resque", queue), producer, consumer
    )
    assert_counts_match(first, snapshots, last, producer.done, consumer.done)
    assert last.depth == 100 + producer.done - consumer.done
    assert_unknown_age(last)


# --- Huey ---------------------------------------------------------------------------------------


def resize(size: int) -> int:
    """The task of the Huey tests (never run: the tests enqueue and take jobs only)."""
    return size


@pytest.fixture
def huey_app(redis_url: str, r: aioredis.Redis) -> Iterator[Callable[[str], tuple[Any, Any]]]:
    """A ``RedisHuey(name)`` on the test Redis and its ``resize`` task."""
    hueys: list[Any] = []

    def open_(name: str) -> tuple[Any, Any]:
        huey = RedisHuey(name, url=redis_url, results=False)
        hueys.append(huey)
        return huey, huey.task(name=f"resize_{name}")(resize)

    yield open_
    for huey in hueys:
        huey.storage.pool.disconnect()


async def test_huey_depth_and_unknown_age(
    huey_app: Callable[[str], tuple[Any, Any]],
    r: aioredis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    name = f"my-app.{token}"  # huey keeps [A-Za-z0-9_] of it: huey.redis.myapp<token>
    huey, task = huey_app(name)
    for size in (1, 2, 3):
        task(size)
    assert await r.llen(f"huey.redis.myapp{token}") == 3

    snapshot = await open_queue("huey", name).sample()  # the name as written in the code
    assert snapshot.depth == huey.pending_count() == 3
    assert snapshot.in_flight is None and snapshot.consumers is None
    assert_unknown_age(snapshot)


async def test_huey_steady_traffic_counts_are_exact(
    huey_app: Callable[[str], tuple[Any, Any]], token: str, open_queue: Callable[..., QueueAdapter]
) -> None:
    name = f"steady_{token}"
    huey, task = huey_app(name)
    for size in range(100):
        task(size)
    sizes = itertools.count(100)

    def enqueue() -> bool:
        task(next(sizes))
        return True

    def dequeue() -> bool:
        return huey.dequeue() is not None  # BRPOP, as the consumer takes jobs

    producer, consumer = Steady(60, enqueue), Steady(40, dequeue)
    first, snapshots, last = await sample_steady_traffic(
        open_queue("huey", name), producer, consumer
    )
    assert_counts_match(first, snapshots, last, producer.done, consumer.done)
    assert last.depth == huey.pending_count() == 100 + producer.done - consumer.done
    assert_unknown_age(last)
