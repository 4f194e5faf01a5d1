"""A Redis that stops mid-run: the scaler answers UNAVAILABLE (never 0 or false) while it is gone,
and answers again when it returns, without a restart. Runs its own redis-server on a free port."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest
import redis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer
from tests.integration.conftest import RedisProcess
from tests.integration.scrape import parse

pytestmark = pytest.mark.integration


def push_job(server: RedisProcess, queue: str, age: float) -> None:
    client = redis.Redis(port=server.port)
    client.lpush(
        f"queue:{queue}",
        json.dumps({"jid": "j1", "class": "W", "args": [], "enqueued_at": (time.time() - age)}),
    )
    client.close()


async def test_redis_outage_gives_unavailable_then_recovers(
    scaler: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub, own_redis: RedisProcess
) -> None:
    push_job(own_redis, "orders", age=30.0)
    so = pb.ScaledObjectRef(
        name="orders", namespace="shop",
        scalerMetadata={"url": own_redis.url, "queue": "orders", "format": "sidekiq", "metric": "age", "sampleInterval": "0.5s", "rateWindow": "5s"},
    )  # fmt: skip
    request = pb.GetMetricsRequest(scaledObjectRef=so, metricName="queue-age-age-orders")
    before = await stub.GetMetrics(request)
    assert before.metricValues[0].metricValueFloat == pytest.approx(30.0, abs=1.0)

    own_redis.stop()
    await asyncio.sleep(2.5)  # more than three sample intervals without a sample
    for call in (stub.GetMetrics(request), stub.IsActive(so)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "'orders'" in (caught.value.details() or "")

    own_redis.start()  # an empty Redis came back: the queue must now read as empty, not stale
    push_job(own_redis, "orders", age=7.0)
    pushed = time.monotonic()
    deadline = pushed + 10
    while True:
        try:
            after = await stub.GetMetrics(request)
            if after.metricValues[0].metricValueFloat < 20:
                break
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() < deadline, "the scaler did not recover after Redis returned"
        await asyncio.sleep(0.2)
    # the job's age at the first sample after Redis came back: 7 s and the time that sample took
    # to come (the failing source backs off, with jitter, so it may be a few seconds)
    since_push = time.monotonic() - pushed
    assert 6.0 <= after.metricValues[0].metricValueFloat <= 7.0 + since_push + 1.0
    assert (await stub.IsActive(so)).result is True


async def test_idle_sampler_stops_and_releases_its_connection(own_redis: RedisProcess) -> None:
    from scaler.server import ServerConfig, running_server

    config = ServerConfig(  # sampleInterval 0.5s: below serve's default floor
        host="127.0.0.1", port=0, metrics_port=None, idle_after=1.0, min_sample_interval=0.1
    )
    async with (
        running_server(config) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)
        so = pb.ScaledObjectRef(
            name="a",
            namespace="b",
            scalerMetadata={
                "url": own_redis.url,
                "queue": "idle",
                "format": "sidekiq",
                "workerThroughput": "1",
            },
        )
        assert (await stub.IsActive(so)).result is False
        assert len(server.samplers) == 1
        admin = redis.Redis(port=own_redis.port)
        assert int(admin.info("clients")["connected_clients"]) == 2  # the scaler's and ours
        await asyncio.sleep(2.5)
        assert len(server.samplers) == 0
        assert int(admin.info("clients")["connected_clients"]) == 1
        admin.close()


async def test_a_trigger_nobody_asks_about_is_forgotten_with_its_metrics(
    own_redis: RedisProcess,
) -> None:
    """A deleted ScaledObject, or metadata edited into a new spec: its series leave /metrics."""
    from prometheus_client import generate_latest

    from scaler.server import ServerConfig, running_server

    def series(server: RunningServer) -> set[tuple[str, str]]:
        """(metric, scaled_object) of every per-trigger series exported."""
        samples = parse(generate_latest(server.metrics.registry).decode())
        return {
            (name, dict(labels)["scaled_object"])
            for name, labels in samples
            if "scaled_object" in dict(labels)
        }

    def ref(name: str) -> pb.ScaledObjectRef:
        metadata = {
            "url": own_redis.url,
            "queue": name,
            "format": "sidekiq",
            "workerThroughput": "1",
        }
        return pb.ScaledObjectRef(name=name, namespace="shop", scalerMetadata=metadata)

    config = ServerConfig(  # sampleInterval 0.5s: below serve's default floor
        host="127.0.0.1", port=0, metrics_port=None, idle_after=1.0, min_sample_interval=0.1
    )
    async with (
        running_server(config) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)
        assert (await stub.IsActive(ref("gone"))).result is False
        exported = series(server)
        assert ("queue_age_scaler_desired_workers", "gone") in exported
        assert ("queue_age_scaler_decision", "gone") in exported
        assert ("queue_age_scaler_signal_precision", "gone") in exported
        for _ in range(6):  # only "kept" is asked about from now on
            await asyncio.sleep(0.5)
            assert (await stub.IsActive(ref("kept"))).result is False
        exported = series(server)
        assert {name for name, so in exported if so == "gone"} == set()
        assert ("queue_age_scaler_desired_workers", "kept") in exported
