"""A trigger's URL pointed at what is not its broker, over gRPC through the real server: every
failure is told to the client in one fixed sentence per kind (``scaler.errors``), with no byte the
remote sent, no errno text and no exception name, while the server's log has the cause.

The ports are the real services of the test machine (PostgreSQL 5432, RabbitMQ 5672, NATS 4222,
MQTT 1883, Redis 6379), plus an HTTP server, a closed port and a listener that never answers,
each started here."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
import redis

from brokers.base import QueueSource
from brokers.connections import Connections
from brokers.formats import End
from brokers.redis_options import ListLayout
from brokers.redis_queues import RedisQueueAdapter
from scaler.errors import NOT_THE_BROKER, REFUSED, UNREACHABLE, BrokerUnreachable
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from tests.conftest import free_port

pytestmark = pytest.mark.integration

#: texts that tell one kind of port from another, which no client may see
REVEALING = (
    "Error 111",
    "Connection closed by server",
    "InvalidResponse",
    "IncompatibleProtocolError",
    "Protocol error",
    "reply type byte",
    "Connection refused",
    "StreamLost",
    "Timeout",
    "HTTP/1.1",
)

FailedPrecondition = grpc.StatusCode.FAILED_PRECONDITION
Unavailable = grpc.StatusCode.UNAVAILABLE


@pytest.fixture
async def http_port() -> AsyncIterator[int]:
    """An HTTP server that answers anything with 400, as most HTTP servers do to Redis's bytes."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listener whose backlog accepts connections that nobody ever reads or answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


def ref(metadata: dict[str, str]) -> pb.ScaledObjectRef:
    """One sample fails and is told; the next would come after the test. (A server stopped
    just as a sample ends can hang: Python 3.11's ``asyncio.wait_for`` in the sampler may
    swallow the cancellation when its inner task finishes at that moment.)"""
    return pb.ScaledObjectRef(
        name="errors",
        namespace="shop",
        scalerMetadata={"workerThroughput": "1", "sampleInterval": "10s", **metadata},
    )


async def settled_error(
    stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef
) -> grpc.aio.AioRpcError:
    """The RPC error once a sample has failed (before that: "no sample yet", without a cause)."""
    deadline = time.monotonic() + 12.0
    while True:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so))
        details = caught.value.details() or ""
        if not details.endswith(" yet"):
            return caught.value
        assert time.monotonic() < deadline, f"no sample failed yet: {details}"
        await asyncio.sleep(0.3)


def expected(broker: str, queue: str, fmt: str, code: grpc.StatusCode, sentence: str) -> str:
    """The whole message: a failed sample with no sample before it is 'no sample yet: <error>'
    when UNAVAILABLE; a FAILED_PRECONDITION is the error itself."""
    error = f"{broker} queue {queue!r}: {sentence}"
    if code is Unavailable:
        return f"no sample of {broker} queue {queue!r} ({fmt}) yet: {error}"
    return error


def assert_told_only(error: grpc.aio.AioRpcError, code: grpc.StatusCode, message: str) -> None:
    details = error.details() or ""
    assert (error.code(), details) == (code, message)
    for text in REVEALING:
        assert text not in details, text


def assert_logged(
    caplog: pytest.LogCaptureFixture, queue: str, cause: str | tuple[str, ...]
) -> None:
    """The server's log has the cause (one of them), and no traceback."""
    causes = (cause,) if isinstance(cause, str) else cause
    records = [r for r in caplog.records if f"'{queue}'" in r.getMessage()]
    logged = [r.getMessage() for r in records]
    assert any(c in message for c in causes for message in logged), logged
    assert not [r for r in records if r.exc_info], "a traceback was logged"


@pytest.mark.parametrize(
    ("target", "code", "sentence", "cause"),
    [
        # PostgreSQL and MQTT close the connection without a word: no answer, as a TCP proxy
        # whose Redis is down would give
        ("postgresql", Unavailable, UNREACHABLE, "Connection closed by server"),
        ("rabbitmq", FailedPrecondition, NOT_THE_BROKER.format("Redis"), 'got "A"'),
        ("nats", FailedPrecondition, NOT_THE_BROKER.format("Redis"), 'got "I"'),
        ("mqtt", Unavailable, UNREACHABLE, "Connection reset by peer"),
        ("http", FailedPrecondition, NOT_THE_BROKER.format("Redis"), 'got "H"'),
        ("closed", Unavailable, UNREACHABLE, "Error 111"),
        # the socket's timeout or the sampler's, whichever ends first
        ("silent", Unavailable, UNREACHABLE, ("Timeout reading", "no answer within")),
    ],
)
async def test_a_redis_url_at_another_port_is_told_in_one_fixed_sentence(
    stub: pb_grpc.ExternalScalerAsyncStub,
    caplog: pytest.LogCaptureFixture,
    http_port: int,
    silent_port: int,
    target: str,
    code: grpc.StatusCode,
    sentence: str,
    cause: str | tuple[str, ...],
) -> None:
    caplog.set_level(logging.INFO)
    ports = {
        "postgresql": 5432,
        "rabbitmq": 5672,
        "nats": 4222,
        "mqtt": 1883,
        "http": http_port,
        "closed": free_port(),
        "silent": silent_port,
    }
    queue = f"errors-{uuid.uuid4().hex[:8]}"
    so = ref({"url": f"redis://127.0.0.1:{ports[target]}/0", "queue": queue, "format": "sidekiq"})
    error = await settled_error(stub, so)
    assert_told_only(error, code, expected("redis", queue, "sidekiq", code, sentence))
    assert_logged(caplog, queue, cause)


