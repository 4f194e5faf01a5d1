"""The sampler's adaptive interval against an in-test queue (no broker): an idle queue slows down
to the slow bound and is fast again once it moves, a watched queue stays fast, one near its target is read when
KEDA asks,
staleness follows the interval in force, and a broker's command budget holds, the least urgent
queues slowed first."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from brokers.base import Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections, Traffic
from brokers.errors import BrokerUnreachable
from brokers.formats import End
from brokers.redis_options import ListLayout
from scaler import sampler as sampler_module
from scaler.errors import SampleStale
from scaler.metrics import Metrics
from scaler.sample_schedule import Urgency
from scaler.sampler import Sampler, SamplerRegistry
from scaler.trigger_spec import TriggerSpec

FAST = 0.1
SLOW = 0.8
#: commands one sample of the in-test queue costs its broker
COMMANDS = 2


def source(queue: str) -> QueueSource:
    return QueueSource(
        broker="fake", url="fake://", queue=queue, format="list", options=ListLayout("", End.TAIL)
    )


def spec(queue: str = "q", *, target_age: float = 60.0) -> TriggerSpec:
    return TriggerSpec(
        source=source(queue), sample_interval=FAST, rate_window=10.0, target_age=target_age
    )


class Queue:
    """A queue whose depth, oldest job and hang the test sets; counts its samples and their
    commands."""

    broker = "fake"

    def __init__(self, src: QueueSource, traffic: Traffic) -> None:
        self.queue = src.queue
        self.depth = 0
        self.enqueued_at: float | None = None
        self.toggle = False  # the depth alternates 0 / 10 at every sample
        self.hang = asyncio.Event()
        self.hang.set()
        self.down = False  # the broker refuses every sample
        self.samples: list[float] = []
        self.failures: list[float] = []
        self._traffic = traffic

    async def sample(self) -> QueueSnapshot:
        await self.hang.wait()
        if self.down:
            self.failures.append(time.monotonic())
            raise BrokerUnreachable("fake", self.queue, detail="connection refused")
        self.samples.append(time.monotonic())
        self._traffic.add(commands=COMMANDS, round_trips=1)
        if self.toggle:
            self.depth = 10 - self.depth
        exact = self.enqueued_at is not None
        return QueueSnapshot(
            observed_at=time.time(),
            depth=self.depth,
            oldest_enqueued_at=self.enqueued_at,
            oldest_precision=Precision.EXACT if exact else Precision.UNKNOWN,
        )

    async def aclose(self) -> None:
        pass

    def gaps(self, last: int) -> list[float]:
        recent = self.samples[-(last + 1) :]
        return [b - a for a, b in itertools.pairwise(recent)]

    def since(self, moment: float) -> int:
        return sum(1 for t in self.samples if t >= moment)


class Queues:
    def __init__(self) -> None:
        self.by_name: dict[str, Queue] = {}

    def __call__(self, src: QueueSource, connections: Connections) -> Queue:
        queue = self.by_name[src.queue] = Queue(src, connections.traffic(src.url))
        return queue


def urgency_of(sampler: Sampler) -> Urgency:
    return sampler.urgency  # read again, whatever an earlier assert narrowed it to


def registry(queues: Queues, *, budget: float | None = None) -> SamplerRegistry:
    return SamplerRegistry(
        queues, Metrics(), slow_interval=SLOW, broker_budget=budget, connections=Connections()
    )


async def test_an_idle_queue_slows_to_the_slow_bound_and_is_fast_again_once_it_moves() -> None:
    queues = Queues()
    samplers = registry(queues)
    try:
        sampler = samplers.get(spec())
        await sampler.history(first_timeout=1.0)
        await asyncio.sleep(3.0)  # 0.1, 0.2, 0.4, then 0.8 s apart
        queue = queues.by_name["q"]
        assert sampler.urgency is Urgency.IDLE
        assert sampler.actual_interval == SLOW
        assert all(gap >= SLOW * 0.75 for gap in queue.gaps(2)), queue.gaps(4)  # jittered
        assert len(queue.samples) < 3.0 / FAST / 2  # far fewer than at the fast interval

        queue.depth = 5  # work appears: seen within a slow interval, then read fast
        await asyncio.sleep(SLOW + 0.6)
        assert queue.depth == 5 and len(queue.gaps(3)) == 3
        assert min(queue.gaps(3)) < 0.3, queue.gaps(3)
        await asyncio.sleep(1.5)  # the depth stays 5: steady, so it slows down again
        assert urgency_of(sampler) is Urgency.STEADY
        assert sampler.actual_interval == SLOW
    finally:
        await samplers.aclose()


async def test_a_watched_queue_stays_fast_and_one_near_its_target_is_read_when_asked() -> None:
    queues = Queues()
    samplers = registry(queues)
    try:
        near, young = samplers.get(spec("near")), samplers.get(spec("young"))
        queues.by_name["near"].depth = queues.by_name["young"].depth = 3  # unchanging backlogs
        queues.by_name["near"].enqueued_at = time.time() - 40.0  # 40 s of a 60 s target
        queues.by_name["young"].enqueued_at = time.time()  # a few seconds of 60
        watched = samplers.get(spec("watched"))
        with watched.watched():
            await asyncio.sleep(2.5)
            assert near.urgency is Urgency.NEAR_TARGET
            assert near.actual_interval == SLOW  # relaxed in the background ...
            while time.monotonic() - queues.by_name["near"].samples[-1] < 2 * FAST:
                await asyncio.sleep(0.02)  # a background sample just now would answer alone
            asked = time.monotonic()
            history = await near.history(first_timeout=1.0)  # ... and read when asked
            assert queues.by_name["near"].since(asked) == 1
            assert history[-1].observed_at >= time.time() - FAST
            await near.history(first_timeout=1.0)  # the newest is fresh: no second read
            assert queues.by_name["near"].since(asked) == 1
            assert young.urgency is Urgency.STEADY and young.actual_interval == SLOW
            assert max(queues.by_name["watched"].gaps(5)) < 0.3  # idle, but watched
            assert watched.urgency is Urgency.IDLE
            await watched.history(first_timeout=1.0)
            assert queues.by_name["watched"].since(asked) <= 2  # watched: not read on asks
        await asyncio.sleep(2.5)  # no longer watched: it slows down
        assert watched.actual_interval == SLOW
    finally:
        await samplers.aclose()


async def test_kedas_ask_after_a_pause_makes_the_queue_fast_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sampler_module, "ASK_PAUSE", 1.0)
    monkeypatch.setattr(sampler_module, "FAST_AFTER_ASK", 1.0)
    queues = Queues()
    samplers = registry(queues)
    try:
        sampler = samplers.get(spec())
        await asyncio.sleep(2.5)
        assert sampler.actual_interval == SLOW
        asked = time.monotonic()
        samplers.get(spec())  # 2.5 s after the last ask: after a pause
        assert sampler.actual_interval == FAST
        await asyncio.sleep(0.6)
        assert queues.by_name["q"].since(asked) >= 4  # sampled at once, then every 0.1 s
        await asyncio.sleep(3.0)
        assert sampler.actual_interval == SLOW
    finally:
        await samplers.aclose()


async def test_staleness_follows_the_interval_in_force_not_the_configured_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the hanging sample times out after 5 s: until then no read has failed
    monkeypatch.setattr(sampler_module, "MIN_SAMPLE_TIMEOUT", 5.0)
    queues = Queues()
    samplers = registry(queues)
    try:
        sampler = samplers.get(spec())
        await asyncio.sleep(2.5)
        assert sampler.actual_interval == SLOW
        queue = queues.by_name["q"]
        queue.hang.clear()  # the next sample hangs (and times out after 2 s)
        newest = queue.samples[-1]
        await asyncio.sleep(max(0.0, newest + 1.5 - time.monotonic()))
        # 1.5 s old: stale at 3 x the trigger's 0.1 s, not at 3 x the 0.8 s in force
        history = await sampler.history(first_timeout=0.0)
        assert time.time() - history[-1].observed_at >= 1.4
        await asyncio.sleep(max(0.0, newest + 3.0 - time.monotonic()))
        with pytest.raises(SampleStale, match=r"more than 3 sample intervals of 0\.8s"):
            await sampler.history(first_timeout=0.0)
    finally:
        queues.by_name["q"].hang.set()
        await samplers.aclose()


async def test_a_failed_read_judges_the_newest_sample_by_the_fast_interval() -> None:
    queues = Queues()
    samplers = registry(queues)
    try:
        sampler = samplers.get(spec())
        await asyncio.sleep(2.5)
        assert sampler.actual_interval == SLOW  # idle: relaxed to the slow bound
        queue = queues.by_name["q"]
        queue.down = True
        newest = queue.samples[-1]
        while not queue.failures:
            await asyncio.sleep(0.02)
        failed_at = queue.failures[0]
        # before the outage, 3 x 0.8 s would have answered this sample up to 2.4 s old; once a
        # read failed, its quiet is unknown: 3 x the fast 0.1 s
        assert failed_at - newest >= 3 * FAST
        with pytest.raises(SampleStale, match=r"more than 3 sample intervals of 0\.1s.*refused"):
            await sampler.history(first_timeout=0.0)
        # the back-off starts from the fast interval, not from the relaxed one
        while len(queue.failures) < 3:
            await asyncio.sleep(0.02)
        assert queue.failures[1] - queue.failures[0] < SLOW
        queue.down = False
        recovered = time.monotonic()
        while queue.since(recovered) == 0:
            await asyncio.sleep(0.02)
        history = await sampler.history(first_timeout=0.0)
        assert history[-1].observed_at >= time.time() - 1.0
    finally:
        queues.by_name["q"].hang.set()
        await samplers.aclose()


async def test_a_broker_budget_holds_and_slows_the_least_urgent_queues_first() -> None:
    queues = Queues()
    budget = 30.0  # commands/s: 15 samples/s at 2 commands a sample
    samplers = registry(queues, budget=budget)
    try:
        moving = [samplers.get(spec(f"moving{i}")) for i in range(2)]
        idle = [samplers.get(spec(f"idle{i}")) for i in range(8)]
        for i in range(2):
            queues.by_name[f"moving{i}"].toggle = True  # changes at every sample: urgent
        await asyncio.sleep(3.0)  # the pacer measures the cost and settles
        start = time.monotonic()
        await asyncio.sleep(4.0)
        elapsed = time.monotonic() - start
        counts = {name: q.since(start) for name, q in queues.by_name.items()}
        samples_per_second = sum(counts.values()) / elapsed
        # unpaced: 2 x 10 + 8 x 1.25 = 30 samples/s; the budget allows 15
        assert samples_per_second <= budget / COMMANDS * 1.15, counts
        assert all(s.urgency is Urgency.CHANGING for s in moving)
        assert all(s.actual_interval == SLOW for s in idle)  # the idle ones at the slow bound
        moving_rate = min(counts[f"moving{i}"] for i in range(2)) / elapsed
        idle_rate = max(counts[f"idle{i}"] for i in range(8)) / elapsed
        # the idle ones at 0.8 s take 10 samples/s; the 5 left go to the two moving ones, which
        # were slowed only as far as that needs (0.4 s, 2.5 samples/s each)
        assert moving_rate > 1.6 * idle_rate, counts
        assert moving_rate >= 1.5, counts  # not throttled below what the budget leaves
    finally:
        await samplers.aclose()


class Slow(Queue):
    """A queue whose every sample takes 0.6 s; counts the samples under way at once."""

    running = 0
    most = 0

    async def sample(self) -> QueueSnapshot:
        Slow.running += 1
        Slow.most = max(Slow.most, Slow.running)
        try:
            await asyncio.sleep(0.6)
            return await super().sample()
        finally:
            Slow.running -= 1


async def test_samples_past_the_brokers_places_wait_without_timing_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sampler_module, "MAX_SAMPLES_IN_FLIGHT", 5)

    opened: list[Slow] = []

    def open_slow(src: QueueSource, connections: Connections) -> Slow:
        opened.append(Slow(src, connections.traffic(src.url)))
        return opened[-1]

    samplers = SamplerRegistry(open_slow, Metrics(), slow_interval=SLOW)
    try:
        started = [samplers.get(spec(f"q{i}")) for i in range(20)]
        # 20 first samples of 0.6 s, 5 at a time: the last ends after 2.4 s, past the 2 s a
        # sample may take, yet none took that long once it had its place
        await asyncio.sleep(3.0)
        assert Slow.most == 5
        assert all(s.last_error is None and s.failures == 0 for s in started)
        assert all(len(queue.samples) >= 1 for queue in opened)  # every one was sampled
    finally:
        await samplers.aclose()
