"""A trigger with a probed dependency through the real gRPC server: the answer is clamped at the
live ceiling, follows another role's sessions, says why, and is never raised on missing data."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
import redis.asyncio as aioredis

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.probe import probe
from scaler.profiles import Profile
from scaler.server import RunningServer, ServerConfig, running_server
from tests.integration.dependencies import PostgresAccounts, postgres_accounts
from tests.integration.scrape import scrape
from tests.integration.test_keda_protocol import push_sidekiq_jobs

pytestmark = pytest.mark.integration

__all__ = ["postgres_accounts"]  # a fixture, used by name

INTERVAL = 0.5
#: a port where nothing listens: a probe there fails at once
NOWHERE = "postgresql://nobody@127.0.0.1:9/none"


@pytest.fixture
async def queue(redis_url: str) -> AsyncIterator[str]:
    """A Sidekiq queue with 1,200 jobs two minutes old: 20 workers drain it in targetAge."""
    name = f"qas-ceiling-{uuid.uuid4().hex[:10]}"
    client = aioredis.Redis.from_url(redis_url)
    await push_sidekiq_jobs(client, name, [120.0] * 1200)
    yield name
    await client.delete(f"queue:{name}")
    await client.aclose()


@pytest.fixture
async def server(postgres_accounts: PostgresAccounts) -> AsyncIterator[RunningServer]:
    profiles: dict[str, Profile | str] = {
        "orders-pg": postgres_accounts.url(postgres_accounts.workers),
        "down-pg": NOWHERE,
        "billing-pg": Profile(
            "billing-pg", postgres_accounts.url(postgres_accounts.workers), namespaces=("billing",)
        ),
    }
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=0, grace=2.0, profiles=profiles,
        probe_interval=INTERVAL,
    )  # fmt: skip
    async with running_server(config) as running:
        yield running


def trigger(redis_url: str, queue: str, dependencies: str) -> pb.ScaledObjectRef:
    metadata = {
        "url": redis_url,
        "queue": queue,
        "format": "sidekiq",
        "workerThroughput": "1",
        "targetAge": "60s",
        "dependencies": dependencies,
    }
    return pb.ScaledObjectRef(name="orders", namespace="shop", scalerMetadata=metadata)


async def workers(stub: pb_grpc.ExternalScalerAsyncStub, ref: pb.ScaledObjectRef) -> float:
    reply = await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref))
    return reply.metricValues[0].metricValueFloat


async def reason(server: RunningServer, ref: pb.ScaledObjectRef) -> str:
    service = server.service
    _, decision = await service.evaluate(ref, await service.spec_of(ref))
    return decision.reason_text


async def until_workers(
    stub: pb_grpc.ExternalScalerAsyncStub, ref: pb.ScaledObjectRef, expected: float
) -> None:
    """GetMetrics as KEDA polls it, until it answers ``expected`` (within a probe interval and
    the reading's own time, or the test fails)."""
    deadline = time.monotonic() + INTERVAL + 5.0
    while (got := await workers(stub, ref)) != expected:
        assert time.monotonic() < deadline, f"still {got} workers, expected {expected}"
        await asyncio.sleep(0.1)


async def test_the_answer_follows_the_live_postgres_ceiling(
    server: RunningServer,
    postgres_accounts: PostgresAccounts,
    redis_url: str,
    queue: str,
) -> None:
    ref = trigger(redis_url, queue, "postgres=probe:orders-pg/1")
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        await stub.GetMetricSpec(ref)
        await until_workers(stub, ref, 10.0)  # the role's CONNECTION LIMIT 10
        assert await reason(server, ref) == "clamped by postgres (live: 10 slots, 10 free)"

        others = postgres_accounts.open(postgres_accounts.other, 5)  # 12 - 5 in the database
        await until_workers(stub, ref, 7.0)
        assert await reason(server, ref) == "clamped by postgres (live: 7 slots, 7 free)"
        samples = await scrape(server.metrics_port)
        trigger_labels = (("metric", "workers"), ("namespace", "shop"), ("queue", queue),
                          ("scaled_object", "orders"))  # fmt: skip
        key = tuple(sorted((*trigger_labels, ("dependency", "postgres"), ("source", "live"))))
        assert samples[("queue_age_scaler_dependency_ceiling_workers", key)] == 7
        assert samples[("queue_age_scaler_ceiling_workers", trigger_labels)] == 7
        probe = (("dependency", "orders-pg"), ("probe", "postgres"))
        usable = tuple(sorted((*probe, ("figure", "usable"))))
        assert samples[("queue_age_scaler_dependency_slots", usable)] == 7
        age = samples[("queue_age_scaler_dependency_reading_age_seconds", probe)]
        assert 0 <= age < INTERVAL + 5.0
        decision = tuple(sorted((*trigger_labels, ("reason", "clamped by postgres"))))
        assert samples[("queue_age_scaler_decision", decision)] == 1

        postgres_accounts.close(others)
        await until_workers(stub, ref, 10.0)


async def test_a_probe_that_cannot_read_never_raises_the_ceiling(
    server: RunningServer, redis_url: str, queue: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        # with a static fallback: the fallback's 3 workers, and the reason says why
        fallback = trigger(redis_url, queue, "postgres=probe:down-pg|3/1")
        assert await workers(stub, fallback) == 3.0
        text = await reason(server, fallback)
        assert text.startswith("clamped by postgres (probe has no reading (postgres: ")
        assert text.endswith("; static fallback 3)")

        # without one, and no workers known to hold (Sidekiq does not show them): no answer
        bare = trigger(redis_url, queue, "postgres=probe:down-pg/1")
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await workers(stub, bare)
        assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
        assert "the ceiling of dependency 'postgres' is unknown" in str(raised.value.details())

        # a profile of other namespaces is not the trigger's to probe
        scoped = trigger(redis_url, queue, "postgres=probe:billing-pg/1")
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await workers(stub, scoped)
        assert raised.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert (
            "probe:billing-pg: connection profile 'billing-pg' may not be used from "
            "namespace 'shop'" in str(raised.value.details())
        )

        # a probe named by no profile is bad metadata, named as such
        unknown = trigger(redis_url, queue, "postgres=probe:orders-db/1")
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await workers(stub, unknown)
        assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        details = str(raised.value.details())
        assert (
            "dependencies: probe:orders-db: got 'orders-db'; the scaler has no such connection profile"
            in details
        )


async def test_probe_shows_each_dependency_figure_age_and_source(
    postgres_accounts: PostgresAccounts, redis_url: str, queue: str
) -> None:
    metadata = {
        "url": redis_url,
        "queue": queue,
        "format": "sidekiq",
        "workerThroughput": "1",
        "dependencies": "postgres=probe:orders-pg/2,api=30/3",
    }
    profiles = {"orders-pg": postgres_accounts.url(postgres_accounts.workers)}
    out = await probe(metadata, profiles, duration=0.5)
    assert (out["desired_workers"], out["ceiling"]) == (5, 5)
    assert out["reason"] == "clamped by postgres (live: 10 slots, 10 free)"
    pg, api = out["dependencies"]
    assert pg["name"] == "postgres" and pg["probe"] == "orders-pg" and pg["kind"] == "postgres"
    assert (pg["ceiling"], pg["source"], pg["usable"], pg["free"], pg["unit"]) == (
        5, "live", 10, 10, "slots",
    )  # fmt: skip
    assert f"role {postgres_accounts.workers} CONNECTION LIMIT 10" in pg["detail"]
    assert 0 <= pg["age_seconds"] < 5 and pg["error"] is None
    assert pg["shared_budget"] == "profile/orders-pg"  # every trigger probing it shares it
    assert api == {
        "name": "api",
        "ceiling": 10,
        "source": "static",
        "per_worker": 3.0,
        "limit": 30.0,
        "shared_budget": "api",
    }
    assert out["warnings"] == []
