"""Tenants against the real server over gRPC, real Redis and RabbitMQ, and local listeners that
count the connections (and HTTP Authorization headers) they receive: what a ScaledObject author
cannot make the scaler do, and what still works."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import grpc
import pytest
import redis
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.profiles import Profile
from scaler.server import ServerConfig, running_server
from scaler.url_policy import UrlPolicy
from tests.integration.rabbit import Rabbit, rabbit, unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

#: time in which a sampler that was started would have connected (it samples at once)
CONNECT_WINDOW = 2.0
#: RabbitMQ's management API shows a new queue's figures within this
STATS_DELAY = 15.0


@dataclass
class Listener:
    """A local TCP port that counts connections and the HTTP Authorization headers sent to it."""

    port: int = 0
    connections: int = 0
    authorizations: list[bytes] = field(default_factory=list)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(TimeoutError, ConnectionError):
            data = await asyncio.wait_for(reader.read(65536), 1.0)
            self.authorizations += [
                line for line in data.split(b"\r\n") if line.lower().startswith(b"authorization:")
            ]
        writer.close()


@contextlib.asynccontextmanager
async def listening() -> AsyncIterator[Listener]:
    listener = Listener()
    server = await asyncio.start_server(listener._handle, "127.0.0.1", 0)
    listener.port = server.sockets[0].getsockname()[1]
    async with server:
        yield listener


@contextlib.asynccontextmanager
async def scaler_stub(config: ServerConfig) -> AsyncIterator[pb_grpc.ExternalScalerAsyncStub]:
    async with (
        running_server(config) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        yield pb_grpc.ExternalScalerStub(channel)


def config(**kwargs: Any) -> ServerConfig:
    return ServerConfig(host="127.0.0.1", port=0, metrics_port=None, grace=1.0, **kwargs)


def ref(namespace: str, metadata: dict[str, str]) -> pb.ScaledObjectRef:
    return pb.ScaledObjectRef(
        name="workers", namespace=namespace, scalerMetadata={"scalerAddress": "s:6000", **metadata}
    )


async def refused(
    stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef
) -> list[tuple[grpc.StatusCode, str]]:
    """The code and message of each of KEDA's four calls, which must all fail."""
    answers = []
    calls = (
        lambda: stub.GetMetricSpec(so),
        lambda: stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so, metricName="")),
        lambda: stub.IsActive(so),
    )
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await call()
        answers.append((error.value.code(), error.value.details() or ""))
    with pytest.raises(grpc.aio.AioRpcError) as error:
        async for _ in stub.StreamIsActive(so):
            pass
    answers.append((error.value.code(), error.value.details() or ""))
    return answers


# -- a profile's credentials go only to the profile's hosts -----------------------------------


@pytest.fixture
def helper(rabbitmq_url: str) -> Iterator[Rabbit]:
    with rabbit(rabbitmq_url) as made:
        yield made


async def test_a_trigger_cannot_send_a_profiles_credentials_to_its_own_management_url(
    rabbitmq_url: str, helper: Rabbit
) -> None:
    queue = helper.declare(unique("tenant"))
    profiles = {"team-b-rabbit": Profile("team-b-rabbit", rabbitmq_url)}
    async with listening() as listener, scaler_stub(config(profiles=profiles)) as stub:
        trap = f"http://127.0.0.1:{listener.port}"
        so = ref("team-b", {"connection": "team-b-rabbit", "managementUrl": trap, "queue": queue})
        for code, message in await refused(stub, so):
            assert code is grpc.StatusCode.INVALID_ARGUMENT
            assert message.startswith(
                "invalid trigger metadata: managementUrl: set beside connection; it belongs in the connection profile"
            )
        await asyncio.sleep(CONNECT_WINDOW)
        assert (listener.connections, listener.authorizations) == (0, [])

        # the listener does count: the trigger's own URL (its own credentials) reaches it
        own = ref(
            "team-b", {"url": rabbitmq_url, "managementUrl": trap, "queue": queue, "metric": "age"}
        )
        await stub.GetMetricSpec(own)
        deadline = time.monotonic() + 10
        while not listener.authorizations and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert listener.connections >= 1
        assert listener.authorizations and all(b"Basic" in a for a in listener.authorizations)


