"""Many samplers on one Redis share a bounded set of connections: every sample of 300 queues
sampled together succeeds, through at most ``MAX_CONNECTIONS_PER_BROKER`` connections of the
server, or ``--max-connections-per-broker`` of them; and the server closes them when it stops."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import redis

from brokers.connections import MAX_CONNECTIONS_PER_BROKER
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.limits import Limits
from scaler.server import RunningServer, ServerConfig, running_server
from tests.integration.conftest import RedisProcess

pytestmark = pytest.mark.integration

QUEUES = 300


def ref(own_redis: RedisProcess, queue: str) -> pb.ScaledObjectRef:
    metadata = {"url": own_redis.url, "queue": queue, "format": "list"}
    metadata |= {"workerThroughput": "1", "sampleInterval": "250ms"}
    return pb.ScaledObjectRef(name=f"so-{queue}", namespace="ns", scalerMetadata=metadata)


def sample_errors(server: RunningServer) -> float:
    return sum(
        sample.value
        for family in server.metrics.registry.collect()
        for sample in family.samples
        if sample.name == "queue_age_scaler_sample_errors_total"
    )


async def test_many_samplers_of_one_redis_share_a_bounded_pool(own_redis: RedisProcess) -> None:
    client = redis.Redis(port=own_redis.port)
    for index in range(QUEUES):
        client.rpush(f"q{index}", "job")
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=None,
        grace=2.0,
        min_sample_interval=0.1,
        # all 300 maps come at once: more than --max-new-metadata's default may wait
        limits=Limits(max_new_metadata=QUEUES),
    )
    async with (
        running_server(config) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)

        first = await asyncio.gather(
            *(stub.IsActive(ref(own_redis, f"q{i}"), timeout=10) for i in range(QUEUES))
        )
        assert all(reply.result for reply in first)
        await asyncio.sleep(3.0)  # 12 rounds of 300 samplers waking together
        clients = [c for c in client.client_list() if c.get("cmd") != "client|list"]
        again = await asyncio.gather(
            *(stub.IsActive(ref(own_redis, f"q{i}"), timeout=10) for i in range(QUEUES))
        )
        assert all(reply.result for reply in again)
        failed = sample_errors(server)
    client.close()
    assert failed == 0
    assert 1 <= len(clients) <= MAX_CONNECTIONS_PER_BROKER


async def test_the_bound_is_the_server_s_and_its_connections_close_with_it(
    own_redis: RedisProcess,
) -> None:
    client = redis.Redis(port=own_redis.port)
    for index in range(60):
        client.rpush(f"b{index}", "job")
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=None,
        grace=2.0,
        min_sample_interval=0.1,
        max_connections_per_broker=3,
    )
    async with (
        running_server(config) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = pb_grpc.ExternalScalerStub(channel)

        replies = await asyncio.gather(
            *(stub.IsActive(ref(own_redis, f"b{i}"), timeout=10) for i in range(60))
        )
        assert all(reply.result for reply in replies)
        await asyncio.sleep(2.0)  # 20 rounds of 60 samplers on 3 connections
        during = [c for c in client.client_list() if c.get("cmd") != "client|list"]
        assert len(server.samplers.connections) == 1  # one client for the one URL
        failed = sample_errors(server)
    after = [c for c in client.client_list() if c.get("cmd") != "client|list"]
    client.close()
    assert failed == 0
    assert 1 <= len(during) <= 3
    assert after == []  # the stopped server left no connection open
