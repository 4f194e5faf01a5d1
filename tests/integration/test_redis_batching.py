"""Pipelined reads against a real Redis: the adapters of every Redis format, sampled together
through one server's connections (their round trips batched into pipelines), give the same
snapshots as the same adapters each making round trips of their own; a queue whose key has the
wrong type fails alone inside a batch; 1,000 queues sampled at once take a few round trips."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from brokers.base import QueueAdapter, QueueSnapshot
from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.errors import QueueMisconfigured
from scaler.spec import parse_metadata

pytestmark = pytest.mark.integration


@pytest.fixture
async def prefix(redis_url: str) -> AsyncIterator[str]:
    """A key prefix of this test's own; every key holding it is deleted afterwards."""
    token = f"qas-batch-{uuid.uuid4().hex[:10]}"
    yield token
    client = aioredis.Redis.from_url(redis_url)
    keys = [key async for key in client.scan_iter(match=f"*{token}*", count=1000)]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def lay_out_every_format(r: aioredis.Redis, p: str) -> dict[str, dict[str, str]]:
    """One queue per Redis format, with waiting jobs, jobs in flight and workers where the
    format keeps them, written as the libraries lay them out; the trigger metadata of each."""
    now = time.time()
    q = "jobs"
    # Sidekiq (namespace p): the list, one live process listening to the queue, one job running
    for age in (30, 20, 10):
        await r.lpush(
            f"{p}:queue:{q}", json.dumps({"class": "J", "args": [], "enqueued_at": now - age})
        )
    await r.sadd(f"{p}:processes", "host:1")
    info = json.dumps({"queues": [q], "concurrency": 5})
    await r.hset(f"{p}:host:1", mapping={"info": info, "beat": str(now), "quiet": "false"})
    work = json.dumps({"queue": q, "payload": "{}", "run_at": now - 3}, separators=(",", ":"))
    await r.hset(f"{p}:host:1:work", "tid1", work)
    # RQ (prefix p): ids at the head, their job hashes, a started job, a worker with counters
    for i, age in enumerate((40, 25)):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(now - age))
        await r.rpush(f"{p}:queue:rq{q}", f"id{i}")
        await r.hset(f"{p}:job:id{i}", "enqueued_at", stamp)
    await r.zadd(f"{p}:wip:rq{q}", {"running": now + 60})
    await r.sadd(f"{p}:workers:rq{q}", f"{p}:worker:w1")
    await r.hset(
        f"{p}:worker:w1",
        mapping={"queues": f"rq{q}", "successful_job_count": "7", "failed_job_count": "1"},
    )
    # Dramatiq (prefix p): ids and their messages
    for i, age in enumerate((15, 5)):
        await r.rpush(f"{p}:dq{q}", f"m{i}")
        message = json.dumps({"message_id": f"m{i}", "message_timestamp": int((now - age) * 1000)})
        await r.hset(f"{p}:dq{q}.msgs", f"m{i}", message)
    # Resque (prefix p): payloads at the head, no worker registered
    for age in (12, 6):
        await r.rpush(
            f"{p}:queue:rs{q}", json.dumps({"class": "J", "args": [], "timestamp": now - age})
        )
    # Huey (prefix p): pickled messages, no time
    await r.lpush(f"{p}.hueyjobs", b"\x80\x04job-a", b"\x80\x04job-b")
    # a plain list with a time field
    for age in (9, 3):
        await r.lpush(f"{p}:lst{q}", json.dumps({"t": now - age}))
    # Celery (global_keyprefix p): a priority-0 list and a priority-3 one, one task unacked
    for step, age in (("", 8), ("\x06\x163", 4)):
        body = {
            "properties": {"published_at": now - age, "delivery_tag": f"tag{age}"},
            "headers": {},
        }
        await r.lpush(f"{p}:cel{q}{step}", json.dumps(body))
    delivery = json.dumps([{"properties": {"delivery_tag": "t9"}, "headers": {}}, "", f"cel{q}"])
    await r.hset(f"{p}:unacked", "t9", delivery)
    # arq: a sorted set of job ids scored by their time (ms), one of them running
    arq_key = f"{p}:arq"
    await r.zadd(arq_key, {f"{p}a1": (now - 20) * 1000, f"{p}a2": (now - 7) * 1000})
    await r.set(f"arq:in-progress:{p}a1", b"1", px=60_000)
    # a stream with a consumer group that took one of three entries
    stream = f"{p}:stream"
    for _ in range(3):
        await r.xadd(stream, {"job": "x"})
    await r.xgroup_create(stream, "workers", id="0")
    await r.xreadgroup("workers", "c1", {stream: ">"}, count=1)
    # BullMQ (prefix p): two waiting jobs, one active, the id counter and an events stream
    bull = f"{p}:bq{q}"
    for job_id, age in (("1", 11), ("2", 2)):
        await r.lpush(f"{bull}:wait", job_id)
        await r.hset(
            f"{bull}:{job_id}", mapping={"timestamp": int((now - age) * 1000), "opts": "{}"}
        )
    await r.lpush(f"{bull}:active", "0")
    await r.set(f"{bull}:id", 2)
    await r.xadd(f"{bull}:events", {"event": "added", "jobId": "2"})

    def meta(fmt: str, queue: str, **layout: str) -> dict[str, str]:
        return {"queue": queue, "format": fmt, "workerThroughput": "1", **layout}

    return {
        "sidekiq": meta("sidekiq", q, keyPrefix=p),
        "rq": meta("rq", f"rq{q}", keyPrefix=p),
        "dramatiq": meta("dramatiq", f"dq{q}", keyPrefix=p),
        "resque": meta("resque", f"rs{q}", keyPrefix=p),
        "huey": meta("huey", "hueyjobs", keyPrefix=p),
        "list": meta("list", f"lst{q}", keyPrefix=f"{p}:", timestampField="t"),
        "celery": meta("celery", f"cel{q}", keyPrefix=f"{p}:"),
        "arq": meta("arq", arq_key),
        "stream": meta("stream", stream, consumerGroup="workers"),
        "bullmq": meta("bullmq", f"bq{q}", keyPrefix=p),
    }