async def test_a_profiles_own_management_url_reaches_the_management_api(
    rabbitmq_url: str, helper: Rabbit
) -> None:
    queue = helper.declare(unique("tenant"))
    enqueued = time.time() - 20.0
    helper.publish(queue, 5, timestamp=int(enqueued))
    host = urlsplit(rabbitmq_url).hostname
    profile = Profile("team-b-rabbit", rabbitmq_url, f"http://{host}:15672", namespaces=("team-b",))
    async with scaler_stub(config(profiles={profile.name: profile})) as stub:
        so = ref(
            "team-b",
            {"connection": "team-b-rabbit", "queue": queue, "metric": "age", "targetAge": "30s"},
        )
        (metric,) = (await stub.GetMetricSpec(so)).metricSpecs
        request = pb.GetMetricsRequest(scaledObjectRef=so, metricName=metric.metricName)
        deadline = time.monotonic() + STATS_DELAY
        while True:  # the age comes from the management API's head_message_timestamp
            try:
                (value,) = (await stub.GetMetrics(request)).metricValues
            except grpc.aio.AioRpcError as error:
                assert error.code() is grpc.StatusCode.UNAVAILABLE, error
            else:
                if abs(value.metricValueFloat - (time.time() - enqueued)) <= 1.5:
                    break
            assert time.monotonic() < deadline, "no age from the profile's management API"
            await asyncio.sleep(0.5)


# -- a namespace reads only through its own profiles ------------------------------------------


@pytest.fixture
def team_b_user(redis_url: str) -> Iterator[tuple[str, str, str]]:
    """A Redis ACL user with a password, for team B's keys only; deleted afterwards."""
    token = uuid.uuid4().hex[:10]
    user, password = f"qas-test-team-b-{token}", uuid.uuid4().hex
    with redis.Redis.from_url(redis_url) as admin:
        admin.acl_setuser(
            user, enabled=True, passwords=[f"+{password}"], keys=[f"*{token}*"], commands=["+@all"]
        )
        try:
            yield user, password, token
        finally:
            admin.acl_deluser(user)
            keys = list(admin.scan_iter(match=f"*{token}*"))
            if keys:
                admin.delete(*keys)


async def test_one_namespace_cannot_read_a_queue_through_anothers_profile(
    redis_url: str, team_b_user: tuple[str, str, str]
) -> None:
    user, password, token = team_b_user
    parts = urlsplit(redis_url)
    url = f"redis://{user}:{password}@{parts.hostname}:{parts.port or 6379}/0"
    queue = f"orders-{token}"
    async with aioredis.Redis.from_url(url) as team_b:  # the password is needed, and works
        for _ in range(7):
            stamp = int((time.time() - 30) * 1000)
            await team_b.lpush(f"queue:{queue}", json.dumps({"jid": "j", "enqueued_at": stamp}))
    with pytest.raises(redis.AuthenticationError):
        async with aioredis.Redis.from_url(
            f"redis://{user}:wrong@{parts.hostname}:{parts.port or 6379}/0"
        ) as wrong:
            await wrong.ping()

    profile = Profile("team-b-redis", url, namespaces=("tenant-b",))
    metadata = {"connection": "team-b-redis", "queue": queue, "format": "sidekiq", "metric": "age"}
    async with scaler_stub(config(profiles={profile.name: profile})) as stub:
        for code, message in await refused(stub, ref("tenant-a", metadata)):
            assert code is grpc.StatusCode.PERMISSION_DENIED
            assert message == (
                "not allowed by the scaler's operator: connection: connection profile "
                "'team-b-redis' may not be used from namespace 'tenant-a': the profile's "
                "namespaces do not include it (ask the scaler's operator)"
            )
        allowed = ref("tenant-b", metadata)
        (metric,) = (await stub.GetMetricSpec(allowed)).metricSpecs
        (value,) = (
            await stub.GetMetrics(
                pb.GetMetricsRequest(scaledObjectRef=allowed, metricName=metric.metricName)
            )
        ).metricValues
        assert 29 <= value.metricValueFloat <= 33
        # tenant-a is still refused once tenant-b's spec is cached and its sampler warm
        (code, _), *_ = await refused(stub, ref("tenant-a", metadata))
        assert code is grpc.StatusCode.PERMISSION_DENIED


