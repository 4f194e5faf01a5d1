"""Fixtures shared by the integration and smoke tests: the real Redis, a running scaler server, a stub."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import grpc
import pytest
import redis

from brokers.connections import Connections
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer, ServerConfig, running_server

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"


@pytest.fixture(scope="session")
def redis_url() -> str:
    """REDIS_URL (default 127.0.0.1:6379/0). Fails, never skips, when Redis does not answer."""
    url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    try:
        with redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2) as client:
            client.ping()
    except (redis.exceptions.RedisError, OSError) as exc:
        pytest.fail(
            f"Redis is not reachable at REDIS_URL ({type(exc).__name__}: {exc}). Start it "
            "(scripts/services does) or point REDIS_URL at one; integration tests never skip.",
            pytrace=False,
        )
    return url


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    """RABBITMQ_URL (default guest@127.0.0.1:5672, vhost /), with the management API on 15672.
    Fails, never skips, when either does not answer."""
    url = os.environ.get("RABBITMQ_URL", DEFAULT_RABBITMQ_URL)
    host = urlsplit(url).hostname or "127.0.0.1"
    for port, what in ((urlsplit(url).port or 5672, "AMQP"), (15672, "the management API")):
        try:
            socket.create_connection((host, port), timeout=2).close()
        except OSError as exc:
            pytest.fail(
                f"RabbitMQ {what} does not answer on {host}:{port} ({exc}). Start it "
                "(scripts/services does, with the management plugin); integration tests never skip.",
                pytrace=False,
            )
    return url


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listened on a moment ago (another socket may take it
    since: :func:`closed_port` holds one)."""
    with closed_port() as port:
        return port


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A port of 127.0.0.1 that refuses connections while the block runs: bound, never
    listening, so that no other socket (pika's loopback wake-up pair, say) is given it meanwhile,
    as one was a port that :func:`free_port` had let go."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port


@pytest.fixture
async def connections() -> AsyncIterator[Connections]:
    """The broker connections a test's adapters share, closed after the test."""
    held = Connections()
    yield held
    await held.aclose()


@pytest.fixture
async def scaler() -> AsyncIterator[RunningServer]:
    # tests sample every 200 ms or so to be quick: below serve's default floor (1 s)
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=0, grace=2.0, min_sample_interval=0.1
    )
    async with running_server(config) as server:
        yield server


@pytest.fixture
async def channel(scaler: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{scaler.port}") as chan:
        yield chan


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> pb_grpc.ExternalScalerAsyncStub:
    return pb_grpc.ExternalScalerStub(channel)
