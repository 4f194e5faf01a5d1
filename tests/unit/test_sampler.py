"""The sampler's schedule and its stop, against an in-test adapter (no broker): a faster trigger
takes effect at once and goes when it stops asking, a failing source backs off and answers with
its error, the history is bounded, and stopping ends whatever the adapter does."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import time
import weakref
from collections.abc import AsyncIterator

import pytest

from brokers.base import QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.formats import End
from brokers.redis_options import ListLayout
from scaler.errors import BrokerUnavailable, SampleStale, Unavailable
from scaler.metrics import Metrics
from scaler.sampler import SamplerRegistry
from scaler.trigger_spec import TriggerSpec


def source(queue: str = "q") -> QueueSource:
    return QueueSource(
        broker="fake", url="fake://", queue=queue, format="list", options=ListLayout("", End.TAIL)
    )


def spec(interval: float, window: float = 60.0, queue: str = "q") -> TriggerSpec:
    return TriggerSpec(source=source(queue), sample_interval=interval, rate_window=window)


class FakeQueue:
    """A QueueAdapter whose samples succeed (depth 0) or raise ``error``; counts them."""

    broker = "fake"

    def __init__(self, src: QueueSource, connections: Connections | None = None) -> None:
        self.queue = src.queue
        self.samples: list[float] = []  # monotonic start of each sample
        self.error: Exception | None = None
        self.closed = False

    async def sample(self) -> QueueSnapshot:
        self.samples.append(time.monotonic())
        await asyncio.sleep(0)
        if self.error is not None:
            raise self.error
        return QueueSnapshot(observed_at=time.time(), depth=0)

    async def aclose(self) -> None:
        self.closed = True

    def since(self, moment: float) -> int:
        return sum(1 for t in self.samples if t >= moment)


class Adapters:
    def __init__(self) -> None:
        self.by_queue: dict[str, FakeQueue] = {}

    def __call__(self, src: QueueSource, connections: Connections) -> FakeQueue:
        adapter = self.by_queue[src.queue] = FakeQueue(src)
        return adapter


@pytest.fixture
async def adapters() -> AsyncIterator[Adapters]:
    yield Adapters()


async def test_a_faster_trigger_is_followed_at_once_and_answered_fresh(adapters: Adapters) -> None:
    samplers = SamplerRegistry(adapters, Metrics())
    try:
        slow = samplers.get(spec(600.0))
        await slow.history(first_timeout=2.0)  # the first sample; the next is 10 minutes away
        await asyncio.sleep(0.5)  # older than 3 x 0.1 s
        fast = samplers.get(spec(0.1))
        assert fast is slow
        asked = time.monotonic()
        history = await fast.history(first_timeout=2.0)  # waits for the sample the ask woke
        assert time.time() - history[-1].observed_at < 0.3
        await asyncio.sleep(1.0)
        for _ in range(5):
            samplers.get(spec(0.1))  # KEDA keeps asking: fresh every time
            await fast.history(first_timeout=0.0)
        assert adapters.by_queue["q"].since(asked) >= 8  # every 0.1 s, not every 600 s
    finally:
        await samplers.aclose(2.0)


async def test_the_pace_goes_back_to_the_slow_trigger_once_the_fast_one_stops_asking(
    adapters: Adapters,
) -> None:
    samplers = SamplerRegistry(adapters, Metrics(), live_for=0.3)
    try:
        sampler = samplers.get(spec(600.0))
        samplers.get(spec(0.1))
        await asyncio.sleep(0.5)
        assert sampler.interval == 600.0  # the fast one lived max(0.3 s, 3 x 0.1 s)
        quiet = time.monotonic() + 0.2  # a sample already due may still run
        await asyncio.sleep(1.2)
        assert adapters.by_queue["q"].since(quiet) == 0
        samplers.get(spec(0.1))  # back: at once
        await asyncio.sleep(0.5)
        assert adapters.by_queue["q"].since(quiet) >= 3
    finally:
        await samplers.aclose(2.0)


async def test_the_window_is_the_longest_of_the_live_triggers(adapters: Adapters) -> None:
    samplers = SamplerRegistry(adapters, Metrics(), live_for=0.3)
    try:
        sampler = samplers.get(spec(0.1, window=30.0))
        samplers.get(spec(0.1, window=3600.0))
        assert sampler.window == 3600.0
        for _ in range(6):
            await asyncio.sleep(0.1)
            samplers.get(spec(0.1, window=30.0))
        assert sampler.window == 30.0
    finally:
        await samplers.aclose(2.0)


async def test_the_history_keeps_at_most_max_history_snapshots(adapters: Adapters) -> None:
    samplers = SamplerRegistry(adapters, Metrics(), max_history=5)
    try:
        sampler = samplers.get(spec(0.1, window=3_600_000_000.0))  # a window of 1,000,000 h
        while len(adapters.by_queue["q"].samples) < 10:
            await asyncio.sleep(0.1)
        history = await sampler.history(first_timeout=1.0)
        assert len(history) == 5
    finally:
        await samplers.aclose(2.0)


def test_a_history_bound_below_two_snapshots_is_refused() -> None:
    with pytest.raises(ValueError, match="max_history must be at least 2"):
        SamplerRegistry(Adapters(), Metrics(), max_history=1)


async def test_a_failing_source_backs_off_answers_its_error_at_once_and_recovers(
    adapters: Adapters,
) -> None:
    samplers = SamplerRegistry(adapters, Metrics())
    try:
        sampler = samplers.get(spec(0.1))
        await sampler.history(first_timeout=1.0)
        fake = adapters.by_queue["q"]
        fake.error = BrokerUnavailable("fake", "q", "connection refused")
        failing_since = time.monotonic()
        await asyncio.sleep(3.0)
        # pauses of 0.2, 0.4, 0.8, 1.6 s: 4 or 5 tries in 3 s, where every 0.1 s would be 30
        assert 3 <= fake.since(failing_since) <= 6
        assert sampler.failures == fake.since(failing_since)
        async with asyncio.timeout(0.5):  # no wait for a sample: the error now
            with pytest.raises(SampleStale, match="last error: fake queue 'q': connection refused"):
                await sampler.history(first_timeout=10.0)
        fake.error = None
        recovered_at = time.monotonic()
        while sampler.failures:
            await asyncio.sleep(0.1)
        await sampler.history(first_timeout=0.0)
        assert time.monotonic() - recovered_at < 3.5  # the next try, at most one backoff away
        before = fake.since(0.0)
        await asyncio.sleep(1.0)
        assert fake.since(0.0) - before >= 8  # back to every 0.1 s
    finally:
        await samplers.aclose(2.0)


async def test_a_source_failing_from_the_start_is_answered_after_its_first_try(
    adapters: Adapters,
) -> None:
    class Refused(FakeQueue):
        def __init__(self, src: QueueSource, connections: Connections) -> None:
            super().__init__(src)
            self.error = BrokerUnavailable("fake", src.queue, "connection refused")

    samplers = SamplerRegistry(Refused, Metrics())
    try:
        sampler = samplers.get(spec(1.0))
        with pytest.raises(SampleStale, match=r"no sample of .* yet: fake queue .q.: connection"):
            await sampler.history(first_timeout=1.0)
        async with asyncio.timeout(0.5):  # later requests do not wait for the first sample
            with pytest.raises(SampleStale):
                await sampler.history(first_timeout=10.0)
    finally:
        await samplers.aclose(2.0)


async def test_a_queue_that_never_answered_stops_once_no_trigger_is_live_on_it() -> None:
    class NeverAnswers(Adapters):
        def __call__(self, src: QueueSource, connections: Connections) -> FakeQueue:
            adapter = super().__call__(src, connections)
            if src.queue == "never":
                adapter.error = BrokerUnavailable("fake", src.queue, "connection refused")
            return adapter

    adapters = NeverAnswers()
    samplers = SamplerRegistry(adapters, Metrics(), idle_after=600.0, live_for=0.5)
    try:
        samplers.get(spec(0.1, queue="never"))
        answered = samplers.get(spec(0.1, queue="answered"))
        await answered.history(first_timeout=1.0)
        adapters.by_queue["answered"].error = BrokerUnavailable("fake", "answered", "down")
        async with asyncio.timeout(5.0):  # live_for, then at most one backoff of 0.2-1.6 s
            while not adapters.by_queue["never"].closed:
                await asyncio.sleep(0.05)
        assert len(samplers) == 1
        # a queue that answered once is kept while it fails: KEDA may ask again in 5 minutes
        assert not adapters.by_queue["answered"].closed and answered.failures
    finally:
        await samplers.aclose(2.0)


async def test_a_known_sampler_is_handed_back_while_it_samples_and_replaced_once_it_stopped(
    adapters: Adapters,
) -> None:
    """A route keeps the sampler it was given (the service's fast path): the registry hands it
    back, with the trigger's demand renewed, until the sampler stops; then a new one samples."""
    samplers = SamplerRegistry(adapters, Metrics(), idle_after=0.3)
    try:
        first = samplers.get(spec(0.1))
        assert samplers.get(spec(0.05), known=first) is first
        assert first.interval == 0.05  # the demand of the call that passed it is noted
        async with asyncio.timeout(5.0):  # nobody asks: idle after 0.3 s, stopped
            while len(samplers):
                await asyncio.sleep(0.05)
        assert not first.registered and adapters.by_queue["q"].closed
        second = samplers.get(spec(0.1), known=first)
        assert second is not first and second.registered and len(samplers) == 1
        await second.history(first_timeout=1.0)  # and it samples
    finally:
        await samplers.aclose(2.0)


async def test_the_error_kept_for_the_answers_holds_none_of_the_failed_samples_objects() -> None:
    class Buffer:
        """Stands for what a failed sample held: a connection, its buffers."""

    held: list[weakref.ref[Buffer]] = []

    class Fails(FakeQueue):
        async def sample(self) -> QueueSnapshot:
            buffer = Buffer()
            held.append(weakref.ref(buffer))
            try:
                raise ConnectionResetError("reset by peer")
            except ConnectionResetError:  # raised with the reset as its context
                raise BrokerUnavailable("fake", self.queue, "connection reset") from None

    samplers = SamplerRegistry(Fails, Metrics())
    try:
        sampler = samplers.get(spec(1.0))
        with pytest.raises(SampleStale, match="connection reset"):
            await sampler.history(first_timeout=1.0)
        gc.collect()
        assert held and all(ref() is None for ref in held)
        assert sampler.last_error is not None and sampler.last_error.__traceback__ is None
    finally:
        await samplers.aclose(2.0)


class SwallowsCancellation(FakeQueue):
    """Returns a snapshot when cancelled, as asyncio.wait_for did on Python 3.11 when a reply
    and the cancellation came in the same loop iteration."""

    async def sample(self) -> QueueSnapshot:
        self.samples.append(time.monotonic())
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(random.random() / 100)
        return QueueSnapshot(observed_at=time.time(), depth=0)


async def test_stopping_ends_every_sampler_even_when_their_cancellation_is_swallowed() -> None:
    samplers = SamplerRegistry(SwallowsCancellation, Metrics())
    opened = [samplers.get(spec(0.01, queue=f"q{i}")) for i in range(300)]
    await asyncio.sleep(0.5)
    async with asyncio.timeout(3.0):
        await samplers.aclose(2.0)
    assert len(samplers) == 0
    assert all(s._task is not None and s._task.done() for s in opened)
    with pytest.raises(Unavailable, match="shutting down"):
        samplers.get(spec(1.0, queue="new"))


class IgnoresCancellation(FakeQueue):
    """Keeps waiting through cancellations until released."""

    released = False

    async def sample(self) -> QueueSnapshot:
        self.samples.append(time.monotonic())
        while not IgnoresCancellation.released:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue
        return QueueSnapshot(observed_at=time.time(), depth=0)


async def test_stopping_returns_within_its_time_whatever_the_adapter_waits_on() -> None:
    samplers = SamplerRegistry(IgnoresCancellation, Metrics())
    sampler = samplers.get(spec(1.0))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    await samplers.aclose(0.5)
    assert time.monotonic() - started < 1.0
    assert sampler._task is not None and not sampler._task.done()  # left behind, cancelled
    IgnoresCancellation.released = True  # let it end, so the test's loop can close
    async with asyncio.timeout(2.0):
        await asyncio.wait({sampler._task})


async def test_the_history_now_is_the_history_when_no_wait_is_needed_and_none_otherwise(
    adapters: Adapters,
) -> None:
    """The service's no-wait path: None before the first sample, the snapshots :meth:`history`
    gives while the newest is fresh, None once a read failed (whether the last good sample or
    the error answers is then :meth:`history`'s to judge)."""
    samplers = SamplerRegistry(adapters, Metrics())
    try:
        sampler = samplers.get(spec(0.1))
        assert sampler.history_now() is None
        history = await sampler.history(first_timeout=1.0)
        now = sampler.history_now()
        assert now is not None and now[-1].observed_at >= history[-1].observed_at
        adapters.by_queue["q"].error = BrokerUnavailable("fake", "q", "connection refused")
        while not sampler.failures:
            await asyncio.sleep(0.05)
        assert sampler.history_now() is None
    finally:
        await samplers.aclose(2.0)