def without_clock(snapshot: QueueSnapshot) -> QueueSnapshot:
    """The snapshot with the moments it was taken at left out (two samples are never taken at
    the same instant), and so the workers' figures' ages (a heartbeat's age at the sample); the
    oldest job's enqueue time is compared on its own (a stream's is its entry id's time set
    against Redis's clock at the sample, which moves between the two)."""
    readings = snapshot.readings
    return dataclasses.replace(
        snapshot,
        observed_at=0.0,
        counts_observed_at=None,
        oldest_enqueued_at=None,
        readings=dataclasses.replace(
            readings,
            in_flight=dataclasses.replace(readings.in_flight, age=0.0),
            consumers=dataclasses.replace(readings.consumers, age=0.0),
            slots=dataclasses.replace(readings.slots, age=0.0),
        ),
    )


def open_all(
    metadata: dict[str, dict[str, str]], redis_url: str, connections: Connections
) -> dict[str, QueueAdapter]:
    return {
        name: open_adapter(parse_metadata({"url": redis_url, **meta}).source, connections)
        for name, meta in metadata.items()
    }


async def sample_all(adapters: dict[str, QueueAdapter]) -> dict[str, QueueSnapshot]:
    """Every adapter's sample, all started in the same turn of the event loop."""
    snapshots = await asyncio.gather(*(adapter.sample() for adapter in adapters.values()))
    return dict(zip(adapters, snapshots, strict=True))


