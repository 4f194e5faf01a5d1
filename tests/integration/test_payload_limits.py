"""Payloads the scaler will not read whole, on a real Redis: a job nested 100,000 deep, or larger
than ``payloads.MAX_PAYLOAD_BYTES``, leaves its queue answering (its time skipped with a warning,
the age from the arrival history), and a job that stays at an end of its list crosses the
network at most once however many samples read the list."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as aioredis

from brokers import list_ends, redis_registry
from brokers.base import Precision, QueueAdapter
from brokers.connections import Connections
from brokers.payloads import MAX_PAYLOAD_BYTES, TOO_DEEP, TOO_LARGE
from brokers.registry import open_adapter
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.probe import probe
from scaler.spec import parse_metadata
from tests.integration.conftest import RedisProcess

pytestmark = pytest.mark.integration

SAMPLES = 6


def sidekiq_job(age: float, **fields: object) -> bytes:
    stamp = int((time.time() - age) * 1000)
    job = {"class": "W", "args": [1], "jid": uuid.uuid4().hex[:24], "enqueued_at": stamp}
    return json.dumps({**job, **fields}).encode()


def deep_job(depth: int) -> bytes:
    """A Sidekiq job whose args nest ``depth`` arrays."""
    arrays = "[" * depth + "]" * depth
    return f'{{"class": "W", "args": {arrays}, "enqueued_at": {int(time.time() * 1000)}}}'.encode()


async def test_a_job_nested_100000_deep_leaves_the_queue_answering_from_the_arrival_history(
    r: aioredis.Redis,
    token: str,
    redis_url: str,
    stub: pb_grpc.ExternalScalerAsyncStub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    queue = f"deep-{token}"
    await r.lpush(f"queue:{queue}", deep_job(100_000))  # the oldest: Sidekiq pushes at the head
    await r.lpush(f"queue:{queue}", *[sidekiq_job(5) for _ in range(3)])
    metadata = {"url": redis_url, "queue": queue, "format": "sidekiq", "sampleInterval": "0.25s"}
    metadata["workerThroughput"] = "1"

    report = await probe(metadata, {}, duration=1.5)
    assert report["depth"] == 4
    assert report["warnings"] == [TOO_DEEP]
    assert report["age_source"] == "arrival-history"  # not the payload it could not read
    assert report["age_precision"] in (Precision.LOWER_BOUND, Precision.ESTIMATE)
    assert report["oldest_age_seconds"] is not None

    so = pb.ScaledObjectRef(name="deep", namespace="shop", scalerMetadata=metadata)
    for _ in range(5):  # and the server answers, sample after sample
        assert (await stub.IsActive(so)).result is True
        await asyncio.sleep(0.3)
    assert "RecursionError" not in caplog.text
    assert not [record for record in caplog.records if record.exc_info]


@pytest.fixture
async def private_queue(
    connections: Connections, own_redis: RedisProcess
) -> AsyncIterator[tuple[redis.Redis, QueueAdapter]]:
    """A Sidekiq queue on a Redis of this test's own, so that its traffic counters are ours."""
    client = redis.Redis(port=own_redis.port)
    metadata = {"url": own_redis.url, "queue": "big", "format": "sidekiq", "workerThroughput": "1"}
    adapter = open_adapter(parse_metadata(metadata).source, connections)
    yield client, adapter
    await adapter.aclose()
    client.close()


def lindex_calls(client: redis.Redis) -> int:
    """LINDEX calls so far, the script's included (Redis counts the commands scripts run)."""
    stats = client.info("commandstats").get("cmdstat_lindex", {"calls": 0})
    calls: int = stats["calls"]
    return calls


