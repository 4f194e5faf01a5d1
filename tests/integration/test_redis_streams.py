"""The stream adapter against a real Redis: XADD producers, XREADGROUP/XACK consumers.

Each test uses a stream key holding a fresh token and deletes it afterwards.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from brokers import redis_streams
from brokers.base import Precision, QueueAdapter, QueueSnapshot
from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.errors import QueueMisconfigured
from scaler.spec import parse_metadata

pytestmark = pytest.mark.integration

AGE_TOLERANCE = 1.0
GROUP = "workers"
BACKLOG = 10  # entries the steady-load consumers leave waiting


@pytest.fixture
async def r(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def stream(r: aioredis.Redis) -> AsyncIterator[str]:
    key = f"qas-stream-{uuid.uuid4().hex[:10]}"
    yield key
    await r.delete(key)


OpenStream = Callable[..., QueueAdapter]


@pytest.fixture
async def open_stream(connections: Connections, redis_url: str) -> AsyncIterator[OpenStream]:
    """Opens adapters the way the scaler does (trigger metadata -> source -> registry)."""
    adapters: list[QueueAdapter] = []

    def open_(stream: str, group: str = GROUP) -> QueueAdapter:
        metadata = {
            "url": redis_url,
            "queue": stream,
            "format": "stream",
            "consumerGroup": group,
            "workerThroughput": "1",
        }
        adapter = open_adapter(parse_metadata(metadata).source, connections)
        adapters.append(adapter)
        return adapter

    yield open_
    for adapter in adapters:
        await adapter.aclose()


def ms_ago(seconds: float) -> int:
    return int((time.time() - seconds) * 1000)


async def add_past(r: aioredis.Redis, stream: str, *seconds_ago: float) -> list[bytes | str]:
    """Entries with explicit ids ``<ms>-0``, as if added that long ago."""
    ids: list[bytes | str] = []
    for seconds in seconds_ago:
        ids.append(await r.xadd(stream, {"job": "x"}, id=f"{ms_ago(seconds)}-0"))
    return ids


async def read(r: aioredis.Redis, stream: str, consumer: str, count: int) -> list[bytes]:
    """XREADGROUP ``count`` new entries; their ids."""
    reply: Any = await r.xreadgroup(GROUP, consumer, {stream: ">"}, count=count)
    return [entry_id for _, entries in reply for entry_id, _ in entries]


def age(snapshot: QueueSnapshot) -> float:
    assert snapshot.oldest_enqueued_at is not None, snapshot
    assert snapshot.oldest_precision is Precision.EXACT
    assert snapshot.oldest_source == "entry-id"
    return snapshot.observed_at - snapshot.oldest_enqueued_at


async def test_depth_is_undelivered_in_flight_is_pending(
    r: aioredis.Redis, stream: str, open_stream: OpenStream
) -> None:
    await add_past(r, stream, 30.0, 20.0, 10.0)
    await r.xadd(stream, {"job": "x"})
    await r.xgroup_create(stream, GROUP, id="0")
    adapter = open_stream(stream)

    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.consumers) == (4, 0, 0)
    assert age(snapshot) == pytest.approx(30.0, abs=AGE_TOLERANCE)
    assert (snapshot.arrivals_total, snapshot.completions_total) == (4, 0)
    assert snapshot.counts_exact and snapshot.counts_source == "stream-counters"
    assert snapshot.warnings == ()

    taken = await read(r, stream, "c1", 1)
    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.consumers) == (3, 1, 1)
    assert age(snapshot) == pytest.approx(20.0, abs=AGE_TOLERANCE)  # the first undelivered

    await r.xack(stream, GROUP, *taken)
    await read(r, stream, "c1", 3)
    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.oldest_enqueued_at) == (0, 3, None)
    assert (snapshot.arrivals_total, snapshot.completions_total) == (4, 1)


async def test_counts_are_exact_under_steady_load(
    r: aioredis.Redis, stream: str, open_stream: OpenStream
) -> None:
    """One producer, two consumers that read, work a little and ack; sampled between steps.

    The consumers leave the newest ``BACKLOG`` entries undelivered, so every sample sees a real,
    short backlog however the machine's load shifts the pace of producer and consumers.
    """
    await r.xgroup_create(stream, GROUP, id="$", mkstream=True)
    adapter = open_stream(stream)
    lock = asyncio.Lock()  # held per step, and while sampling: the test's counts are exact then
    counts = {"added": 0, "read": 0, "acked": 0}
    running = True

    async def produce() -> None:
        while running:
            async with lock:
                await r.xadd(stream, {"job": "x"})
                counts["added"] += 1
            await asyncio.sleep(0.004)

    async def consume(name: str) -> None:
        while running:
            async with lock:
                spare = counts["added"] - counts["read"] - BACKLOG
                taken = await read(r, stream, name, min(spare, 10)) if spare > 0 else []
                counts["read"] += len(taken)
            await asyncio.sleep(0.02)
            if taken:
                async with lock:
                    await r.xack(stream, GROUP, *taken)
                    counts["acked"] += len(taken)

    tasks = [asyncio.create_task(work) for work in (produce(), consume("a"), consume("b"))]
    try:
        for _ in range(10):
            await asyncio.sleep(0.2)
            async with lock:
                snapshot = await adapter.sample()
                added, taken, acked = counts["added"], counts["read"], counts["acked"]
            assert snapshot.depth == added - taken
            assert snapshot.in_flight == taken - acked
            assert (snapshot.arrivals_total, snapshot.completions_total) == (added, acked)
            assert snapshot.counts_exact and snapshot.consumers == 2
            if snapshot.depth:
                assert 0 <= age(snapshot) < AGE_TOLERANCE
    finally:
        running = False
        await asyncio.gather(*tasks)
    assert counts["acked"] > 50 and snapshot.depth is not None and snapshot.depth >= BACKLOG


async def test_null_lag_after_setid_counts_the_undelivered_entries(
    r: aioredis.Redis, stream: str, open_stream: OpenStream
) -> None:
    ids = await add_past(r, stream, 50.0, 40.0, 30.0, 20.0, 10.0)
    await r.xgroup_create(stream, GROUP, id="0")
    await r.xgroup_setid(stream, GROUP, id=ids[1])  # an arbitrary id: lag becomes NULL
    (group,) = await r.xinfo_groups(stream)
    assert group["lag"] is None
    snapshot = await open_stream(stream).sample()
    assert (snapshot.depth, snapshot.in_flight) == (3, 0)
    assert age(snapshot) == pytest.approx(30.0, abs=AGE_TOLERANCE)
    assert snapshot.warnings == ()
    assert snapshot.arrivals_total == 5
    assert snapshot.completions_total is None  # entries-read is NULL too


async def test_null_lag_after_xdel_in_the_undelivered_range(
    r: aioredis.Redis, stream: str, open_stream: OpenStream
) -> None:
    ids = await add_past(r, stream, 50.0, 40.0, 30.0, 20.0, 10.0)
    await r.xgroup_create(stream, GROUP, id="0")
    await read(r, stream, "c1", 1)
    await r.xdel(stream, ids[1], ids[3])
    (group,) = await r.xinfo_groups(stream)
    assert group["lag"] is None
    snapshot = await open_stream(stream).sample()
    assert (snapshot.depth, snapshot.in_flight) == (2, 1)
    assert age(snapshot) == pytest.approx(30.0, abs=AGE_TOLERANCE)  # the 40 s one is gone
    assert snapshot.warnings == ()


async def test_a_capped_count_is_a_lower_bound(
    r: aioredis.Redis, stream: str, open_stream: OpenStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_streams, "COUNT_CAP", 3)
    ids = await add_past(r, stream, 60.0, 50.0, 40.0, 30.0, 20.0, 10.0)
    await r.xgroup_create(stream, GROUP, id=ids[0])  # lag NULL once read from
    await read(r, stream, "c1", 1)
    snapshot = await open_stream(stream).sample()
    assert snapshot.depth == 3
    assert snapshot.warnings == ("depth_lower_bound",)
    assert age(snapshot) == pytest.approx(40.0, abs=AGE_TOLERANCE)


async def test_idle_consumers_are_not_counted(
    r: aioredis.Redis, stream: str, open_stream: OpenStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_streams, "MIN_CONSUMER_IDLE", 0.5)
    await add_past(r, stream, 3.0, 2.0, 1.0)
    await r.xgroup_create(stream, GROUP, id="0")
    await read(r, stream, "crashed", 1)
    await r.xgroup_createconsumer(stream, GROUP, "never-read")
    await asyncio.sleep(1.0)
    await read(r, stream, "alive", 1)
    snapshot = await open_stream(stream).sample()
    assert snapshot.consumers == 1
    assert snapshot.in_flight == 2  # the crashed consumer's entry is still pending


async def test_a_missing_group_is_misconfigured(
    r: aioredis.Redis, stream: str, open_stream: OpenStream
) -> None:
    await r.xgroup_create(stream, "others", id="$", mkstream=True)
    with pytest.raises(QueueMisconfigured, match=rf"no consumer group '{GROUP}'.*XGROUP CREATE"):
        await open_stream(stream).sample()


async def test_a_missing_stream_is_an_empty_queue_with_a_warning(
    stream: str, open_stream: OpenStream
) -> None:
    snapshot = await open_stream(stream).sample()
    assert (snapshot.depth, snapshot.in_flight, snapshot.consumers) == (0, 0, 0)
    assert (snapshot.arrivals_total, snapshot.completions_total) == (0, 0)
    assert snapshot.warnings == ("stream_missing",)


async def test_a_key_of_another_type_is_misconfigured(
    r: aioredis.Redis, stream: str, open_stream: OpenStream
) -> None:
    await r.rpush(stream, b"job")
    with pytest.raises(QueueMisconfigured, match="is a list, not a stream"):
        await open_stream(stream).sample()


async def test_ids_that_are_not_times_leave_the_age_unknown(
    r: aioredis.Redis, stream: str, open_stream: OpenStream
) -> None:
    for entry_id in ("1-1", "2-1"):
        await r.xadd(stream, {"job": "x"}, id=entry_id)
    await r.xgroup_create(stream, GROUP, id="0")
    snapshot = await open_stream(stream).sample()
    assert snapshot.depth == 2
    assert (snapshot.oldest_enqueued_at, snapshot.oldest_precision) == (None, Precision.UNKNOWN)
    assert snapshot.warnings == ("entry_id_not_time",)
