"""The server's limits over real gRPC against the real Redis: metadata too large is refused before
it is parsed or kept, queues and streams past their limit are RESOURCE_EXHAUSTED while the ones
already served go on, and /metrics stays bounded whatever the names."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.limits import Limits
from scaler.server import ServerConfig, running_server
from tests.integration.scrape import scrape
from tests.integration.test_keda_protocol import next_state

pytestmark = pytest.mark.integration


def ref(redis_url: str, queue: str, name: str = "workers") -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name=name,
        namespace="shop",
        scalerMetadata={
            "scalerAddress": "scaler:6000",
            "url": redis_url,
            "queue": queue,
            "format": "list",
            "workerThroughput": "1",
            "sampleInterval": "200ms",
        },
    )


@pytest.fixture
async def limited(
    redis_url: str,
) -> AsyncIterator[tuple[pb_grpc.ExternalScalerAsyncStub, int | None]]:
    limits = Limits(max_queues=3, max_queues_per_broker=2, max_streams=1, max_trigger_series=2)
    config = ServerConfig(host="127.0.0.1", port=0, metrics_port=0, grace=1.0, limits=limits)
    async with (
        running_server(config) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        yield pb_grpc.ExternalScalerStub(channel), server.metrics_port


async def active(stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef) -> bool:
    reply = await stub.IsActive(so, timeout=5)
    return bool(reply.result)


async def test_huge_metadata_is_invalid_argument_and_the_server_stays_small(
    stub: pb_grpc.ExternalScalerAsyncStub,
) -> None:
    many = pb.ScaledObjectRef(
        name="w", namespace="ns", scalerMetadata={f"k{i}": "v" for i in range(10_000)}
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IsActive(many, timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "10000 keys; at most 64" in (caught.value.details() or "")

    big = pb.ScaledObjectRef(name="w", namespace="ns", scalerMetadata={"queue": "q" * 1_000_000})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.GetMetricSpec(big, timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details() or ""
    assert "queue: the value of queue is 1000000 characters long; at most 4096" in details
    assert len(details) < 400  # the value is not echoed back


async def test_queues_past_the_limits_are_refused_and_the_others_go_on(
    limited: tuple[pb_grpc.ExternalScalerAsyncStub, int | None],
    redis_url: str,
    r: aioredis.Redis,
    token: str,
) -> None:
    stub, _ = limited
    queues = [f"limits-{token}-{i}" for i in range(3)]
    await r.rpush(queues[0], "job")
    assert await active(stub, ref(redis_url, queues[0]))
    assert not await active(stub, ref(redis_url, queues[1]))

    # a third queue on the same broker: past --max-queues-per-broker (2)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IsActive(ref(redis_url, queues[2]), timeout=5)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "its limit per broker (--max-queues-per-broker)" in (caught.value.details() or "")

    # another broker (another database is another URL) still has room: up to --max-queues (3)
    other_db = redis_url.rsplit("/", 1)[0] + "/1"
    assert not await active(stub, ref(other_db, queues[2]))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IsActive(ref(other_db, f"limits-{token}-more"), timeout=5)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "(--max-queues)" in (caught.value.details() or "")

    # the queues already sampled keep answering from fresh samples
    await r.rpush(queues[1], "job")
    await asyncio.sleep(0.5)
    assert await active(stub, ref(redis_url, queues[0]))
    assert await active(stub, ref(redis_url, queues[1]))


async def test_streams_past_the_limit_are_refused_and_the_open_one_goes_on(
    limited: tuple[pb_grpc.ExternalScalerAsyncStub, int | None],
    redis_url: str,
    r: aioredis.Redis,
    token: str,
) -> None:
    stub, _ = limited
    queue = f"limits-{token}-stream"
    first = stub.StreamIsActive(ref(redis_url, queue), timeout=20)
    assert (await next_state(first, 5)).result is False

    second = stub.StreamIsActive(ref(redis_url, queue, name="other"), timeout=20)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(second.read(), 5)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "(--max-streams)" in (caught.value.details() or "")

    await r.rpush(queue, "job")
    assert (await next_state(first, 5)).result is True
    first.cancel()
    await asyncio.sleep(0.2)  # the server counts the closed stream out

    third = stub.StreamIsActive(ref(redis_url, queue, name="third"), timeout=20)
    assert (await next_state(third, 5)).result is True
    third.cancel()


async def test_metrics_cut_long_names_and_count_triggers_past_the_series_limit(
    limited: tuple[pb_grpc.ExternalScalerAsyncStub, int | None],
    redis_url: str,
    token: str,
) -> None:
    stub, metrics_port = limited
    queue = f"limits-{token}-" + "x" * 300
    for name in ("first", "second", "third", "fourth"):
        await stub.IsActive(ref(redis_url, queue, name=name), timeout=5)
    samples = await scrape(metrics_port)
    desired = {
        dict(labels)["scaled_object"]: dict(labels)["queue"]
        for (metric, labels), _ in samples.items()
        if metric == "queue_age_scaler_desired_workers"
    }
    assert sorted(desired) == ["first", "second"]  # --max-trigger-series 2
    assert all(len(shown) == 120 and shown.endswith("...") for shown in desired.values())
    assert samples[("queue_age_scaler_series_dropped_total", ())] == 2.0
    assert all(len(value) <= 120 for _, labels in samples for _, value in labels)