async def test_a_lone_50_mb_job_is_read_into_redis_s_script_once_not_every_sample(
    private_queue: tuple[redis.Redis, QueueAdapter],
) -> None:
    client, adapter = private_queue
    client.lpush("queue:big", sidekiq_job(30, args=["x" * 50_000_000]))
    before = lindex_calls(client)
    snapshots = [await adapter.sample() for _ in range(SAMPLES)]
    assert lindex_calls(client) - before == 1  # measured once (about 0.2 s of Redis's time)
    assert all((s.depth, s.warnings) == (1, (TOO_LARGE,)) for s in snapshots)
    client.lpush("queue:big", sidekiq_job(5))  # the length moves: both ends are looked at again
    grown = await adapter.sample()
    assert (grown.depth, grown.warnings) == (2, (TOO_LARGE,))
    assert lindex_calls(client) - before == 3


def sent_by_redis(client: redis.Redis) -> int:
    stats = client.info("stats")
    sent: int = stats["total_net_output_bytes"]
    return sent


@pytest.mark.parametrize("end", ["oldest", "newest", "both"])
async def test_a_job_that_stays_at_an_end_is_fetched_once(
    private_queue: tuple[redis.Redis, QueueAdapter], end: str
) -> None:
    client, adapter = private_queue
    size = MAX_PAYLOAD_BYTES - 1000  # as large as is read
    big = sidekiq_job(30, args=["x" * (size - 200)])
    small = [sidekiq_job(10) for _ in range(3)]
    # LPUSH: the first pushed is the oldest; "both": the list's only job
    jobs = {"oldest": [big, *small], "newest": [*small, big], "both": [big]}[end]
    client.lpush("queue:big", *jobs)
    before = sent_by_redis(client)
    snapshots = [await adapter.sample() for _ in range(SAMPLES)]
    sent = sent_by_redis(client) - before
    assert size < sent < 2 * size  # once, where every sample would send it SAMPLES times
    oldest = 10 if end == "newest" else 30
    for snapshot in snapshots:
        assert snapshot.depth == len(jobs) and snapshot.warnings == ()
        assert snapshot.observed_at - (snapshot.oldest_enqueued_at or 0) == pytest.approx(
            oldest, abs=2
        )
    assert snapshots[-1].counts_exact


@pytest.mark.parametrize("end", ["oldest", "newest"])
async def test_a_50_mb_job_is_never_fetched_and_its_time_is_skipped(
    private_queue: tuple[redis.Redis, QueueAdapter], end: str
) -> None:
    client, adapter = private_queue
    huge = sidekiq_job(30, args=["x" * 50_000_000])
    small = [sidekiq_job(10) for _ in range(3)]
    client.lpush("queue:big", *([huge, *small] if end == "oldest" else [*small, huge]))
    before = sent_by_redis(client)
    snapshots = [await adapter.sample() for _ in range(SAMPLES)]
    assert sent_by_redis(client) - before < 100_000  # the small jobs and the replies only
    for snapshot in snapshots:
        assert snapshot.depth == 4
    if end == "oldest":  # its time is unknown: the scaler estimates it
        assert all(s.warnings == (TOO_LARGE,) for s in snapshots)
        assert all(s.oldest_enqueued_at is None for s in snapshots)
        assert all(s.oldest_precision is Precision.UNKNOWN for s in snapshots)
        client.rpop("queue:big")  # a worker takes it: the next oldest is read
        taken = await adapter.sample()
        assert (taken.depth, taken.warnings, taken.oldest_precision) == (3, (), Precision.EXACT)
        assert taken.observed_at - (taken.oldest_enqueued_at or 0) == pytest.approx(10, abs=2)
    else:  # the oldest is read; the newest cannot be a marker, so counts are lower bounds
        assert all(s.warnings == () for s in snapshots)
        assert all(s.oldest_precision is Precision.EXACT for s in snapshots)
        client.lpush("queue:big", sidekiq_job(0))
        grown = await adapter.sample()
        assert (grown.depth, grown.arrivals_total, grown.counts_exact) == (5, 1, False)


