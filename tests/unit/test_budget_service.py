"""Dependency budgets shared between ScaledObjects, through the real service over gRPC on the
in-memory broker: which triggers share, the split, the reason and the metrics, the hold while a
pool scales in, and a pool that stops asking freeing its share."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator

import grpc
import pytest

from brokers.memory import MemoryBroker
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import RunningServer, ServerConfig, running_server
from tests.unit.test_service_memory import push, until
from tests.unit.test_service_memory import ref as memory_ref


def ref(queue: str, name: str, namespace: str = "shop", **keys: str) -> pb.ScaledObjectRef:
    """A Sidekiq trigger whose every 2 waiting jobs ask for a worker, on postgres=100/5 (20
    workers)."""
    so = memory_ref(queue, name, dependencies="postgres=100/5", **keys)
    so.namespace = namespace
    return so


@contextlib.asynccontextmanager
async def serving(
    broker: MemoryBroker, *, hold: float = 0.0, idle: float = 120.0
) -> AsyncIterator[tuple[RunningServer, pb_grpc.ExternalScalerAsyncStub]]:
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=None,
        grace=2.0,
        min_sample_interval=0.1,
        budget_hold=hold,
        budget_cooldown=hold,
        budget_idle=idle,
    )
    async with (
        running_server(config, broker.open) as server,
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        yield server, pb_grpc.ExternalScalerStub(channel)


async def workers(stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef) -> float:
    queue = so.scalerMetadata["queue"]
    request = pb.GetMetricsRequest(scaledObjectRef=so, metricName=f"queue-age-workers-{queue}")
    return (await stub.GetMetrics(request)).metricValues[0].metricValueFloat


def reason(server: RunningServer, so: pb.ScaledObjectRef) -> str:
    """The reason label the metrics show for the trigger's decision."""
    for metric in server.metrics.registry.collect():
        if metric.name != "queue_age_scaler_decision":
            continue
        for sample in metric.samples:
            if sample.labels["scaled_object"] == so.name and sample.value == 1:
                return sample.labels["reason"]
    raise AssertionError(f"no decision recorded for {so.name}")


def figure(server: RunningServer, budget: str, pool: str, name: str) -> float | None:
    return server.metrics.registry.get_sample_value(
        "queue_age_scaler_shared_budget_workers",
        {"budget": budget, "pool": pool, "figure": name},
    )


async def test_two_scaledobjects_on_one_database_share_its_limit() -> None:
    broker = MemoryBroker()
    orders, mailer = ref("orders", "orders"), ref("mailer", "mailer")
    push(broker, 1000, age=5.0, queue="orders")  # 500 workers' worth: far above the limit
    push(broker, 6, age=5.0, queue="mailer")  # 3 workers
    async with serving(broker) as (server, stub):
        await until(lambda: _is(stub, orders, 20), "orders alone never got the whole 20")
        assert reason(server, orders) == "clamped by postgres"
        # mailer asks for 3: it gets them, and orders the 17 left
        await until(lambda: _is(stub, mailer, 3), "mailer never got its 3 workers")
        assert await workers(stub, orders) == 17
        assert reason(server, orders) == "shared budget postgres"
        assert figure(server, "shop/postgres", "shop/orders", "granted") == 17
        assert figure(server, "shop/postgres", "shop/mailer", "need") == 3
        assert (
            server.metrics.registry.get_sample_value(
                "queue_age_scaler_shared_budget_slots", {"budget": "shop/postgres"}
            )
            == 100
        )
        # a third ScaledObject needing much: the 20 split between the two that need more
        # than an even share, the little one keeps its 3
        reports = ref("reports", "reports")
        push(broker, 1000, age=5.0, queue="reports")
        await until(lambda: _is(stub, reports, 8), "reports never got its 8")
        assert await workers(stub, orders) == 9
        assert await workers(stub, mailer) == 3
        assert await workers(stub, reports) == 8


async def test_other_namespaces_and_other_scopes_do_not_share() -> None:
    broker = MemoryBroker()
    push(broker, 1000, age=5.0, queue="orders")
    push(broker, 1000, age=5.0, queue="billing")
    orders = ref("orders", "orders")
    elsewhere = ref("billing", "billing", namespace="accounts")
    apart = ref("billing", "billing-2", dependencyScope="billing-db")
    alone = ref("billing", "billing-3", dependencyScope="none")
    same = ref("billing", "billing-4", dependencyScope="billing-db")
    async with serving(broker) as (_, stub):
        await until(lambda: _is(stub, orders, 20), "orders never got 20")
        for so in (elsewhere, apart, alone):
            await until(functools.partial(_is, stub, so, 20), f"{so.name} did not get its own 20")
        # the same named scope shares: billing-2 and billing-4 split theirs
        await until(lambda: _is(stub, same, 10), "billing-4 never shared billing-db")
        assert await workers(stub, apart) == 10
        assert await workers(stub, orders) == 20


