"""The service over real in-process gRPC, its queues on the in-memory broker (no server): KEDA's
calls and their values, the errors and their codes, the sampler's freshness, first-sample wait,
idle stop and timeouts, StreamIsActive, and an outage: UNAVAILABLE, never 0 or false, then the
answers again without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import grpc
import pytest

from brokers.base import AdapterFactory, QueueSource
from brokers.connections import Connections
from brokers.memory import MemoryAdapter, MemoryBroker
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.sampler import IDLE_AFTER
from scaler.server import RunningServer, ServerConfig, running_server
from scaler.service import FIRST_SAMPLE_TIMEOUT

#: a bound on waits for what should happen within a sample or two (never a timing assertion)
DEADLINE = 10.0


@dataclass
class Scaler:
    server: RunningServer
    stub: pb_grpc.ExternalScalerAsyncStub


def ref(queue: str = "orders", name: str = "workers", **keys: str) -> pb.ScaledObjectRef:
    metadata = {
        "url": "redis://memory:6379/0",
        "queue": queue,
        "format": "sidekiq",
        "workerThroughput": "2",
        "targetDrainTime": "1s",
        "sampleInterval": "0.2s",
        "rateWindow": "2s",
    }
    return pb.ScaledObjectRef(name=name, namespace="shop", scalerMetadata=metadata | keys)


def metrics_request(so: pb.ScaledObjectRef, name: str = "") -> pb.GetMetricsRequest:
    return pb.GetMetricsRequest(scaledObjectRef=so, metricName=name or metric_name(so))


def metric_name(so: pb.ScaledObjectRef) -> str:
    return f"queue-age-{so.scalerMetadata.get('metric', 'workers')}-{so.scalerMetadata['queue']}"


def push(broker: MemoryBroker, jobs: int, *, age: float, queue: str = "orders") -> None:
    memory = broker.queue(queue)
    for _ in range(jobs):
        memory.push(f"job-{memory.arrivals_total}".encode(), time.time() - age)


@contextlib.asynccontextmanager
async def serving(
    open_adapter: AdapterFactory,
    *,
    idle_after: float = IDLE_AFTER,
    first_sample_timeout: float = FIRST_SAMPLE_TIMEOUT,
) -> AsyncIterator[Scaler]:
    """The real server on a free port, sampling through ``open_adapter``; tests sample every
    200 ms, below serve's default floor."""
    settings = ServerConfig(
        host="127.0.0.1",
        port=0,
        metrics_port=None,
        grace=2.0,
        min_sample_interval=0.1,
        idle_after=idle_after,
        first_sample_timeout=first_sample_timeout,
    )
    channels: list[grpc.aio.Channel] = []
    try:
        async with running_server(settings, open_adapter) as server:
            channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{server.port}"))
            yield Scaler(server, pb_grpc.ExternalScalerStub(channels[0]))
    finally:  # after the server's shutdown, so that streams see it end
        for channel in channels:
            await channel.close(None)


@pytest.fixture
def broker() -> MemoryBroker:
    return MemoryBroker()


