"""Ages for queues whose jobs carry no enqueue time (Resque here), through the real server: the
arrival-history estimate once the scaler has seen the jobs arrive, a lower bound before; and the
queue's age gauge on /metrics, which shows that estimate at each sample, between KEDA's calls too."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.probe import probe
from scaler.server import RunningServer
from tests.integration.scrape import scrape

pytestmark = pytest.mark.integration

AGE_GAUGE = "queue_age_scaler_queue_oldest_age_seconds"


@pytest.fixture
async def resque_queue(redis_url: str) -> AsyncIterator[tuple[aioredis.Redis, str]]:
    client = aioredis.Redis.from_url(redis_url)
    queue = f"qas-est-{uuid.uuid4().hex[:8]}"
    yield client, queue
    await client.delete(f"resque:queue:{queue}")
    await client.aclose()


async def push(client: aioredis.Redis, queue: str, count: int) -> None:
    jobs = [json.dumps({"class": "Mailer", "args": [uuid.uuid4().hex]}) for _ in range(count)]
    await client.rpush(f"resque:queue:{queue}", *jobs)


async def test_age_is_estimated_from_the_arrival_history(
    stub: pb_grpc.ExternalScalerAsyncStub, resque_queue: tuple[aioredis.Redis, str], redis_url: str
) -> None:
    client, queue = resque_queue
    so = pb.ScaledObjectRef(
        name="mailer", namespace="shop",
        scalerMetadata={"url": redis_url, "queue": queue, "format": "resque", "metric": "age", "sampleInterval": "200ms", "rateWindow": "5s"},
    )  # fmt: skip
    await stub.GetMetricSpec(so)  # starts the sampler before any job arrives
    await asyncio.sleep(0.5)
    first_batch = time.time()
    await push(client, queue, 5)
    await asyncio.sleep(2.0)
    await push(client, queue, 5)
    await asyncio.sleep(1.0)
    await client.lpop(f"resque:queue:{queue}", 3)  # a worker takes three of the first batch
    await asyncio.sleep(0.5)
    reply = await stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=so, metricName=f"queue-age-age-{queue}")
    )
    true_age = time.time() - first_batch
    # the oldest waiting job is the 4th of the first batch: within one interval + 5%
    assert reply.metricValues[0].metricValueFloat == pytest.approx(
        true_age, abs=0.2 + 0.05 * true_age + 0.3
    )


async def test_jobs_older_than_the_history_give_a_lower_bound(
    resque_queue: tuple[aioredis.Redis, str], redis_url: str
) -> None:
    client, queue = resque_queue
    await push(client, queue, 20)  # already waiting when the scaler starts
    report = await probe(
        {
            "url": redis_url,
            "queue": queue,
            "format": "resque",
            "workerThroughput": "1",
            "sampleInterval": "0.25s",
        },
        {},
        duration=1.5,
    )
    assert report["age_precision"] == "lower-bound"
    assert report["age_source"] == "arrival-history"
    # all the scaler knows: the jobs are at least as old as its history (about 1.5 s)
    assert 1.0 <= report["oldest_age_seconds"] <= 2.0
    assert report["depth"] == 20


@pytest.mark.timeout(30)
async def test_the_gauge_shows_the_estimated_age_of_jobs_without_timestamps(
    scaler: RunningServer,
    stub: pb_grpc.ExternalScalerAsyncStub,
    resque_queue: tuple[aioredis.Redis, str],
    redis_url: str,
) -> None:
    client, queue = resque_queue
    so = pb.ScaledObjectRef(
        name="mailer", namespace="shop",
        scalerMetadata={"url": redis_url, "queue": queue, "format": "resque", "metric": "age", "targetAge": "30s", "sampleInterval": "200ms", "rateWindow": "5s"},
    )  # fmt: skip
    await stub.GetMetricSpec(so)  # starts the sampler before any job arrives
    await asyncio.sleep(0.5)
    first_batch = time.time()
    await push(client, queue, 5)
    await asyncio.sleep(2.0)
    await push(client, queue, 5)
    await asyncio.sleep(1.0)
    await client.lpop(f"resque:queue:{queue}", 3)  # a worker takes three of the first batch

    # no GetMetrics since the jobs came: the sampler itself keeps the gauge up to date, at its
    # next sample (the queue changed: at once; a steady one relaxes between them), so the first
    # scrape that shows the three taken is within a scrape's pause of that sample
    labels = (("broker", "redis"), ("format", "resque"), ("queue", queue))
    deadline = time.monotonic() + 5.0
    while True:
        samples = await scrape(scaler.metrics_port)
        true_age = time.time() - first_batch
        if samples.get(("queue_age_scaler_queue_depth", labels)) == 7:
            break
        assert time.monotonic() < deadline, "the sampler did not see the three jobs taken"
        await asyncio.sleep(0.1)
    # the oldest waiting job is the 4th of the first batch: within one interval + 5%
    assert samples[(AGE_GAUGE, labels)] == pytest.approx(true_age, abs=0.2 + 0.05 * true_age + 0.3)

    # and it is the age KEDA is given, whose precision and source the trigger's gauge tells
    reply = await stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=so, metricName=f"queue-age-age-{queue}")
    )
    samples = await scrape(scaler.metrics_port)
    assert samples[(AGE_GAUGE, labels)] == pytest.approx(
        reply.metricValues[0].metricValueFloat, abs=0.5
    )
    trigger = (("metric", "age"), ("namespace", "shop"), ("queue", queue), ("scaled_object", "mailer"))  # fmt: skip
    precision = (("precision", "estimate"), ("signal", "age"), ("source", "arrival-history"))
    assert samples[("queue_age_scaler_signal_precision", tuple(sorted(trigger + precision)))] == 1
