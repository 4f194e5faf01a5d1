"""RabbitMQ through the whole server (KEDA's gRPC calls, /metrics, probe), and the management
API stopped mid-run: AMQP counts alone, age and rates unknown (the age gauge NaN, never 0), a
warning; then recovery."""

from __future__ import annotations

import asyncio
import math
import socket
import subprocess
import time
from collections.abc import Iterator

import grpc
import pytest

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.probe import probe
from scaler.server import RunningServer
from tests.conftest import free_port
from tests.integration.rabbit import Rabbit, rabbit, spec_for, spread, unique, watching
from tests.integration.scrape import scrape

pytestmark = pytest.mark.integration

STATS_DELAY = 15.0
AGE_GAUGE = "queue_age_scaler_queue_oldest_age_seconds"


@pytest.fixture
def helper(rabbitmq_url: str) -> Iterator[Rabbit]:
    with rabbit(rabbitmq_url) as made:
        yield made


@pytest.mark.timeout(60)
async def test_keda_calls_for_an_amqp_backlog_without_consumers(
    scaler: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub, rabbitmq_url: str, helper: Rabbit
) -> None:
    queue = helper.declare(unique("grpc"))
    enqueued = time.time() - 20.0
    helper.publish(queue, 50, timestamp=int(enqueued))
    so = pb.ScaledObjectRef(
        name="orders", namespace="shop",
        scalerMetadata={"scalerAddress": "scaler:6000", "url": rabbitmq_url, "queue": queue, "metric": "age", "targetAge": "30s", "sampleInterval": "0.5s"},
    )  # fmt: skip
    spec = await stub.GetMetricSpec(so)
    (metric,) = spec.metricSpecs
    assert (metric.metricName, metric.targetSizeFloat) == (f"queue-age-age-{queue}", 30.0)
    request = pb.GetMetricsRequest(scaledObjectRef=so, metricName=metric.metricName)
    deadline = time.monotonic() + STATS_DELAY
    while True:  # until the broker shows the new queue's figures: UNAVAILABLE until then
        try:
            (value,) = (await stub.GetMetrics(request)).metricValues
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
        else:
            if abs(value.metricValueFloat - (time.time() - enqueued)) <= 1.5:
                break
        assert time.monotonic() < deadline, "no age from head_message_timestamp"
        await asyncio.sleep(0.5)
    assert value.metricValue == round(value.metricValueFloat)
    assert (await stub.IsActive(so)).result is True

    samples = await scrape(scaler.metrics_port)
    labels = (("broker", "rabbitmq"), ("format", "amqp"), ("queue", queue))
    assert samples[("queue_age_scaler_queue_depth", labels)] == 50
    assert samples[("queue_age_scaler_queue_consumers", labels)] == 0
    assert samples[("queue_age_scaler_queue_in_flight", labels)] == 0
    assert samples[("queue_age_scaler_queue_consumer_capacity", labels)] == 0


def management_answers() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 15672), timeout=1).close()
    except OSError:
        return False
    return True


def plugins(action: str) -> None:
    subprocess.run(
        ["rabbitmq-plugins", action, "rabbitmq_management"],
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture
def management_restored() -> Iterator[None]:
    """Whatever happens in the test, the management plugin is enabled and answering after it."""
    try:
        yield
    finally:
        plugins("enable")
        deadline = time.monotonic() + 60
        while not management_answers() and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.mark.timeout(180)
async def test_management_api_stopped_mid_run(
    rabbitmq_url: str, helper: Rabbit, management_restored: None
) -> None:
    queue = helper.declare(unique("outage"), quorum=True)
    spec = spec_for(rabbitmq_url, queue)
    async with watching(spec) as watch:
        await watch.until(lambda s, _: s.arrivals_total is not None, STATS_DELAY, "first totals")
        await spread(helper, queue, 20, 4.0)
        await watch.until(
            lambda s, g: s.arrivals_total == 20 and g.arrival_rate.value is not None,
            STATS_DELAY,
            "totals and rates",
        )

        await asyncio.to_thread(plugins, "disable")
        snapshot, signals = await watch.until(
            lambda s, _: "management_unavailable" in s.warnings, 30, "the management outage"
        )
        assert (snapshot.depth, snapshot.consumers) == (20, 0)  # AMQP alone
        assert snapshot.in_flight is None
        assert snapshot.arrivals_total is None and snapshot.completions_total is None
        assert signals.oldest_age.value is None and signals.arrival_rate.value is None
        assert signals.completion_rate.value is None and signals.time_to_drain.value is None
        warned = watch.metrics.sample_warnings.labels(
            "rabbitmq", queue, "amqp", "management_unavailable"
        )
        assert warned._value.get() >= 1
        report = await probe({"url": rabbitmq_url, "queue": queue}, {}, 1.5)
        assert report["warnings"] == ["management_unavailable"]
        assert (report["depth"], report["oldest_age_seconds"], report["arrival_rate"]) == (
            20,
            None,
            None,
        )

        await asyncio.to_thread(plugins, "enable")
        # the plugin restarted with its statistics: the totals start again from 0, which the
        # history reads as a reset, and the age is a lower bound until the history spans it
        snapshot, signals = await watch.until(
            lambda s, g: not s.warnings and g.oldest_age.value is not None, 60, "the recovery"
        )
        assert snapshot.depth == 20 and snapshot.in_flight == 0
        await spread(helper, queue, 10, 2.0)
        rates = []
        for _ in range(12):
            _, signals = await watch.latest()
            rates.append(signals.arrival_rate.value)
            await watch.sampler.wait_for_sample(2.0)
    known = [r for r in rates if r is not None]
    assert known, rates
    assert all(0 <= r < 50 and math.isfinite(r) for r in known), rates


@pytest.mark.timeout(30)
async def test_the_gauge_stays_nan_when_the_age_is_unknown(
    scaler: RunningServer, stub: pb_grpc.ExternalScalerAsyncStub, rabbitmq_url: str, helper: Rabbit
) -> None:
    queue = helper.declare(unique("gauge"))
    helper.publish(queue, 12)  # no timestamp property
    # a management API that does not answer: AMQP's ready count and consumers only, so neither
    # a head timestamp nor the publish totals the arrival history is built from
    nowhere = f"http://127.0.0.1:{free_port()}"
    so = pb.ScaledObjectRef(
        name="orders", namespace="shop",
        scalerMetadata={"url": rabbitmq_url, "managementUrl": nowhere, "queue": queue, "metric": "age", "targetAge": "30s", "sampleInterval": "200ms"},
    )  # fmt: skip
    await stub.GetMetricSpec(so)
    labels = (("broker", "rabbitmq"), ("format", "amqp"), ("queue", queue))
    deadline = time.monotonic() + 10.0
    while True:
        samples = await scrape(scaler.metrics_port)
        if samples.get(("queue_age_scaler_samples_total", labels), 0) >= 5:
            break
        assert time.monotonic() < deadline, "the queue was not sampled"
        await asyncio.sleep(0.2)
    assert samples[("queue_age_scaler_queue_depth", labels)] == 12
    warned = (*labels, ("kind", "management_unavailable"))
    assert samples[("queue_age_scaler_sample_warnings_total", tuple(sorted(warned)))] >= 1
    assert math.isnan(samples[(AGE_GAUGE, labels)])  # unknown, not 0
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # and KEDA gets no age either
        await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so))
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
