"""Routes: a repeated ScaledObjectRef resolved by one lookup, bounded, and never holding a
trigger the service forgot."""

from __future__ import annotations

import asyncio
import time

import pytest

from brokers.memory import MemoryBroker
from scaler import service
from scaler.generated import externalscaler_pb2 as pb
from scaler.metric_rows import PREFIX
from scaler.routes import Route, Routes
from scaler.sample_schedule import Demand
from scaler.sampler import Sampler
from scaler.spec import parse_metadata
from tests.unit.test_service_memory import DEADLINE, push, ref, serving

SPEC = parse_metadata(
    {"url": "redis://x", "queue": "mail", "format": "rq", "workerThroughput": "1"}
)


def route() -> Route:
    return Route(SPEC, ("shop", "mailer", SPEC))


def test_the_wire_key_does_not_depend_on_the_order_keda_sent_the_map_in() -> None:
    one = pb.ScaledObjectRef(name="a", namespace="n", scalerMetadata={"x": "1", "y": "2", "z": "3"})
    other = pb.ScaledObjectRef(
        name="a", namespace="n", scalerMetadata={"z": "3", "x": "1", "y": "2"}
    )
    renamed = pb.ScaledObjectRef(
        name="b", namespace="n", scalerMetadata={"x": "1", "y": "2", "z": "3"}
    )
    assert Routes.wire(one) == Routes.wire(other)
    assert Routes.wire(one) != Routes.wire(renamed)


def test_routes_are_bounded_and_large_refs_are_not_kept() -> None:
    routes = Routes(size=2, max_bytes=100)
    kept = route()
    routes.put(b"a", kept)
    routes.put(b"b", route())
    assert routes.get(b"a") is kept  # used last: b goes first
    routes.put(b"c", route())
    assert routes.get(b"b") is None and routes.get(b"a") is kept and len(routes) == 2
    routes.put(b"x" * 101, route())
    assert routes.get(b"x" * 101) is None


async def test_a_forgotten_trigger_asked_again_is_tracked_and_forgotten_again() -> None:
    """Its route must not answer with the trigger the service dropped: the trigger asked again
    records its decision, and is forgotten again (its series dropped) once idle again."""
    broker = MemoryBroker()
    push(broker, 4, age=5.0)
    labels = {
        "namespace": "shop",
        "scaled_object": "workers",
        "queue": "orders",
        "metric": "workers",
    }
    name = f"{PREFIX}_desired_workers"
    async with serving(broker.open, idle_after=0.5) as scaler:
        registry = scaler.server.metrics.registry
        so, other = ref(), ref(queue="other", name="other")

        async def until_forgotten() -> None:
            deadline = time.monotonic() + DEADLINE
            while registry.get_sample_value(name, labels) is not None:
                assert time.monotonic() < deadline, "the idle trigger's series was never dropped"
                await scaler.stub.IsActive(other)  # the service sweeps on calls
                await asyncio.sleep(0.1)

        await scaler.stub.IsActive(so)
        assert registry.get_sample_value(name, labels) == 2.0
        await until_forgotten()
        await scaler.stub.IsActive(so)  # the same ref again: the same route
        assert registry.get_sample_value(name, labels) == 2.0
        await until_forgotten()


async def test_a_keda_sequence_asks_the_sampler_once_and_a_later_call_asks_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GetMetricSpec, GetMetrics and IsActive for one ref within ``ASK_REPEAT`` note the ask
    once (it keeps the sampler and the demand alive for minutes); a call after it asks again."""
    monkeypatch.setattr(service, "ASK_REPEAT", 0.5)
    asks: list[float] = []
    ask = Sampler.ask

    def counted(self: Sampler, demand: Demand) -> None:
        asks.append(time.monotonic())
        ask(self, demand)

    monkeypatch.setattr(Sampler, "ask", counted)
    broker = MemoryBroker()
    push(broker, 4, age=5.0)
    async with serving(broker.open) as scaler:
        so = ref()
        spec = await scaler.stub.GetMetricSpec(so)
        name = spec.metricSpecs[0].metricName
        first = await scaler.stub.GetMetrics(
            pb.GetMetricsRequest(scaledObjectRef=so, metricName=name)
        )
        assert (await scaler.stub.IsActive(so)).result is True
        assert first.metricValues[0].metricValue == 2
        assert len(asks) == 1
        await asyncio.sleep(0.6)
        again = await scaler.stub.GetMetrics(
            pb.GetMetricsRequest(scaledObjectRef=so, metricName=name)
        )
        assert again.metricValues[0].metricValue == 2
        assert len(asks) == 2
