"""The learned knee through the real server and a real Redis: an RQ queue whose pool the test
plays at the broker (workers registered, their jobs in flight, jobs taken from the queue at the
rate a USL curve gives for that many workers), the server sampling it. After the pool ran at
4, 8, 16 and 32 workers, GetMetrics is clamped at the knee, the reason and /metrics say so."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer
from tests.integration.scrape import scrape

pytestmark = pytest.mark.integration

SIGMA, KAPPA, SINGLE = 0.03, 0.002, 2.0  # the peak at sqrt(0.97 / 0.002) = 22.0 workers
#: seconds the pool stays at each size (a size enters the fit after 10 s of saturated samples)
PHASE = 13.0


def usl(workers: int) -> float:
    return SINGLE * workers / (1 + SIGMA * (workers - 1) + KAPPA * workers * (workers - 1))


@pytest.fixture
async def queue(redis_url: str) -> AsyncIterator[str]:
    name = f"qas-knee-{uuid.uuid4().hex[:10]}"
    client = aioredis.Redis.from_url(redis_url)
    await client.rpush(f"rq:queue:{name}", *[f"job-{i}" for i in range(5000)])
    yield name
    await client.delete(f"rq:queue:{name}", f"rq:workers:{name}", f"rq:wip:{name}")
    await client.aclose()


async def play_pool(client: aioredis.Redis, queue: str, workers: int, seconds: float) -> None:
    """``workers`` workers attached and busy, taking jobs at the curve's rate for ``seconds``."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.delete(f"rq:workers:{queue}", f"rq:wip:{queue}")
        pipe.sadd(f"rq:workers:{queue}", *[f"rq:worker:w{i}" for i in range(workers)])
        pipe.zadd(f"rq:wip:{queue}", {f"running-{i}": 0 for i in range(workers)})
        await pipe.execute()
    started, taken = time.monotonic(), 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(usl(workers) * elapsed) - taken
        if due > 0:
            await client.lpop(f"rq:queue:{queue}", due)
            taken += due
        await asyncio.sleep(0.05)


async def poll(stub: pb_grpc.ExternalScalerAsyncStub, request: pb.GetMetricsRequest) -> None:
    """GetMetrics every second: each answer learns from the samples of its rateWindow."""
    while True:
        await stub.GetMetrics(request)
        await asyncio.sleep(1.0)


async def test_the_answer_is_clamped_at_the_learned_knee(
    scaler: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub, redis_url: str, queue: str
) -> None:
    metadata = {
        "url": redis_url, "queue": queue, "format": "rq", "jobDuration": "0.5s",
        "workerConcurrency": "1", "sampleInterval": "250ms", "rateWindow": "5s",
        "maxWorkers": "60", "learnKnee": "true",
    }  # fmt: skip
    ref = pb.ScaledObjectRef(name="orders", namespace="shop", scalerMetadata=metadata)
    request = pb.GetMetricsRequest(scaledObjectRef=ref)
    client = aioredis.Redis.from_url(redis_url)
    try:
        await stub.GetMetricSpec(ref)
        first = await stub.GetMetrics(request)  # starts the sampler; nothing learned yet
        assert first.metricValues[0].metricValueFloat > 30  # 5,000 jobs wait: past the knee
        polling = asyncio.create_task(poll(stub, request))  # as KEDA and the HPA ask
        for workers in (4, 8, 16, 32):
            await play_pool(client, queue, workers, PHASE)
        polling.cancel()
        reply = await stub.GetMetrics(request)
    finally:
        await client.aclose()
    cap = reply.metricValues[0].metricValueFloat
    assert 20 <= cap <= 24, cap  # the knee, 22, within the noise of 250 ms samples
    _, decision = await scaler.service.evaluate(ref, await scaler.service.spec_of(ref))
    assert decision.reason_text.startswith("clamped by knee (learned: throughput peaks at 2")
    samples = await scrape(scaler.metrics_port)
    labels = (("metric", "workers"), ("namespace", "shop"), ("queue", queue),
              ("scaled_object", "orders"))  # fmt: skip
    key = tuple(sorted((*labels, ("dependency", "knee"), ("source", "knee"))))
    assert samples[("queue_age_scaler_dependency_ceiling_workers", key)] == cap
    peak = samples[("queue_age_scaler_knee", tuple(sorted((*labels, ("figure", "workers")))))]
    assert 20 <= peak <= 25
