"""KEDA's call sequence over real gRPC against a real Redis: GetMetricSpec -> GetMetrics -> IsActive,
for each metric mode, plus StreamIsActive, errors and the metrics endpoint."""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.policy import UNBOUNDED_SECONDS
from scaler.server import RunningServer
from tests.integration.scrape import scrape

pytestmark = pytest.mark.integration


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def queue_name() -> str:
    return f"qas-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def cleanup(redis_client: aioredis.Redis, queue_name: str) -> AsyncIterator[None]:
    yield
    keys = [k async for k in redis_client.scan_iter(match=f"*{queue_name}*")]
    if keys:
        await redis_client.delete(*keys)


async def push_sidekiq_jobs(
    client: aioredis.Redis, queue: str, ages: list[float], *, key: str = ""
) -> None:
    """Sidekiq 8 layout: LPUSH queue:<name> of JSON jobs with enqueued_at in epoch milliseconds."""
    now = time.time()
    for age in ages:  # oldest first, as Sidekiq would have pushed them
        stamp = int((now - age) * 1000)
        job = {
            "class": "HardWorker",
            "args": [1],
            "retry": True,
            "queue": queue,
            "jid": uuid.uuid4().hex[:24],
            "created_at": stamp,
            "enqueued_at": stamp,
        }
        await client.lpush(key or f"queue:{queue}", json.dumps(job))


def ref(metadata: dict[str, str], name: str = "workers") -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name=name, namespace="shop", scalerMetadata={"scalerAddress": "scaler:6000", **metadata}
    )


async def next_state(
    stream: grpc.aio.UnaryStreamCall[pb.ScaledObjectRef, pb.IsActiveResponse], timeout: float
) -> pb.IsActiveResponse:
    message = await asyncio.wait_for(stream.read(), timeout)
    assert isinstance(message, pb.IsActiveResponse), f"the stream ended: {message!r}"
    return message


async def keda_sequence(
    stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef
) -> tuple[pb.MetricSpec, pb.MetricValue, bool]:
    """What KEDA does on every poll: GetMetricSpec, then GetMetrics for that name, then IsActive."""
    spec = await stub.GetMetricSpec(so)
    assert len(spec.metricSpecs) == 1
    metric = spec.metricSpecs[0]
    values = await stub.GetMetrics(
        pb.GetMetricsRequest(scaledObjectRef=so, metricName=metric.metricName)
    )
    assert len(values.metricValues) == 1
    active = await stub.IsActive(so)
    return metric, values.metricValues[0], active.result


