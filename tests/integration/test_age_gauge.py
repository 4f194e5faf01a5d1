"""``queue_age_scaler_queue_oldest_age_seconds`` through the real server, scraped from /metrics:
for jobs without a timestamp (Resque on Redis) the gauge shows the arrival-history estimate the
policy uses, at each sample, between KEDA's calls too; where the age is truly unknown (RabbitMQ
without its management API: no timestamps, no arrival counts) it stays NaN, never 0."""

from __future__ import annotations

import asyncio
import json
import math
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer
from tests.conftest import free_port
from tests.integration.rabbit import Rabbit, rabbit, unique

pytestmark = pytest.mark.integration

AGE = "queue_age_scaler_queue_oldest_age_seconds"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(port: int | None) -> Samples:
    def read() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            body: bytes = reply.read()
            return body.decode()

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(await asyncio.to_thread(read))
        for sample in family.samples
    }


@pytest.fixture
async def resque_queue(redis_url: str) -> AsyncIterator[tuple[aioredis.Redis, str]]:
    client = aioredis.Redis.from_url(redis_url)
    queue = f"qas-gauge-{uuid.uuid4().hex[:8]}"
    yield client, queue
    await client.delete(f"resque:queue:{queue}")
    await client.aclose()


async def push(client: aioredis.Redis, queue: str, count: int) -> None:
    jobs = [json.dumps({"class": "Mailer", "args": [uuid.uuid4().hex]}) for _ in range(count)]
    await client.rpush(f"resque:queue:{queue}", *jobs)


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
    await asyncio.sleep(0.6)

    # no GetMetrics since the jobs came: the sampler itself keeps the gauge up to date
    samples = await scrape(scaler.metrics_port)
    true_age = time.time() - first_batch
    labels = (("broker", "redis"), ("format", "resque"), ("queue", queue))
    assert samples[("queue_age_scaler_queue_depth", labels)] == 7
    # the oldest waiting job is the 4th of the first batch: within one interval + 5%
    assert samples[(AGE, labels)] == pytest.approx(true_age, abs=0.2 + 0.05 * true_age + 0.3)

    # and it is the age KEDA is given, whose precision and source the trigger's gauge tells
    reply = await stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=so, metricName=f"queue-age-age-{queue}")
    )
    samples = await scrape(scaler.metrics_port)
    assert samples[(AGE, labels)] == pytest.approx(reply.metricValues[0].metricValueFloat, abs=0.5)
    trigger = (("metric", "age"), ("namespace", "shop"), ("queue", queue), ("scaled_object", "mailer"))  # fmt: skip
    precision = (("precision", "estimate"), ("signal", "age"), ("source", "arrival-history"))
    assert samples[("queue_age_scaler_signal_precision", tuple(sorted(trigger + precision)))] == 1


@pytest.fixture
def helper(rabbitmq_url: str) -> Iterator[Rabbit]:
    with rabbit(rabbitmq_url) as made:
        yield made


@pytest.mark.timeout(30)
async def test_the_gauge_stays_nan_when_the_age_is_unknown(
    scaler: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub, rabbitmq_url: str, helper: Rabbit
) -> None:
    queue = helper.declare(unique("gauge"))
    helper.publish(queue, 12)  # no timestamp property
    # a management API that does not answer: AMQP's ready count and consumers only, so neither
    # a head timestamp nor the publish totals the arrival history is built from
    nowhere = f"http://127.0.0.1:{free_port()}"
    so = pb.ScaledObjectRef(
        name="orders", namespace="shop",
        scalerMetadata={"url": rabbitmq_url, "managementUrl": nowhere, "queue": queue, "metric": "age", "targetAge": "30s", "sampleInterval": "200ms"},
    )  # fmt: skip
    await stub.GetMetricSpec(so)
    labels = (("broker", "rabbitmq"), ("format", "amqp"), ("queue", queue))
    deadline = time.monotonic() + 10.0
    while True:
        samples = await scrape(scaler.metrics_port)
        if samples.get(("queue_age_scaler_samples_total", labels), 0) >= 5:
            break
        assert time.monotonic() < deadline, "the queue was not sampled"
        await asyncio.sleep(0.2)
    assert samples[("queue_age_scaler_queue_depth", labels)] == 12
    warned = (*labels, ("kind", "management_unavailable"))
    assert samples[("queue_age_scaler_sample_warnings_total", tuple(sorted(warned)))] >= 1
    assert math.isnan(samples[(AGE, labels)])  # unknown, not 0
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # and KEDA gets no age either
        await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