# -- where a trigger's own URL may point ------------------------------------------------------


async def test_a_url_outside_the_allowlist_never_opens_a_socket(redis_url: str) -> None:
    parts = urlsplit(redis_url)
    rule = f"redis://{parts.hostname}:{parts.port or 6379}"
    base = {
        "queue": f"qas-test-{uuid.uuid4().hex[:8]}",
        "format": "sidekiq",
        "workerThroughput": "1",
    }
    async with listening() as listener:
        target = f"redis://127.0.0.1:{listener.port}/0"
        async with scaler_stub(config(urls=UrlPolicy.of([rule]))) as stub:
            for code, message in await refused(stub, ref("shop", {"url": target, **base})):
                assert code is grpc.StatusCode.PERMISSION_DENIED
                assert message == (
                    f"not allowed by the scaler's operator: url: redis://127.0.0.1:{listener.port} "
                    f"is not allowed by the scaler's --allow-url rules ({rule}); point the trigger "
                    "at an allowed host, or name a connection profile (connection)"
                )
            await stub.GetMetricSpec(ref("shop", {"url": redis_url, **base}))  # allowed
            await asyncio.sleep(CONNECT_WINDOW)
            assert listener.connections == 0

        async with scaler_stub(config(urls=UrlPolicy.of([], profiles_only=True))) as stub:
            for code, message in await refused(stub, ref("shop", {"url": target, **base})):
                assert code is grpc.StatusCode.PERMISSION_DENIED
                assert "(serve --profiles-only)" in message
            await asyncio.sleep(CONNECT_WINDOW)
            assert listener.connections == 0

        # the listener does count: an open server (the default) connects to it
        async with scaler_stub(config()) as stub:
            await stub.GetMetricSpec(ref("shop", {"url": target, **base}))
            deadline = time.monotonic() + 10
            while listener.connections == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert listener.connections >= 1


async def test_tls_files_in_a_trigger_url_are_refused_alike_without_connecting() -> None:
    async with listening() as listener, scaler_stub(config()) as stub:
        answers = set()
        for path in ("/etc/shadow", "/etc/hostname", "/nonexistent/ca.pem"):
            url = f"rediss://127.0.0.1:{listener.port}/0?ssl_ca_certs={path}"
            so = ref(
                "shop", {"url": url, "queue": "q", "format": "sidekiq", "workerThroughput": "1"}
            )
            answers |= set(await refused(stub, so))
            so = ref(
                "shop",
                {
                    "url": f"unix://{path}",
                    "queue": "q",
                    "format": "sidekiq",
                    "workerThroughput": "1",
                },
            )
            answers |= set(await refused(stub, so))
        assert {code for code, _ in answers} == {grpc.StatusCode.INVALID_ARGUMENT}
        assert {message.split(";")[0] for _, message in answers} == {
            "invalid trigger metadata: url: query option ssl_ca_certs names a file on the scaler's machine",
            "invalid trigger metadata: url: unix:// sockets are reachable only through a connection profile that the scaler's operator configures",
        }
        await asyncio.sleep(CONNECT_WINDOW)
        assert listener.connections == 0


async def test_the_operators_bounds_hold_over_grpc(redis_url: str) -> None:
    base = {"url": redis_url, "queue": "q", "format": "sidekiq", "workerThroughput": "1"}
    async with scaler_stub(config()) as stub:  # serve's defaults: 1s floor, 1h ceiling
        for extra, fragment in (
            (
                {"sampleInterval": "100ms"},
                "sampleInterval: got '100ms'; expected at least 1s, the floor the scaler's operator sets (serve --min-sample-interval)",
            ),
            (
                {"rateWindow": "1000000h"},
                "rateWindow: got '1000000h'; expected at most 3600s, the ceiling the scaler's operator sets (serve --max-rate-window)",
            ),
        ):
            for code, message in await refused(stub, ref("shop", {**base, **extra})):
                assert code is grpc.StatusCode.INVALID_ARGUMENT
                assert fragment in message
