"""Two tenants' triggers on one Redis queue, through the real gRPC server: one asking for a 600 s
sampleInterval cannot make the other's 1 s answers stale, in either order, and the queue goes
back to the slow pace once the fast trigger stops asking."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer, ServerConfig, running_server
from tests.integration.scrape import scrape

pytestmark = pytest.mark.integration

#: a short liveness, so that the test sees the fast trigger go
LIVE_FOR = 2.0


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    # the pace of the live triggers alone: every queue at its fast interval, whether it moves or
    # not (the adaptive interval is tests/unit/test_adaptive_sampler.py's)
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=0, grace=2.0, slow_sample_interval=None
    )
    async with running_server(config) as running:
        running.samplers.live_for = LIVE_FOR
        yield running


def trigger(url: str, queue: str, namespace: str, interval: str, window: str) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name="workers",
        namespace=namespace,
        scalerMetadata={
            "scalerAddress": "scaler:6000",
            "url": url,
            "queue": queue,
            "format": "list",
            "workerThroughput": "1",
            "sampleInterval": interval,
            "rateWindow": window,
        },
    )


async def samples_taken(server: RunningServer, queue: str) -> float:
    metrics = await scrape(server.metrics_port)
    labels = (("broker", "redis"), ("format", "list"), ("queue", queue))
    return metrics.get(("queue_age_scaler_samples_total", labels), 0.0)


@pytest.mark.parametrize("slow_first", [True, False], ids=["600s-first", "1s-first"])
async def test_a_600s_trigger_leaves_a_1s_trigger_fresh_and_the_pace_follows_the_live_ones(
    server: RunningServer, redis_url: str, token: str, slow_first: bool
) -> None:
    queue = f"qas-shared-{token}"
    slow = trigger(redis_url, queue, "tenant-slow", "600s", "20m")
    fast = trigger(redis_url, queue, "tenant-fast", "1s", "60s")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        for first in (slow, fast) if slow_first else (fast, slow):
            await stub.GetMetricSpec(first)
            await stub.IsActive(first)
            await asyncio.sleep(4.0)  # older than 3 x 1 s: a 600 s pace would be stale by now

        errors: list[str] = []
        for _ in range(30):  # KEDA's calls for the fast trigger, and the slow one's too
            for so in (fast, slow):
                try:
                    await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so))
                    await stub.IsActive(so)
                except grpc.aio.AioRpcError as error:
                    errors.append(f"{so.namespace}: {error.code().name} {error.details()}")
            await asyncio.sleep(0.2)
        assert errors == []
        fast_pace = await samples_taken(server, queue)
        assert fast_pace >= 6  # the 30 rounds took at least 6 s: about one sample a second

        # the fast tenant stops asking; it was live for max(LIVE_FOR, 3 x 1 s) = 3 s
        await asyncio.sleep(3.0 + 1.5)
        slowed_at = await samples_taken(server, queue)
        quiet_since = time.monotonic()
        for _ in range(6):
            await stub.IsActive(slow)  # the slow tenant, answered from its 600 s pace
            await asyncio.sleep(0.5)
        assert time.monotonic() - quiet_since >= 3.0
        assert await samples_taken(server, queue) == slowed_at

        # the fast tenant comes back: fresh at once, and sampled every second again
        back = await stub.IsActive(fast)
        assert back.result is False
        await asyncio.sleep(2.5)
        assert await samples_taken(server, queue) >= slowed_at + 2