async def test_an_oversize_end_is_read_again_every_remeasure_every_samples(
    private_queue: tuple[redis.Redis, QueueAdapter], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push and a take within one interval leave the length as it was: the position cannot
    show that the job at an end changed, so it is read again now and then."""
    monkeypatch.setattr(list_ends, "REMEASURE_EVERY", 3)
    client, adapter = private_queue
    client.lpush("queue:big", sidekiq_job(30, args=["x" * 2_000_000]))
    before = lindex_calls(client)
    assert (await adapter.sample()).warnings == (TOO_LARGE,)  # read: 1
    for _ in range(2):  # left unread: 1, 2
        await adapter.sample()
    client.rpop("queue:big")
    client.lpush("queue:big", sidekiq_job(7))  # the same length, another job
    assert (await adapter.sample()).warnings == (TOO_LARGE,)  # left unread: 3
    assert lindex_calls(client) - before == 1
    replaced = await adapter.sample()  # 3 unread samples in a row: read again
    assert lindex_calls(client) - before == 2
    assert (replaced.depth, replaced.warnings) == (1, ())
    assert replaced.observed_at - (replaced.oldest_enqueued_at or 0) == pytest.approx(7, abs=2)


async def test_celery_unacked_entries_are_fetched_once_and_an_oversize_one_never(
    connections: Connections,
    own_redis: RedisProcess,
) -> None:
    client = redis.Redis(port=own_redis.port)
    metadata = {"url": own_redis.url, "queue": "work", "format": "celery", "workerThroughput": "1"}
    adapter = open_adapter(parse_metadata(metadata).source, connections)
    size = 500_000

    def entry(body: int) -> str:  # kombu's [message, exchange, routing_key]
        return json.dumps([{"body": "x" * body, "properties": {}}, "", "work"])

    try:
        client.hset("unacked", mapping={f"tag-{i}": entry(size) for i in range(3)})
        before = sent_by_redis(client)
        snapshots = [await adapter.sample() for _ in range(SAMPLES)]
        sent = sent_by_redis(client) - before
        assert 3 * size < sent < 4 * size  # once each, where HGETALL sent them SAMPLES times
        assert all((s.in_flight, s.warnings) == (3, ()) for s in snapshots)

        client.hset("unacked", "tag-huge", entry(2 * MAX_PAYLOAD_BYTES))
        before = sent_by_redis(client)
        snapshots = [await adapter.sample() for _ in range(SAMPLES)]
        assert sent_by_redis(client) - before < 100_000  # neither the old entries nor the huge one
        assert all((s.in_flight, s.warnings) == (None, (TOO_LARGE,)) for s in snapshots)

        client.hdel("unacked", "tag-huge", "tag-0")  # acked: the count is known again
        assert (await adapter.sample()).in_flight == 2
    finally:
        await adapter.aclose()
        client.close()


def calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {"calls": 0})
    count: int = stats["calls"]
    return count


async def test_the_list_script_is_sent_once_then_named_by_its_hash(
    private_queue: tuple[redis.Redis, QueueAdapter], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sidekiq's missing process registry is read again at every sample, not once a second per
    # Redis, so that the counts below do not depend on how fast the samples come
    monkeypatch.setattr(redis_registry, "MISSING_REUSE", 0.0)
    client, adapter = private_queue
    client.lpush("queue:big", sidekiq_job(5))
    for _ in range(4):
        assert (await adapter.sample()).depth == 1
    # the first EVALSHA finds no script and the round trip is made again with EVAL; so for the
    # script over Sidekiq's process registry, which follows the list's
    assert (calls(client, "eval"), calls(client, "evalsha")) == (2, 8)
    # one LINDEX in all: the first sample reads the oldest job; after it the marker (the
    # newest) is found where it was, so nothing was taken and the oldest is not read again
    assert calls(client, "lindex") == 1
    client.script_flush()  # as a restarted Redis
    assert (await adapter.sample()).depth == 1
    assert (calls(client, "eval"), calls(client, "evalsha")) == (4, 10)
