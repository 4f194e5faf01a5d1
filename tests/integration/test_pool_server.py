"""Pool triggers through the real gRPC server: a Sidekiq pool whose glob is resolved from
Sidekiq's ``queues`` set (jobs pushed by the real Ruby client, a real Sidekiq process serving
the queues in strict order), a RabbitMQ pool whose glob is resolved from the management API, and
the refusals (a cap on a glob's matches, a glob that matches nothing)."""

from __future__ import annotations

import asyncio
import math
import signal
from collections.abc import AsyncIterator, Callable

import grpc
import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.probe import probe, render_table
from scaler.server import RunningServer, ServerConfig, running_server
from tests.integration.clients import SidekiqProcess, sidekiq_push, until
from tests.integration.conftest import RedisProcess
from tests.integration.rabbit import rabbit, unique
from tests.integration.scrape import Samples, scrape
from tests.integration.test_keda_protocol import next_state
from tests.integration.test_redis_sidekiq import processes

__all__ = ["processes"]  # the fixture: real Sidekiq processes on the private Redis

pytestmark = pytest.mark.integration

POOL = "critical,default,low-*"


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=0,
        grace=2.0,
        min_sample_interval=0.1,
        max_pool_queues=4,
    )
    async with running_server(config) as running:
        yield running


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.ExternalScalerAsyncStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield pb_grpc.ExternalScalerStub(channel)


def ref(name: str, **metadata: str) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name=name,
        namespace="shop",
        scalerMetadata={"scalerAddress": "scaler:6000", "sampleInterval": "200ms"} | metadata,
    )


def sidekiq_pool(url: str, name: str = "workers", **metadata: str) -> pb.ScaledObjectRef:
    return ref(
        name,
        url=url,
        format="sidekiq",
        queues=POOL,
        workerThroughput="1",
        targetAge="10s",
        queueTargetAges="critical=5s",
        rateWindow="2s",
        **metadata,
    )


async def metric(stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef) -> float:
    reply = await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so))
    (value,) = reply.metricValues
    return value.metricValueFloat


def pool_gauge(samples: Samples, name: str, scaled_object: str) -> dict[str, float]:
    """A pool trigger's per-queue gauge, by queue."""
    found = {}
    for (metric_name, labels), value in samples.items():
        shown = dict(labels)
        if metric_name == f"queue_age_scaler_{name}" and shown["scaled_object"] == scaled_object:
            found[shown["pool_queue"]] = value
    return found


async def test_a_sidekiq_pool_needs_the_sum_of_its_queues(
    own_redis: RedisProcess, server: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub
) -> None:
    for queue, jobs in (("critical", 30), ("default", 60), ("low-a", 40), ("low-b", 20)):
        sidekiq_push(own_redis.url, queue, plain=jobs)
    sidekiq_push(own_redis.url, "mailers", plain=5)  # in Sidekiq's queues set, not the pool's
    pool = sidekiq_pool(own_redis.url)

    spec = await stub.GetMetricSpec(pool)
    assert [m.metricName for m in spec.metricSpecs] == [
        "queue-age-workers-pool-critical-default-low"
    ]
    # no process runs: each queue drains its backlog within its own target at 1 job/s a
    # worker: critical 30/5 s, default 60/10 s, low-a 40/10 s, low-b 20/10 s
    assert await metric(stub, pool) == 6 + 6 + 4 + 2  # one metric per queue would give 6
    assert (await stub.IsActive(pool)).result is True

    capped = sidekiq_pool(own_redis.url, "capped", maxWorkers="10")
    assert await metric(stub, capped) == 10
    samples = await scrape(server.metrics_port)
    # strict order: critical and default first, the low queues get nothing and low-b drives
    assert pool_gauge(samples, "pool_queue_allotted_workers", "capped") == {
        "critical": 6.0,
        "default": 4.0,
        "low-a": 0.0,
        "low-b": 0.0,
    }
    assert pool_gauge(samples, "pool_queue_driving", "capped") == {
        "critical": 0.0,
        "default": 0.0,
        "low-a": 0.0,
        "low-b": 1.0,
    }
    needed = pool_gauge(samples, "pool_queue_needed_workers", "workers")
    assert needed == {"critical": 6.0, "default": 6.0, "low-a": 4.0, "low-b": 2.0}

    # a single-queue trigger on critical shares the pool's sampler of it
    single = ref("critical-only", url=own_redis.url, format="sidekiq", queue="critical")
    await stub.GetMetricSpec(single)
    assert len(server.samplers) == 4


