"""Random and malformed metadata sent to the real server over gRPC, on all four RPCs: every answer
is OK or a defined error code (never UNKNOWN or INTERNAL), no message shows a password, and the
server keeps answering a healthy trigger meanwhile. URLs point only at this machine: the real
Redis and RabbitMQ, PostgreSQL (not a broker) and a closed port."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import grpc
import pytest
import redis
from hypothesis import HealthCheck, given, settings

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import ServerConfig, running_server
from tests.conftest import free_port
from tests.metadata_strategies import SECRET, metadata

pytestmark = pytest.mark.integration

ANSWERS = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAVAILABLE,
}
CLOSED_PORT = free_port()


@pytest.fixture(scope="module")
def server_port() -> Iterator[int]:
    """The real server, on a loop of its own in a thread, for the whole module."""
    started = threading.Event()
    stop: asyncio.Event | None = None
    port: list[int] = []

    async def run() -> None:
        nonlocal stop
        stop = asyncio.Event()
        config = ServerConfig(
            host="127.0.0.1", port=0, metrics_port=None, grace=1.0, first_sample_timeout=0.2
        )
        async with running_server(config) as server:
            port.append(server.port)
            started.set()
            await stop.wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    assert started.wait(10), "the server did not start"
    yield port[0]
    assert stop is not None
    loop.call_soon_threadsafe(stop.set)
    thread.join(15)
    assert not thread.is_alive(), "the server did not stop"
    loop.close()


@pytest.fixture(scope="module")
def stub(server_port: int) -> Iterator[pb_grpc.ExternalScalerStub]:
    with grpc.insecure_channel(f"127.0.0.1:{server_port}") as channel:
        yield pb_grpc.ExternalScalerStub(channel)


def _code(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        if callable(call):
            call()
    except grpc.RpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=metadata([6379, 5672, 5432, CLOSED_PORT]))
def test_every_rpc_answers_a_defined_code_without_the_password(
    stub: pb_grpc.ExternalScalerStub, values: dict[str, str]
) -> None:
    so = pb.ScaledObjectRef(name="fuzz", namespace="fuzz", scalerMetadata=values)
    calls = (
        lambda: stub.GetMetricSpec(so, timeout=5),
        lambda: stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so), timeout=5),
        lambda: stub.IsActive(so, timeout=5),
        lambda: next(iter(stub.StreamIsActive(so, timeout=5))),
    )
    for call in calls:
        code, details = _code(call)
        assert code in ANSWERS, f"{code.name}: {details}"
        assert SECRET not in details


def test_a_healthy_trigger_answers_after_the_fuzz(
    stub: pb_grpc.ExternalScalerStub, redis_url: str, token: str
) -> None:
    """Runs after the fuzz in this module's order: the server still answers a real queue."""
    client = redis.Redis.from_url(redis_url)
    queue = f"fuzz-{token}"
    try:
        client.rpush(queue, "job")
        so = pb.ScaledObjectRef(
            name="healthy",
            namespace="shop",
            scalerMetadata={
                "url": redis_url,
                "queue": queue,
                "format": "list",
                "workerThroughput": "1",
            },
        )
        stub.GetMetricSpec(so, timeout=5)
        assert stub.IsActive(so, timeout=5).result is True
    finally:
        client.delete(queue)
        client.close()