@pytest.mark.parametrize(
    ("port", "code", "sentence", "cause"),
    [
        (6379, Unavailable, UNREACHABLE, "no answer within"),  # Redis waits for a newline
        (5432, FailedPrecondition, NOT_THE_BROKER.format("RabbitMQ (AMQP)"), "Incompatible"),
    ],
)
async def test_an_amqp_url_at_another_port_is_told_in_one_fixed_sentence(
    stub: pb_grpc.ExternalScalerAsyncStub,
    caplog: pytest.LogCaptureFixture,
    port: int,
    code: grpc.StatusCode,
    sentence: str,
    cause: str,
) -> None:
    caplog.set_level(logging.INFO)
    queue = f"errors-{uuid.uuid4().hex[:8]}"  # on no broker: the management API has no figures
    so = ref({"broker": "rabbitmq", "url": f"amqp://guest:guest@127.0.0.1:{port}/%2F", "queue": queue})  # fmt: skip
    error = await settled_error(stub, so)
    assert_told_only(error, code, expected("rabbitmq", queue, "amqp", code, sentence))
    assert_logged(caplog, queue, cause)


@pytest.fixture
def acl_user(redis_url: str) -> Iterator[str]:
    """A Redis ACL user of this test's own, that may touch only keys under ``other:``."""
    name = f"qas-test-{uuid.uuid4().hex[:10]}"
    admin = redis.Redis.from_url(redis_url)
    admin.acl_setuser(
        name, enabled=True, passwords=["+right-pw"], keys=["other:*"], commands=["+@all"]
    )
    try:
        yield name
    finally:
        admin.acl_deluser(name)
        admin.close()


@pytest.mark.parametrize(("password", "cause"), [("wrong-pw", "invalid username-password"), ("right-pw", "no permissions")])  # fmt: skip
async def test_a_refused_login_or_command_is_told_as_refused_by_the_broker(
    stub: pb_grpc.ExternalScalerAsyncStub,
    caplog: pytest.LogCaptureFixture,
    acl_user: str,
    password: str,
    cause: str,
) -> None:
    caplog.set_level(logging.INFO)
    queue = f"errors-{uuid.uuid4().hex[:8]}"
    url = f"redis://{acl_user}:{password}@127.0.0.1:6379/0"
    so = ref({"url": url, "queue": queue, "format": "sidekiq"})
    error = await settled_error(stub, so)
    assert_told_only(error, FailedPrecondition, f"redis queue {queue!r}: {REFUSED}")
    assert_logged(caplog, queue, cause)
    assert password not in caplog.text


async def test_a_refused_amqp_login_is_told_as_refused_by_the_broker(
    stub: pb_grpc.ExternalScalerAsyncStub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    queue = f"errors-{uuid.uuid4().hex[:8]}"
    url = "amqp://guest:wrong-pw@127.0.0.1:5672/%2F"
    so = ref({"broker": "rabbitmq", "url": url, "queue": queue})
    error = await settled_error(stub, so)
    assert_told_only(error, FailedPrecondition, f"rabbitmq queue {queue!r}: {REFUSED}")
    assert_logged(caplog, queue, "ACCESS_REFUSED")
    assert "wrong-pw" not in caplog.text


@pytest.mark.parametrize(
    "urls",
    [
        [f"rediss://127.0.0.1:6379/0?ssl_ca_certs={path}" for path in ("/nonexistent", "/etc/hostname", "/etc")],
        [f"unix://{path}" for path in ("/nonexistent.sock", "/etc/hostname", "/etc")],
    ],
    ids=["tls file", "unix socket"],
)  # fmt: skip
async def test_a_missing_file_and_an_unreadable_one_are_told_alike(
    connections: Connections, urls: list[str]
) -> None:
    """What a trigger names on the scaler's filesystem, it cannot learn about from the answer."""
    told: set[str] = set()
    logged: list[str] = []
    for url in urls:
        source = QueueSource("redis", url, "files", "sidekiq", ListLayout("", End.TAIL))
        adapter = RedisQueueAdapter(source, connections)
        try:
            with pytest.raises(BrokerUnreachable) as caught:
                await adapter.sample()
        finally:
            await adapter.aclose()
        told.add(str(caught.value))
        logged.append(caught.value.detail)
    assert told == {f"redis queue 'files': {UNREACHABLE}"}
    assert "No such file or directory" in logged[0]  # the server's log has the cause
    assert "No such file or directory" not in logged[1]