async def test_a_real_sidekiq_process_serves_the_pool_in_strict_order(
    own_redis: RedisProcess,
    stub: pb_grpc.ExternalScalerAsyncStub,
    server: RunningServer,
    processes: Callable[..., SidekiqProcess],
) -> None:
    r = aioredis.Redis.from_url(own_redis.url)
    for queue in ("critical", "default", "low-a"):
        sidekiq_push(own_redis.url, queue, plain=10)
    # -q without weights: Sidekiq's strict ordering; its 4 threads all take critical's jobs
    worker = processes(["critical", "default", "low-a"], concurrency=4)
    pool = sidekiq_pool(own_redis.url, workerConcurrency="4")
    await stub.GetMetricSpec(pool)

    def in_flight(samples: Samples, queue: str) -> float | None:
        labels = (("broker", "redis"), ("format", "sidekiq"), ("queue", queue))
        return samples.get(("queue_age_scaler_queue_in_flight", labels))

    async def critical_busy() -> bool:
        """critical runs its 4, and every queue has been sampled since the process's first
        heartbeat (before it, what runs is unknown: NaN)."""
        await metric(stub, pool)
        samples = await scrape(server.metrics_port)
        running = [in_flight(samples, q) for q in ("critical", "default", "low-a")]
        return running[0] == 4 and all(r is not None and not math.isnan(r) for r in running)

    await until(critical_busy)
    samples = await scrape(server.metrics_port)
    for queue, running in (("default", 0.0), ("low-a", 0.0)):
        labels = (("broker", "redis"), ("format", "sidekiq"), ("queue", queue))
        assert samples[("queue_age_scaler_queue_in_flight", labels)] == running
    # critical's 4 running and 6 waiting within 5 s, on its share: the process; default and
    # low-a, starved, each drain 10 within 10 s on workers of their own
    needed = pool_gauge(samples, "pool_queue_needed_workers", "workers")
    assert set(needed) == {"critical", "default", "low-a"}
    assert needed["default"] >= 1.0 and needed["low-a"] >= 1.0
    assert await metric(stub, pool) >= 3
    await r.set("critical:release", 1)
    await r.set("default:release", 1)
    await r.set("low-a:release", 1)
    worker.signal(signal.SIGTERM)
    await r.aclose()


async def test_glob_refusals(
    own_redis: RedisProcess, stub: pb_grpc.ExternalScalerAsyncStub
) -> None:
    for queue in ("low-a", "low-b", "low-c", "low-d"):
        sidekiq_push(own_redis.url, queue, plain=1)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetMetricSpec(sidekiq_pool(own_redis.url))  # critical, default + 4 lows
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "are 6 with the broker's queues its globs match; a pool may have at most 4" in (
        caught.value.details() or ""
    )
    assert "--max-pool-queues" in (caught.value.details() or "")

    nothing = ref(
        "none", url=own_redis.url, format="sidekiq", queues="mail-*", workerThroughput="1"
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=nothing))
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "match none of the queues the broker lists" in (caught.value.details() or "")

    rq = ref("rq", url=own_redis.url, format="rq", queues="high,low-*")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetMetricSpec(rq)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "format rq cannot list its queues" in (caught.value.details() or "")