async def test_a_pool_grows_only_once_the_other_has_scaled_in() -> None:
    broker = MemoryBroker()
    orders, mailer = ref("orders", "orders"), ref("mailer", "mailer")
    push(broker, 1000, age=5.0, queue="orders")
    async with serving(broker, hold=1.0) as (server, stub):
        await until(lambda: _is(stub, orders, 20), "orders never got 20")
        push(broker, 20, age=5.0, queue="mailer")  # 10 workers: the fair split is 10 and 10
        # orders was told 20 within the hold: mailer has no room yet, and is not active (KEDA
        # would start a worker the budget has no room for)
        assert await workers(stub, mailer) == 0
        assert (await stub.IsActive(mailer)).result is False
        assert reason(server, mailer) == "shared budget postgres"
        assert await workers(stub, orders) == 10
        # once orders' 20 is older than the hold, mailer gets the slots orders gave back
        await until(lambda: _is(stub, mailer, 10), "mailer never got its share")
        assert (await stub.IsActive(mailer)).result is True
        assert await workers(stub, orders) == 10


async def test_a_pool_that_stops_asking_frees_its_share() -> None:
    broker = MemoryBroker()
    orders, mailer = ref("orders", "orders"), ref("mailer", "mailer")
    push(broker, 1000, age=5.0, queue="orders")
    push(broker, 1000, age=5.0, queue="mailer")
    async with serving(broker, idle=0.5) as (_, stub):
        await until(lambda: _is(stub, orders, 20), "orders never got 20")
        await until(lambda: _is(stub, mailer, 10), "mailer never got half")
        assert await workers(stub, orders) == 10
        await asyncio.sleep(0.6)  # mailer's ScaledObject is gone: nobody asks about it
        assert await workers(stub, orders) == 20


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"dependencyScope": "a b"}, "dependencyScope: got 'a b'; expected none"),
        ({"dependencyWeight": "0"}, "dependencyWeight: got '0'; expected a number above zero"),
        ({"dependencyWeight": "5000"}, "at most 1000"),
    ],
)
async def test_bad_budget_keys_are_invalid_arguments(keys: dict[str, str], message: str) -> None:
    broker = MemoryBroker()
    async with serving(broker) as (_, stub):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetMetricSpec(ref("orders", "orders", **keys))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert message in (caught.value.details() or "")


async def test_budget_keys_without_dependencies_are_refused() -> None:
    broker = MemoryBroker()
    so = memory_ref("orders", "orders", dependencyWeight="2")
    async with serving(broker) as (_, stub):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetMetricSpec(so)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "dependencyWeight" in (caught.value.details() or "")


async def _is(stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef, value: int) -> bool:
    try:
        return await workers(stub, so) == value
    except grpc.aio.AioRpcError:
        return False  # the first sample, or the rates, not there yet


async def test_a_pool_of_queues_shares_the_budget_on_its_total() -> None:
    """A pool trigger (several queues, one fleet) is one pool of the budget, with its total."""
    broker = MemoryBroker()
    for queue in ("critical", "default", "orders"):
        push(broker, 1000, age=5.0, queue=queue)
    orders = ref("orders", "orders")
    workers_pool = ref("critical", "sidekiq", queues="critical,default")
    del workers_pool.scalerMetadata["queue"]
    async with serving(broker) as (server, stub):
        await until(lambda: _is(stub, orders, 20), "orders alone never got the whole 20")
        spec = await stub.GetMetricSpec(workers_pool)
        name = spec.metricSpecs[0].metricName
        request = pb.GetMetricsRequest(scaledObjectRef=workers_pool, metricName=name)

        async def pool_gets_half() -> bool:
            try:
                answer = await stub.GetMetrics(request)
            except grpc.aio.AioRpcError:
                return False
            return answer.metricValues[0].metricValueFloat == 10

        await until(pool_gets_half, "the pool never got its half of the budget")
        assert await workers(stub, orders) == 10
        assert figure(server, "shop/postgres", "shop/sidekiq", "granted") == 10
        assert reason(server, workers_pool) == "shared budget postgres"
        # each queue's allotment is of the 10 the budget grants, not of the 20 the pool needs
        allotted = {
            sample.labels["pool_queue"]: sample.value
            for metric in server.metrics.registry.collect()
            if metric.name == "queue_age_scaler_pool_queue_allotted_workers"
            for sample in metric.samples
            if sample.labels["scaled_object"] == "sidekiq"
        }
        assert set(allotted) == {"critical", "default"}
        assert sum(allotted.values()) == pytest.approx(10)