@pytest.fixture
async def scaler(broker: MemoryBroker) -> AsyncIterator[Scaler]:
    async with serving(broker.open) as running:
        yield running


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait for ``check`` to hold, up to DEADLINE: it should within a sample or two."""
    deadline = time.monotonic() + DEADLINE
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def code_of(call: Awaitable[object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), caught.value.details() or ""


# -- KEDA's calls ------------------------------------------------------------------------------


async def test_keda_calls_answer_the_workers_the_memory_queue_needs(
    broker: MemoryBroker, scaler: Scaler
) -> None:
    push(broker, 10, age=30.0)
    so = ref()
    spec = await scaler.stub.GetMetricSpec(so)
    (metric,) = spec.metricSpecs
    assert (metric.metricName, metric.targetSize, metric.targetSizeFloat) == (
        "queue-age-workers-orders",
        1,
        1.0,
    )

    async def settled() -> bool:  # once the rates are known: nothing arrives, nothing is taken
        value = (await scaler.stub.GetMetrics(metrics_request(so))).metricValues[0]
        return value.metricValueFloat == 5.0

    # 10 jobs to drain within 1 s at 2 jobs/s per worker: 5 workers
    await until(settled, "the workers never settled at 5")
    (value,) = (await scaler.stub.GetMetrics(metrics_request(so))).metricValues
    assert (value.metricName, value.metricValue) == ("queue-age-workers-orders", 5)
    assert (await scaler.stub.IsActive(so)).result is True


async def test_the_age_metric_is_the_oldest_jobs_age(broker: MemoryBroker, scaler: Scaler) -> None:
    push(broker, 3, age=30.0)
    so = ref(metric="age", targetAge="60s")
    (metric,) = (await scaler.stub.GetMetricSpec(so)).metricSpecs
    assert (metric.metricName, metric.targetSizeFloat) == ("queue-age-age-orders", 60.0)
    (value,) = (await scaler.stub.GetMetrics(metrics_request(so))).metricValues
    assert value.metricValueFloat == pytest.approx(30.0, abs=1.0)


async def test_an_empty_queue_is_inactive_and_a_job_makes_it_active(
    broker: MemoryBroker, scaler: Scaler
) -> None:
    so = ref()
    assert (await scaler.stub.IsActive(so)).result is False
    push(broker, 1, age=0.0)

    async def active() -> bool:
        return (await scaler.stub.IsActive(so)).result

    await until(active, "a waiting job never made the trigger active")


async def test_another_metric_name_is_invalid_argument_naming_both(scaler: Scaler) -> None:
    code, details = await code_of(scaler.stub.GetMetrics(metrics_request(ref(), "queue-age-x")))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "'queue-age-x'" in details and "'queue-age-workers-orders'" in details


async def test_bad_metadata_is_invalid_argument_naming_the_keys_to_set(scaler: Scaler) -> None:
    so = ref(format="huey")
    del so.scalerMetadata["workerThroughput"]  # huey shows no workers: nothing to learn from
    for call in (
        scaler.stub.GetMetricSpec(so),
        scaler.stub.GetMetrics(metrics_request(so)),
        scaler.stub.IsActive(so),
    ):
        code, details = await code_of(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert "workerThroughput" in details and "jobDuration" in details


async def test_a_refused_call_leaves_no_cycle_of_its_own_for_the_collector(scaler: Scaler) -> None:
    """A refusal ends with its status set, not with ``context.abort``'s exception, whose traceback
    and gRPC's frames made a cycle of about 40 objects per call: under a flood of broken
    ScaledObjects the collector met them in the frozen generation (scaler.process_memory). A
    refused call leaves what an answered one does (gRPC's own, about 5 objects)."""
    broken = ref(format="huey")
    del broken.scalerMetadata["workerThroughput"]
    calls = 200

    async def cycles_left(so: pb.ScaledObjectRef) -> int:
        gc.collect()
        gc.disable()
        try:
            for _ in range(calls):
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await scaler.stub.IsActive(so)
            return gc.collect()
        finally:
            gc.enable()

    await cycles_left(broken)  # the refusal cached, the sampler started, the channel warm
    await cycles_left(ref())
    answered, refused = await cycles_left(ref()), await cycles_left(broken)
    assert refused <= answered + calls // 10, (answered, refused)


# -- the sampler -------------------------------------------------------------------------------


async def test_the_first_request_waits_for_the_queues_first_sample(broker: MemoryBroker) -> None:
    push(broker, 2, age=5.0)
    broker.hang()  # the first sample gets no answer...
    asyncio.get_running_loop().call_later(0.3, broker.recover)  # ...until 0.3 s later
    async with serving(broker.open) as scaler:
        # answered from that sample, not UNAVAILABLE for want of one
        assert (await scaler.stub.IsActive(ref())).result is True


async def test_no_first_sample_in_time_is_unavailable(broker: MemoryBroker) -> None:
    broker.hang()
    async with serving(broker.open, first_sample_timeout=0.3) as scaler:
        code, details = await code_of(scaler.stub.IsActive(ref()))
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "no sample of redis queue 'orders' (sidekiq) yet" in details
        broker.recover()


async def test_a_sample_older_than_three_intervals_is_unavailable(
    broker: MemoryBroker,
) -> None:
    push(broker, 1, age=5.0)
    async with serving(broker.open, first_sample_timeout=0.3) as scaler:
        so = ref()
        assert (await scaler.stub.IsActive(so)).result is True
        broker.hang()  # samples go unanswered, and the sampler's timeout (2 s) is not up yet
        await asyncio.sleep(0.8)  # more than 3 intervals of 0.2 s since the last sample
        code, details = await code_of(scaler.stub.IsActive(so))
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "more than 3 sample intervals of 0.2s" in details
        broker.recover()


async def test_a_hanging_broker_is_answered_with_its_error_and_delays_no_other_queue() -> None:
    hanging, healthy = MemoryBroker(), MemoryBroker()
    hanging.hang()
    push(healthy, 1, age=5.0, queue="fast")

    def open_adapter(src: QueueSource, connections: Connections) -> MemoryAdapter:
        return (hanging if src.queue == "slow" else healthy).open(src, connections)

    async with serving(open_adapter, first_sample_timeout=0.3) as scaler:
        slow, fast = ref("slow"), ref("fast")
        waiting = asyncio.ensure_future(code_of(scaler.stub.IsActive(slow)))
        assert (await scaler.stub.IsActive(fast)).result is True  # while the slow one waits
        assert (await waiting)[0] == grpc.StatusCode.UNAVAILABLE

        async def timed_out() -> bool:  # after its sample timeout: the broker's error
            code, details = await code_of(scaler.stub.IsActive(slow))
            assert code == grpc.StatusCode.UNAVAILABLE
            return "could not be reached or gave no answer" in details

        await until(timed_out, "the hanging sample was never answered with its error")
        assert (await scaler.stub.IsActive(fast)).result is True
        hanging.recover()


async def test_an_idle_sampler_stops_and_releases_its_adapter(broker: MemoryBroker) -> None:
    async with serving(broker.open, idle_after=0.5) as scaler:
        assert (await scaler.stub.IsActive(ref())).result is False
        (adapter,) = broker.adapters
        assert not adapter.closed and len(scaler.server.samplers) == 1

        async def stopped() -> bool:
            return adapter.closed and len(scaler.server.samplers) == 0

        await until(stopped, "the idle sampler did not stop")
        samples = adapter.samples
        await asyncio.sleep(0.5)
        assert adapter.samples == samples  # it samples no more
        assert (await scaler.stub.IsActive(ref())).result is False  # asked again: a new one
        assert len(broker.adapters) == 2


# -- StreamIsActive ----------------------------------------------------------------------------


async def next_state(
    stream: grpc.aio.UnaryStreamCall[pb.ScaledObjectRef, pb.IsActiveResponse],
) -> bool:
    message = await asyncio.wait_for(stream.read(), DEADLINE)
    assert isinstance(message, pb.IsActiveResponse), f"the stream ended: {message!r}"
    return message.result


async def test_stream_is_active_says_false_then_true_once_work_appears_and_ends_ok_at_shutdown(
    broker: MemoryBroker,
) -> None:
    so = ref(
        sampleInterval="8s", rateWindow="16s"
    )  # a watched queue is sampled every 250 ms all the same
    async with serving(broker.open) as scaler:
        stream = scaler.stub.StreamIsActive(so)
        assert await next_state(stream) is False
        samples = broker.adapters[0].samples
        push(broker, 1, age=0.0)
        assert await next_state(stream) is True
        # within a sample of the work appearing: the next sample, or the one under way
        assert broker.adapters[0].samples - samples <= 2
        assert await next_state(stream) is True  # repeated while active
    assert await stream.code() == grpc.StatusCode.OK  # the shutdown ended it cleanly


# -- an outage ---------------------------------------------------------------------------------


async def test_an_outage_is_unavailable_never_zero_and_recovers_without_a_restart(
    broker: MemoryBroker, scaler: Scaler
) -> None:
    push(broker, 10, age=30.0)
    so = ref()

    async def workers() -> float | None:
        """The metric, or None while UNAVAILABLE; any other answer fails the test."""
        try:
            (value,) = (await scaler.stub.GetMetrics(metrics_request(so))).metricValues
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE, error
            assert "'orders'" in (error.details() or "")
            return None
        return value.metricValueFloat

    async def settled() -> bool:
        return await workers() == 5.0

    await until(settled, "the workers never settled at 5")
    broker.fail()

    async def unavailable() -> bool:
        value = await workers()
        assert value in (None, 5.0)  # the last good answer while it is fresh, never 0
        return value is None

    await until(unavailable, "the outage never made GetMetrics UNAVAILABLE")
    code, details = await code_of(scaler.stub.IsActive(so))
    assert code == grpc.StatusCode.UNAVAILABLE
    assert "the broker could not be reached" in details
    broker.queue("orders").take(6)  # the queue moved on meanwhile
    broker.recover()

    async def recovered() -> bool:
        return await workers() not in (None, 5.0)

    await until(recovered, "the scaler did not answer again after the broker came back")
    assert await workers() == 2.0  # 4 jobs left to drain in 1 s at 2 jobs/s per worker
    assert (await scaler.stub.IsActive(so)).result is True


async def test_a_misconfigured_queue_is_failed_precondition_until_fixed(
    broker: MemoryBroker, scaler: Scaler
) -> None:
    broker.misconfigure("redis key 'queue:orders' is not a list")
    code, details = await code_of(scaler.stub.IsActive(ref()))
    assert (code, details) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "redis key 'queue:orders' is not a list",
    )
    broker.recover()
    push(broker, 1, age=1.0)

    async def active() -> bool:
        try:
            return (await scaler.stub.IsActive(ref())).result
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
            return False

    await until(active, "still misconfigured after the fix")