async def test_a_rabbitmq_pool_resolves_its_glob_from_the_management_api(
    rabbitmq_url: str, server: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub
) -> None:
    prefix = unique("pool")
    with rabbit(rabbitmq_url) as broker:
        for suffix, messages in (("a", 5), ("b", 10), ("c", 15)):
            broker.publish(broker.declare(f"{prefix}-{suffix}"), messages)
        broker.declare(f"{prefix}x-other")  # does not match
        pool = ref(
            "emails",
            url=rabbitmq_url,
            queues=f"{prefix}-*",
            queueOrder="roundRobin",
            workerThroughput="1",
            targetAge="10s",
            sampleInterval="1s",
            rateWindow="10s",
        )
        await stub.GetMetricSpec(pool)
        value = await metric(stub, pool)
        samples = await scrape(server.metrics_port)
        needed = pool_gauge(samples, "pool_queue_needed_workers", "emails")
        assert set(needed) == {f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"}
        # each drains its backlog within 10 s at 1 job/s a worker, at the least
        assert needed[f"{prefix}-a"] >= 0.5 and needed[f"{prefix}-c"] >= 1.5
        # round robin, all three waiting (none runs), jobs alike: each gets a third of the
        # slots, so the pool is three times the most demanding queue's need, not the sum
        assert value == math.ceil(3 * max(needed.values()) - 1e-9)
        assert value >= 5


async def test_probe_shows_each_queue_of_the_pool_and_the_driving_one(
    own_redis: RedisProcess,
) -> None:
    for queue, jobs in (("critical", 10), ("default", 60), ("low-a", 20)):
        sidekiq_push(own_redis.url, queue, plain=jobs)
    metadata = {
        "url": own_redis.url,
        "format": "sidekiq",
        "queues": POOL,
        "workerThroughput": "1",
        "targetAge": "10s",
        "sampleInterval": "200ms",
        "rateWindow": "2s",
    }
    out = await probe(metadata, {}, duration=1.0)
    # 10/10 s, 60/10 s, 20/10 s at 1 job/s a worker; default needs most and drives
    assert [(q["queue"], q["needed_workers"]) for q in out["pool"]] == [
        ("critical", 1.0),
        ("default", 6.0),
        ("low-a", 2.0),
    ]
    assert (out["desired_workers"], out["driving_queue"]) == (9, "default")
    assert (
        out["reason"]
        == "draining backlog; queue default needs 6.0 of 9.0 workers (draining backlog)"
    )
    table = render_table(out)
    assert "default: needs 6, gets 6 (draining backlog; depth 60, oldest" in table
    assert "<- drives the decision" in table


async def test_an_outage_is_unavailable_not_an_idle_pool(
    own_redis: RedisProcess, stub: pb_grpc.ExternalScalerAsyncStub
) -> None:
    sidekiq_push(own_redis.url, "critical", plain=5)
    pool = ref(
        "static",
        url=own_redis.url,
        format="sidekiq",
        queues="critical,default",
        workerThroughput="1",
        sampleInterval="200ms",
    )
    assert await metric(stub, pool) == 1
    own_redis.stop()
    await asyncio.sleep(1.0)  # the newest samples are now older than 3 intervals
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await metric(stub, pool)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IsActive(pool)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE


async def test_stream_is_active_watches_every_queue_of_the_pool(
    own_redis: RedisProcess, stub: pb_grpc.ExternalScalerAsyncStub
) -> None:
    pool = ref(
        "streamed",
        url=own_redis.url,
        format="sidekiq",
        queues="critical,default",
        workerThroughput="1",
        sampleInterval="200ms",
    )
    stream = stub.StreamIsActive(pool)
    first = await next_state(stream, 5)
    assert first.result is False  # both queues empty
    sidekiq_push(own_redis.url, "default", plain=3)  # the second queue gets work
    second = await next_state(stream, 5)
    assert second.result is True
    stream.cancel()