async def test_workers_metric_is_clamped_by_the_dependency(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    await push_sidekiq_jobs(redis_client, queue_name, [120.0] * 300)
    so = ref({
        "url": redis_url, "queue": queue_name, "format": "sidekiq", "workerThroughput": "0.5",
        "targetAge": "60s", "dependencies": "postgres=20/4,payments-api=30/2",
    })  # fmt: skip
    metric, value, active = await keda_sequence(stub, so)
    # 300 jobs to drain in 60 s at 0.5 jobs/s per worker needs 10; postgres allows 20/4 = 5
    assert metric.metricName == f"queue-age-workers-{queue_name}"
    assert (metric.targetSize, metric.targetSizeFloat) == (1, 1.0)
    assert (value.metricValue, value.metricValueFloat) == (5, 5.0)
    assert value.metricName == metric.metricName
    assert active is True


async def test_workers_metric_drains_the_backlog_without_a_ceiling(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    await push_sidekiq_jobs(redis_client, queue_name, [30.0] * 90)
    so = ref(
        {
            "url": redis_url,
            "queue": queue_name,
            "format": "sidekiq",
            "jobDuration": "2s",
            "workerConcurrency": "1",
            "targetDrainTime": "30s",
        }
    )
    _, value, active = await keda_sequence(stub, so)
    # 90 jobs in 30 s less one 2 s job (the last one taken must finish in time) at 0.5 jobs/s
    # per worker: 90 / 28 / 0.5 = 6.4, so 7 workers
    assert value.metricValueFloat == 7.0
    assert active is True


async def test_age_metric_reports_the_oldest_job(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    await push_sidekiq_jobs(redis_client, queue_name, [95.0, 40.0, 5.0])
    so = ref(
        {
            "url": redis_url,
            "queue": queue_name,
            "format": "sidekiq",
            "metric": "age",
            "targetAge": "45s",
        }
    )
    metric, value, active = await keda_sequence(stub, so)
    assert metric.metricName == f"queue-age-age-{queue_name}"
    assert (metric.targetSize, metric.targetSizeFloat) == (45, 45.0)
    assert value.metricValueFloat == pytest.approx(95.0, abs=1.0)
    assert value.metricValue == round(value.metricValueFloat)
    assert active is True


async def test_age_metric_holds_the_ceiling_through_observed_workers(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    # RQ layout: ids in rq:queue:<q>, enqueued_at in rq:job:<id>, workers in rq:workers:<q>
    job_id = uuid.uuid4().hex
    enqueued = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - 300))
    await redis_client.hset(
        f"rq:job:{job_id}", mapping={"enqueued_at": enqueued, "status": "queued"}
    )
    await redis_client.rpush(f"rq:queue:{queue_name}", job_id)
    await redis_client.sadd(
        f"rq:workers:{queue_name}", f"rq:worker:a-{queue_name}", f"rq:worker:b-{queue_name}"
    )
    so = ref(
        {
            "url": redis_url,
            "queue": queue_name,
            "format": "rq",
            "metric": "age",
            "targetAge": "60s",
            "maxWorkers": "4",
        }
    )
    _, value, _ = await keda_sequence(stub, so)
    # age 300 s would ask KEDA for ceil(2 × 300/60) = 10 workers; capped so ceil(2 × v/60) <= 4
    assert value.metricValueFloat == pytest.approx(120.0)
    await redis_client.delete(f"rq:job:{job_id}")


async def test_drain_time_metric_is_finite_when_nothing_drains(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    await push_sidekiq_jobs(redis_client, queue_name, [10.0] * 5)
    so = ref(
        {
            "url": redis_url,
            "queue": queue_name,
            "format": "sidekiq",
            "metric": "drainTime",
            "targetDrainTime": "2m",
            "sampleInterval": "200ms",
            "rateWindow": "2s",
        }
    )
    spec = await stub.GetMetricSpec(so)
    assert spec.metricSpecs[0].metricName == f"queue-age-drain-time-{queue_name}"
    assert spec.metricSpecs[0].targetSizeFloat == 120.0
    await asyncio.sleep(0.6)  # a few samples, so rates exist: nothing arrives, nothing completes
    _, value, active = await keda_sequence(stub, so)
    # KEDA reads an infinite value as 0; an unbounded drain time goes out as a large finite one
    assert value.metricValueFloat == UNBOUNDED_SECONDS
    assert active is True


async def test_empty_queue_is_idle_and_inactive(
    stub: pb_grpc.ExternalScalerAsyncStub, redis_url: str, queue_name: str
) -> None:
    so = ref({"url": redis_url, "queue": queue_name, "format": "sidekiq", "workerThroughput": "1"})
    _, value, active = await keda_sequence(stub, so)
    assert value.metricValueFloat == 0.0
    assert active is False


async def test_activation_thresholds(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    await push_sidekiq_jobs(redis_client, queue_name, [20.0, 20.0])
    base = {"url": redis_url, "queue": queue_name, "format": "sidekiq", "workerThroughput": "1"}
    assert (await stub.IsActive(ref({**base, "activationDepth": "2"}))).result is False
    assert (await stub.IsActive(ref({**base, "activationAge": "30s"}))).result is False
    assert (
        await stub.IsActive(ref({**base, "activationDepth": "1", "activationAge": "10s"}))
    ).result is True


async def test_bad_metadata_is_invalid_argument_with_a_suggestion(
    stub: pb_grpc.ExternalScalerAsyncStub, redis_url: str
) -> None:
    so = ref(
        {
            "url": redis_url,
            "queue": "q",
            "format": "sidekiq",
            "workerThroughput": "1",
            "tragetAge": "30s",
        }
    )
    for call in (
        stub.GetMetricSpec(so),
        stub.IsActive(so),
        stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "tragetAge" in (caught.value.details() or "")
        assert "did you mean 'targetAge'" in (caught.value.details() or "")


async def test_a_broker_that_never_answers_is_unavailable_not_zero(
    stub: pb_grpc.ExternalScalerAsyncStub,
) -> None:
    from tests.conftest import free_port

    so = ref(
        {
            "url": f"redis://:s3cret@127.0.0.1:{free_port()}/0",
            "queue": "q",
            "format": "sidekiq",
            "workerThroughput": "1",
        }
    )
    started = time.monotonic()
    for call in (stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so)), stub.IsActive(so)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "s3cret" not in (caught.value.details() or "")
        assert "'q'" in (caught.value.details() or "")
    assert time.monotonic() - started < 4.0  # the first-sample wait is bounded (about 1 s each)


async def test_a_queue_key_of_the_wrong_type_is_failed_precondition_and_recovers(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    await redis_client.set(f"queue:{queue_name}", "not a list")
    so = ref({"url": redis_url, "queue": queue_name, "format": "sidekiq", "workerThroughput": "1", "sampleInterval": "0.2s"})  # fmt: skip
    request = pb.GetMetricsRequest(scaledObjectRef=so)
    for call in (stub.GetMetrics(request), stub.IsActive(so)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION, caught.value
        assert f"'queue:{queue_name}' is not a list" in (caught.value.details() or "")

    await redis_client.delete(f"queue:{queue_name}")  # fixed: the next sample answers
    await push_sidekiq_jobs(redis_client, queue_name, [5.0])
    deadline = time.monotonic() + 5.0
    while True:
        try:
            active = await stub.IsActive(so)
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
            assert time.monotonic() < deadline, "still misconfigured after the fix"
            await asyncio.sleep(0.2)
        else:
            assert active.result is True
            break


@pytest.mark.parametrize("interval", ["1s", "8s"])  # a watched queue is sampled every 250 ms
async def test_stream_is_active_sends_state_at_once_then_true_within_a_second(
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
    interval: str,
) -> None:
    so = ref({"url": redis_url, "queue": queue_name, "format": "sidekiq", "workerThroughput": "1", "sampleInterval": interval})  # fmt: skip
    await stub.IsActive(so)  # the queue's sampler runs (and sleeps out its interval) already
    stream = stub.StreamIsActive(so)
    first = await next_state(stream, 2.0)
    assert first.result is False
    await push_sidekiq_jobs(redis_client, queue_name, [0.0])
    second = await next_state(stream, 1.0)
    assert second.result is True
    third = await next_state(stream, 2.0)  # repeated while active
    assert third.result is True
    stream.cancel()


async def test_shutdown_ends_streams_with_ok_and_health_goes_not_serving(
    redis_url: str, queue_name: str
) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from scaler.server import ServerConfig, running_server

    so = ref({"url": redis_url, "queue": queue_name, "format": "sidekiq", "workerThroughput": "1"})
    async with running_server(
        ServerConfig(host="127.0.0.1", port=0, metrics_port=None, grace=5.0)
    ) as server:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        health = health_pb2_grpc.HealthStub(channel)
        status = await health.Check(
            health_pb2.HealthCheckRequest(service="externalscaler.ExternalScaler")
        )
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        stream = pb_grpc.ExternalScalerStub(channel).StreamIsActive(so)
        assert (await next_state(stream, 2.0)).result is False
    # leaving the block shut the server down: the stream ended cleanly, health said NOT_SERVING
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert await stream.code() == grpc.StatusCode.OK
    await channel.close(None)


async def test_metrics_endpoint_exports_queue_and_decision(
    scaler: RunningServer,
    stub: pb_grpc.ExternalScalerAsyncStub,
    redis_client: aioredis.Redis,
    redis_url: str,
    queue_name: str,
    cleanup: None,
) -> None:
    await push_sidekiq_jobs(redis_client, queue_name, [50.0] * 200)  # needs 4 workers; db allows 2
    so = ref(
        {
            "url": redis_url,
            "queue": queue_name,
            "format": "sidekiq",
            "workerThroughput": "1",
            "dependencies": "db=2/1",
        }
    )
    await keda_sequence(stub, so)
    samples = await scrape(scaler.metrics_port)
    queue = (("broker", "redis"), ("format", "sidekiq"), ("queue", queue_name))
    trigger = (
        ("metric", "workers"),
        ("namespace", "shop"),
        ("queue", queue_name),
        ("scaled_object", "workers"),
    )
    assert samples["queue_age_scaler_queue_depth", queue] == 200.0
    assert math.isnan(samples["queue_age_scaler_queue_in_flight", queue])  # unknown, not 0
    assert samples["queue_age_scaler_ceiling_workers", trigger] == 2.0
    assert samples["queue_age_scaler_desired_workers", trigger] == 2.0
    reason = tuple(sorted((*trigger, ("reason", "clamped by db"))))
    assert samples["queue_age_scaler_decision", reason] == 1.0
    assert samples["queue_age_scaler_samples_total", queue] >= 1
    age_precision = tuple(
        sorted(
            (*trigger, ("signal", "age"), ("precision", "exact"), ("source", "payload:enqueued_at"))
        )
    )
    assert samples["queue_age_scaler_signal_precision", age_precision] == 1.0
    assert samples["queue_age_scaler_queue_oldest_age_seconds", queue] == pytest.approx(
        50.0, abs=1.5
    )
