"""Many samplers on one Redis share a bounded set of connections: every sample of 300 queues
sampled together succeeds, through at most ``MAX_CONNECTIONS`` connections of the server."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import redis

from brokers.redis_connection import MAX_CONNECTIONS
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import ServerConfig, running_server
from tests.integration.conftest import RedisProcess

pytestmark = pytest.mark.integration

QUEUES = 300


async def test_many_samplers_of_one_redis_share_a_bounded_pool(own_redis: RedisProcess) -> None:
    client = redis.Redis(port=own_redis.port)
    for index in range(QUEUES):
        client.rpush(f"q{index}", "job")
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=None, grace=2.0, min_sample_interval=0.1
    )
    async with (
        running_server(config) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)

        def ref(index: int) -> pb.ScaledObjectRef:
            metadata = {"url": own_redis.url, "queue": f"q{index}", "format": "list"}
            metadata |= {"workerThroughput": "1", "sampleInterval": "100ms"}
            return pb.ScaledObjectRef(name=f"so{index}", namespace="ns", scalerMetadata=metadata)

        first = await asyncio.gather(*(stub.IsActive(ref(i), timeout=10) for i in range(QUEUES)))
        assert all(reply.result for reply in first)
        await asyncio.sleep(3.0)  # 30 rounds of 300 samplers waking together
        clients = [c for c in client.client_list() if c.get("cmd") != "client|list"]
        again = await asyncio.gather(*(stub.IsActive(ref(i), timeout=10) for i in range(QUEUES)))
        assert all(reply.result for reply in again)
        failed = sum(
            sample.value
            for family in server.metrics.registry.collect()
            for sample in family.samples
            if sample.name == "queue_age_scaler_sample_errors_total"
        )
    client.close()
    assert failed == 0
    assert 1 <= len(clients) <= MAX_CONNECTIONS
