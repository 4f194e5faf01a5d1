"""The one timer that starts every sampler's samples: each is started once at the time it was
last scheduled for, a cancelled place is never started, a bug in one does not stop the others,
and a sampler waiting between samples holds next to nothing the garbage collector walks."""

from __future__ import annotations

import asyncio
import gc
import time

from scaler.metrics import Metrics
from scaler.sample_clock import STALE_SHARE, SampleClock
from scaler.sampler import SamplerRegistry
from tests.unit.test_sampler import Adapters, spec


class Recorder:
    def __init__(self, name: str, calls: list[tuple[str, float]], fails: bool = False) -> None:
        self.name = name
        self.calls = calls
        self.fails = fails

    def due(self) -> None:
        self.calls.append((self.name, time.monotonic()))
        if self.fails:
            raise RuntimeError("a bug")


async def test_each_sampler_is_started_once_at_its_latest_time_in_order() -> None:
    clock = SampleClock()
    calls: list[tuple[str, float]] = []
    start = time.monotonic()
    late, early, moved, cancelled = (Recorder(n, calls) for n in ("late", "early", "moved", "x"))
    clock.schedule(late, start + 0.15)
    clock.schedule(moved, start + 0.02)
    clock.schedule(early, start + 0.05)  # later than the timer armed for moved: still kept
    clock.schedule(moved, start + 0.10)  # replaces its place at 0.02
    clock.schedule(cancelled, start + 0.01)
    clock.cancel(cancelled)
    await asyncio.sleep(0.3)
    assert [name for name, _ in calls] == ["early", "moved", "late"]
    for (_, at), wanted in zip(calls, (0.05, 0.10, 0.15), strict=True):
        assert wanted - 0.002 <= at - start < wanted + 0.05
    assert len(clock) == 0


async def test_an_earlier_time_rearms_the_timer() -> None:
    clock = SampleClock()
    calls: list[tuple[str, float]] = []
    start = time.monotonic()
    clock.schedule(Recorder("later", calls), start + 5.0)
    clock.schedule(Recorder("soon", calls), start + 0.02)
    await asyncio.sleep(0.1)
    assert [name for name, _ in calls] == ["soon"]
    clock.close()


async def test_a_failing_sampler_does_not_stop_the_others_samples() -> None:
    clock = SampleClock()
    calls: list[tuple[str, float]] = []
    start = time.monotonic()
    clock.schedule(Recorder("broken", calls, fails=True), start)
    clock.schedule(Recorder("fine", calls), start)
    clock.schedule(Recorder("next", calls), start + 0.05)
    await asyncio.sleep(0.15)
    assert sorted(name for name, _ in calls) == ["broken", "fine", "next"]


async def test_rescheduling_often_keeps_the_heap_bounded() -> None:
    clock = SampleClock()
    calls: list[tuple[str, float]] = []
    samplers = [Recorder(str(i), calls) for i in range(10)]
    far = time.monotonic() + 60.0
    for round_ in range(1_000):
        for sampler in samplers:
            clock.schedule(sampler, far + round_)
    assert len(clock) == 10
    assert len(clock._heap) <= STALE_SHARE * 10 + 65
    clock.close()
    assert calls == []


async def test_a_sampler_between_samples_holds_few_objects_the_collector_walks() -> None:
    """A sampler's own state (its history, demands, events, metrics row) is about 25 objects;
    between samples a task asleep on a timeout and an event held 18 more (43 in all), made anew
    at every pause and walked by every collection they lived through."""
    samplers = SamplerRegistry(Adapters(), Metrics())
    try:
        gc.collect()
        before = len(gc.get_objects())
        opened = [samplers.get(spec(60.0, queue=f"q{i}")) for i in range(1, 201)]
        for sampler in opened:
            await sampler.history(first_timeout=2.0)
        await asyncio.sleep(0.05)  # all of them between samples, the next a minute away
        gc.collect()
        per_sampler = (len(gc.get_objects()) - before) / len(opened)
    finally:
        await samplers.aclose(2.0)
    assert per_sampler < 30, per_sampler