async def test_every_redis_format_reads_the_same_batched_as_unbatched(
    redis_url: str, prefix: str
) -> None:
    r = aioredis.Redis.from_url(redis_url)
    metadata = await lay_out_every_format(r, prefix)
    await r.aclose()
    # a Redis that never ran the adapters' scripts answers NOSCRIPT to the first EVALSHA of
    # each: load them first, so both runs below send the same commands whatever ran before
    warm_connections = Connections(batch=False)
    warm = open_all(metadata, redis_url, warm_connections)
    await sample_all(warm)
    for adapter in warm.values():
        await adapter.aclose()
    await warm_connections.aclose()
    batched_connections, alone_connections = Connections(), Connections(batch=False)
    batched = open_all(metadata, redis_url, batched_connections)
    alone = open_all(metadata, redis_url, alone_connections)
    try:
        for _ in range(2):  # the second sample follows the markers and hashes of the first
            together = await sample_all(batched)
            apart = await sample_all(alone)
            for name in metadata:
                one, other = together[name], apart[name]
                assert without_clock(one) == without_clock(other), name
                if one.oldest_enqueued_at is None or other.oldest_enqueued_at is None:
                    assert one.oldest_enqueued_at is other.oldest_enqueued_at is None, name
                else:
                    assert one.oldest_enqueued_at == pytest.approx(
                        other.oldest_enqueued_at, abs=0.05
                    )
        # the figures are the layouts', not an agreement on nothing
        assert together["sidekiq"].depth == 3 and together["sidekiq"].in_flight == 1
        assert together["sidekiq"].consumers == 1
        assert together["rq"].depth == 2 and together["rq"].in_flight == 1
        assert together["celery"].depth == 2
        assert together["arq"].depth == 1 and together["arq"].in_flight == 1
        assert together["stream"].depth == 2 and together["stream"].in_flight == 1
        assert together["bullmq"].depth == 2 and together["bullmq"].in_flight == 1
        assert all(s.depth for s in together.values())
        sent_together = batched_connections.traffic(redis_url)
        sent_apart = alone_connections.traffic(redis_url)
        # the same commands (scripts by hash once loaded), far fewer round trips
        assert sent_together.commands == sent_apart.commands
        assert sent_together.round_trips * 3 <= sent_apart.round_trips, (sent_together, sent_apart)
    finally:
        for adapter in (*batched.values(), *alone.values()):
            await adapter.aclose()
        await batched_connections.aclose()
        await alone_connections.aclose()


async def test_a_queue_of_the_wrong_type_fails_alone_inside_a_batch(
    redis_url: str, prefix: str, connections: Connections
) -> None:
    r = aioredis.Redis.from_url(redis_url)
    await r.set(f"{prefix}:queue:broken", "not a list")
    for i in range(5):
        await r.lpush(
            f"{prefix}:queue:ok{i}", json.dumps({"class": "J", "enqueued_at": time.time()})
        )
    await r.aclose()

    def sidekiq(queue: str) -> QueueAdapter:
        meta = {"url": redis_url, "queue": queue, "format": "sidekiq", "workerThroughput": "1"}
        return open_adapter(parse_metadata(meta | {"keyPrefix": prefix}).source, connections)

    adapters = [sidekiq("broken"), *(sidekiq(f"ok{i}") for i in range(5))]
    try:
        results = await asyncio.gather(*(a.sample() for a in adapters), return_exceptions=True)
        assert isinstance(results[0], QueueMisconfigured)
        assert "is not a list" in str(results[0])
        assert [s.depth for s in results[1:] if isinstance(s, QueueSnapshot)] == [1] * 5
    finally:
        for adapter in adapters:
            await adapter.aclose()


async def test_a_thousand_queues_sampled_at_once_take_a_few_round_trips(
    redis_url: str, prefix: str, connections: Connections
) -> None:
    r = aioredis.Redis.from_url(redis_url)
    async with r.pipeline(transaction=False) as pipe:
        for i in range(1000):
            pipe.rpush(f"{prefix}:q{i}", json.dumps({"t": time.time()}))
        await pipe.execute()
    await r.aclose()
    adapters = [
        open_adapter(
            parse_metadata(
                {"url": redis_url, "queue": f"q{i}", "format": "list", "keyPrefix": f"{prefix}:"}
                | {"timestampField": "t", "workerThroughput": "1"}
            ).source,
            connections,
        )
        for i in range(1000)
    ]
    try:
        traffic = connections.traffic(redis_url)
        before = dataclasses.replace(traffic)
        for _ in range(2):
            snapshots = await asyncio.gather(*(a.sample() for a in adapters))
            assert [s.depth for s in snapshots] == [1] * 1000
        trips = traffic.round_trips - before.round_trips
        commands = traffic.commands - before.commands
        # one script per list and sample (2,000), in pipelines of at most 512 commands; the
        # first may load the script with EVAL again (NOSCRIPT)
        assert 2000 <= commands <= 4000
        assert trips <= 2 * (1000 // 512 + 1) + 4, trips
    finally:
        for adapter in adapters:
            await adapter.aclose()
