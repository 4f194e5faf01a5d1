"""What the adaptive sampler reads, against a real Redis: a queue near its target is read when
KEDA's call asks (the answer shows a job pushed after the last background sample), a backlog
where nothing moves relaxes to the slow bound while one with work flowing through it keeps
four samples in its rate window, and an unchanged queue's sample leaves its oldest job and an
absent worker registry unread (counted by a private Redis's INFO commandstats); a trigger's
``slowSampleInterval`` bounds its idle queue's interval."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.metrics import Metrics
from scaler.sample_schedule import Urgency
from scaler.sampler import SamplerRegistry
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec
from tests.integration.conftest import RedisProcess

pytestmark = pytest.mark.integration

SLOW = 0.8


@pytest.fixture
async def r(own_redis: RedisProcess) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(own_redis.url)
    yield client
    await client.aclose()


@pytest.fixture
async def samplers() -> AsyncIterator[SamplerRegistry]:
    registry = SamplerRegistry(
        open_adapter, Metrics(), slow_interval=SLOW, connections=Connections()
    )
    yield registry
    await registry.aclose()


def sidekiq_spec(
    url: str, queue: str, *, target: str, window: str = "10s", **more: str
) -> TriggerSpec:
    metadata = {"url": url, "queue": queue, "format": "sidekiq", "workerThroughput": "1"}
    metadata |= {"targetAge": target, "sampleInterval": "100ms", "rateWindow": window}
    return parse_metadata(metadata | more)


def job(enqueued_at: float) -> str:
    return json.dumps(
        {"class": "J", "args": [], "jid": uuid.uuid4().hex, "enqueued_at": enqueued_at}
    )


async def commands(r: aioredis.Redis) -> dict[str, int]:
    stats = await r.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def spent(before: dict[str, int], after: dict[str, int], name: str) -> int:
    return after.get(name, 0) - before.get(name, 0)


async def test_a_queue_near_its_target_is_read_when_kedas_call_asks(
    own_redis: RedisProcess, r: aioredis.Redis, samplers: SamplerRegistry
) -> None:
    now = time.time()
    await r.lpush("queue:near", *(job(now - age) for age in (100, 90, 80)))  # over 60 s
    sampler = samplers.get(sidekiq_spec(own_redis.url, "near", target="60s"))
    await sampler.history(first_timeout=1.0)
    await asyncio.sleep(2.0)  # relaxed in the background: 0.2, 0.4, 0.8 s apart
    assert sampler.urgency is Urgency.NEAR_TARGET
    assert sampler.actual_interval == SLOW
    await sampler.wait_for_sample(2.0)  # a background sample; the next one 0.64 s or more
    await asyncio.sleep(0.3)  # later: the newest is older than the fast interval (0.1 s)
    await r.lpush("queue:near", job(time.time()))  # after the last background sample
    history = await sampler.history(first_timeout=1.0)  # KEDA's call: read now
    assert history[-1].depth == 4
    assert history[-1].oldest_enqueued_at == pytest.approx(now - 100, abs=0.01)


async def test_a_still_backlog_relaxes_to_the_slow_bound_a_flowing_one_keeps_its_window(
    own_redis: RedisProcess, r: aioredis.Redis, samplers: SamplerRegistry
) -> None:
    running = True

    async def flow() -> None:  # a job in and a job out, the depth unchanged
        while running:
            await r.lpush("queue:flowing", job(time.time()))
            await r.rpop("queue:flowing")
            await asyncio.sleep(0.1)

    for name in ("still", "flowing"):
        await r.lpush(f"queue:{name}", *(job(time.time()) for _ in range(3)))
    flowing_task = asyncio.create_task(flow())
    try:
        # a window of 1.6 s: four samples in it are 0.4 s apart, under the 0.8 s slow bound
        still = samplers.get(sidekiq_spec(own_redis.url, "still", target="1h", window="1600ms"))
        moving = samplers.get(sidekiq_spec(own_redis.url, "flowing", target="1h", window="1600ms"))
        await asyncio.sleep(3.0)
        assert still.urgency is Urgency.STEADY and moving.urgency is Urgency.STEADY
        assert still.actual_interval == SLOW
        assert moving.actual_interval == pytest.approx(0.4)
    finally:
        running = False
        await flowing_task


async def test_an_unchanged_queue_leaves_its_oldest_job_and_an_absent_registry_unread(
    own_redis: RedisProcess, r: aioredis.Redis
) -> None:
    connections = Connections()
    now = time.time()
    for name in ("a", "b"):
        await r.lpush(f"queue:{name}", *(job(now - age) for age in (30, 20, 10)))
    a, b = (
        open_adapter(sidekiq_spec(own_redis.url, name, target="1h").source, connections)
        for name in ("a", "b")
    )
    try:
        await a.sample()
        await b.sample()  # the registry (no Sidekiq process) read missing by a's sample
        before = await commands(r)
        first_a, first_b = await a.sample(), await b.sample()
        after = await commands(r)
        assert spent(before, after, "llen") == 2 and spent(before, after, "lpos") == 2
        assert spent(before, after, "lindex") == 0  # the oldest jobs held, nothing taken
        assert spent(before, after, "exists") <= 1  # the registry: read once for both, if at all
        assert first_a.oldest_enqueued_at == pytest.approx(now - 30, abs=0.01)
        assert first_b.oldest_enqueued_at == pytest.approx(now - 30, abs=0.01)

        await r.rpop("queue:a")  # the oldest taken: read again
        taken = await a.sample()
        assert taken.depth == 2 and taken.oldest_enqueued_at == pytest.approx(now - 20, abs=0.01)
        await r.lpush("queue:a", job(now))  # a push and a take: the length as it was
        await r.rpop("queue:a")
        both = await a.sample()
        assert both.depth == 2 and both.oldest_enqueued_at == pytest.approx(now - 10, abs=0.01)
    finally:
        await a.aclose()
        await b.aclose()
        await connections.aclose()


async def test_a_triggers_slow_sample_interval_bounds_its_idle_queue(
    own_redis: RedisProcess, samplers: SamplerRegistry
) -> None:
    """The server's slow bound is 0.8 s; a trigger asking 0.4 s has its idle queue read at
    most that far apart, and one on an empty queue of its own without the key relaxes to 0.8 s."""
    bounded = samplers.get(
        sidekiq_spec(own_redis.url, "bounded", target="1h", slowSampleInterval="400ms")
    )
    free = samplers.get(sidekiq_spec(own_redis.url, "free", target="1h"))
    await asyncio.sleep(3.0)
    assert bounded.urgency is Urgency.IDLE and free.urgency is Urgency.IDLE
    assert bounded.actual_interval == pytest.approx(0.4)
    assert free.actual_interval == SLOW
