"""The arrival-history checkpoint: a restarted scaler (a new registry, new adapters whose list
markers count from 0) resumes a queue's history from the checkpoint directory and estimates the
age of jobs that were waiting before it started, where without it the age is a lower bound; a
broker counter that went down, an old or unreadable file are not resumed from."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from brokers.base import Precision, QueueSnapshot
from brokers.memory import MemoryBroker
from scaler.arrival_history import ArrivalHistory
from scaler.history_checkpoint import MAX_AGE, Checkpoints, Entry
from scaler.metrics import Metrics
from scaler.sampler import SamplerRegistry
from scaler.signals import oldest_age
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec


def spec() -> TriggerSpec:
    metadata = {
        "url": "redis://127.0.0.1:1/0",
        "queue": "reports",
        "format": "huey",  # jobs without an enqueue time: ages come from the arrival history
        "workerThroughput": "1",
        "sampleInterval": "0.1s",
    }
    return parse_metadata(metadata)


async def produce(broker: MemoryBroker) -> None:
    """A job every 0.1 s, none taken: the producer goes on while the scaler restarts."""
    queue = broker.queue("reports")
    while True:
        queue.push(f"job-{queue.arrivals_total}".encode(), time.time())
        await asyncio.sleep(0.1)


async def sample_for(samplers: SamplerRegistry, seconds: float) -> None:
    sampler = samplers.get(spec())
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        samplers.get(spec())
        await asyncio.sleep(0.1)
    await sampler.wait_for_sample(1.0)


async def age_after_restart(
    broker: MemoryBroker, checkpoints: Checkpoints | None
) -> tuple[float | None, Precision, float]:
    samplers = SamplerRegistry(broker.open, Metrics(), checkpoints=checkpoints)
    try:
        sampler = samplers.get(spec())
        history = await sampler.history(first_timeout=1.0)
        figure = oldest_age(history[-1], sampler.arrivals)
        truth = history[-1].observed_at - broker.queue("reports").oldest.enqueued_at  # type: ignore[union-attr]
        return figure.value, figure.precision, truth
    finally:
        await samplers.aclose()


async def test_a_restarted_scaler_resumes_the_history_and_estimates_at_once(tmp_path: Path) -> None:
    broker = MemoryBroker()
    producer = asyncio.create_task(produce(broker))
    try:
        first = SamplerRegistry(broker.open, Metrics(), checkpoints=Checkpoints(tmp_path, name="a"))
        await sample_for(first, 2.5)
        # A worker takes the first jobs: the oldest waiting one then arrived while the first
        # scaler watched. (The producer's first job is pushed before the first sample, so no
        # history saw it arrive and its age is rightly a lower bound; nor can a resumed
        # history place a job at its very first point once the gap's arrivals, taken at the
        # recent rate, are one short.)
        broker.queue("reports").take(3)
        broker.queue("reports").finish(3)
        await first.aclose()  # writes the checkpoint
        assert (tmp_path / "a.json").is_file()
        await asyncio.sleep(0.5)  # the restart takes a moment; jobs keep coming

        # a replica of another name reads it too (a shared volume)
        resumed = await age_after_restart(broker, Checkpoints(tmp_path, name="b"))
        fresh = await age_after_restart(broker, None)
    finally:
        producer.cancel()
    value, precision, truth = resumed
    assert value is not None and precision is Precision.ESTIMATE
    assert truth >= 2.4
    assert abs(value - truth) <= 0.3, resumed  # within a few sample intervals
    value, precision, truth = fresh  # the history starts at the restart
    assert value is not None and precision is Precision.LOWER_BOUND
    assert value < 0.5 < truth


def snapshot(arrivals: int, at: float) -> QueueSnapshot:
    return QueueSnapshot(observed_at=at, depth=1, arrivals_total=arrivals)


def test_adapter_counts_are_shifted_by_the_arrivals_the_gap_had_at_the_recent_rate() -> None:
    entry = Entry(100.0, "list-marker", 50, 2.0, ((80.0, 10), (90.0, 30), (100.0, 50)))
    # restarted at 110 with its marker counting from 0: 20 arrivals assumed in the 10 s gap
    assert entry.shifted(snapshot(0, 110.0)) == [(80.0, -60), (90.0, -40), (100.0, -20)]
    history = ArrivalHistory()
    history.add(110.0, 0)
    history.restore(entry.shifted(snapshot(0, 110.0)) or [])
    # the job 30 arrivals before the newest came at 95 s (between the points at 90 and 100)
    estimate = history.enqueue_time(0, 30)
    assert estimate is not None and estimate.precision is Precision.ESTIMATE
    assert 94.0 <= estimate.enqueued_at <= 96.0


def test_a_broker_counter_goes_on_as_it_is_and_one_that_went_down_is_not_resumed() -> None:
    entry = Entry(100.0, "stream-counters", 500, 2.0, ((90.0, 480), (100.0, 500)))
    assert entry.shifted(snapshot(530, 110.0)) == [(90.0, 480), (100.0, 500)]
    assert entry.shifted(snapshot(3, 110.0)) is None  # the stream was re-created


def test_old_and_unreadable_checkpoints_are_not_resumed_from(tmp_path: Path) -> None:
    writer = Checkpoints(tmp_path, name="a")
    now = time.time()
    writer.write(
        {
            "old": Entry(
                now - MAX_AGE - 1, "list-marker", 5, 1.0, ((now - 999, 0), (now - 995, 5))
            ),
            "new": Entry(now, "list-marker", 5, 1.0, ((now - 5, 0), (now, 5))),
        }
    )
    (tmp_path / "broken.json").write_text("{not json")
    reader = Checkpoints(tmp_path, name="b")
    assert reader.lookup("old", now) is None
    found = reader.lookup("new", now)
    assert found is not None and found.points == ((now - 5, 0), (now, 5))
