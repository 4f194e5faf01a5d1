"""The in-memory broker and its adapter: a memory queue as each format shows it (what the format
reports, timestamps where its jobs carry them, exact stream counters, list-marker counts with
LPOS's MAXLEN), and the broker's outage, hang and misconfiguration as the real adapters raise them."""

from __future__ import annotations

import asyncio

import pytest

from brokers.base import Precision, QueueSource
from brokers.list_marker import MIN_MAXLEN
from brokers.memory import MemoryBroker, MemoryJob
from scaler.errors import BrokerUnreachable, QueueMisconfigured
from scaler.spec import parse_metadata


def source(fmt: str, **keys: str) -> QueueSource:
    metadata = {
        "url": "redis://memory:6379/0",
        "queue": "orders",
        "format": fmt,
        "workerThroughput": "1",
    }
    if fmt == "stream":
        metadata["consumerGroup"] = "workers"
    return parse_metadata(metadata | keys).source


def fill(broker: MemoryBroker, jobs: int, *, first_at: float = 100.0) -> None:
    queue = broker.queue("orders")
    for n in range(jobs):
        queue.push(f"job-{n}".encode(), first_at + n)


def test_each_format_shows_what_it_reports() -> None:
    broker = MemoryBroker()
    fill(broker, 3)
    queue = broker.queue("orders")
    queue.take(1)
    queue.consumers = 4
    celery = broker.open(source("celery")).read(200.0)  # in flight, but no workers
    assert (celery.depth, celery.in_flight, celery.consumers) == (2, 1, None)
    dramatiq = broker.open(source("dramatiq")).read(200.0)  # workers, but not their threads
    assert (dramatiq.depth, dramatiq.in_flight, dramatiq.consumers, dramatiq.slots) == (
        2,
        1,
        4,
        None,
    )
    assert (dramatiq.oldest_enqueued_at, dramatiq.oldest_precision) == (101.0, Precision.EXACT)
    assert dramatiq.oldest_source == "payload"
    timeless = broker.open(source("list")).read(200.0)  # a plain list shows neither
    assert (timeless.depth, timeless.in_flight, timeless.consumers) == (2, None, None)
    rq = broker.open(source("rq")).read(200.0)
    assert (rq.depth, rq.in_flight, rq.consumers) == (2, 1, 4)
    resque = broker.open(source("resque")).read(200.0)  # resque jobs carry no enqueue time
    assert (resque.oldest_enqueued_at, resque.oldest_precision) == (None, Precision.UNKNOWN)
    list_with_field = broker.open(source("list", timestampField="ts")).read(200.0)
    assert list_with_field.oldest_enqueued_at == 101.0


def test_a_stream_has_exact_counters() -> None:
    broker = MemoryBroker()
    adapter = broker.open(source("stream"))
    fill(broker, 5)
    queue = broker.queue("orders")
    queue.take(3)
    queue.finish(2)
    snapshot = adapter.read(10.0)
    assert (snapshot.arrivals_total, snapshot.completions_total) == (5, 2)
    assert snapshot.counts_exact and snapshot.counts_source == "stream-counters"
    assert snapshot.oldest_source == "entry-id"


@pytest.mark.parametrize("fmt", ["sidekiq", "rq"])  # pushed at the head, and at the tail
def test_a_list_counts_arrivals_and_takes_by_its_marker(fmt: str) -> None:
    broker = MemoryBroker()
    adapter = broker.open(source(fmt))
    fill(broker, 10)
    first = adapter.read(1.0)  # sets the marker: nothing counted yet
    assert (first.arrivals_total, first.completions_total, first.counts_exact) == (0, 0, True)
    queue = broker.queue("orders")
    queue.take(4)
    for n in range(10, 17):
        queue.push(f"job-{n}".encode(), 100.0 + n)
    second = adapter.read(2.0)
    assert (second.depth, second.arrivals_total, second.completions_total) == (13, 7, 4)
    assert second.counts_exact and second.counts_source == "list-marker"


def test_rq_counts_exactly_from_its_workers_and_by_the_marker_without_them() -> None:
    """Where RQ workers are registered their counters give exact counts, however often the list
    empties; with none, now or at the previous sample, the list marker's counts stand."""
    broker = MemoryBroker()
    adapter = broker.open(source("rq"))
    queue = broker.queue("orders")
    queue.consumers = 2
    adapter.read(1.0)
    for n in range(6):  # all come and go between two samples
        queue.push(f"job-{n}".encode(), 1.5)
    queue.take(6)
    queue.finish(4)
    counted = adapter.read(2.0)
    assert (counted.depth, counted.arrivals_total, counted.completions_total) == (0, 6, 4)
    assert counted.counts_exact and counted.counts_source == "rq-worker-counters"
    queue.consumers = 0
    queue.finish(2)
    adapter.read(3.0)  # the workers stopped since the previous sample: their counts still read
    queue.push(b"job-6", 3.5)
    marked = adapter.read(4.0)  # none since: the marker's (the list was empty: a lower bound)
    assert (marked.arrivals_total, marked.completions_total) == (7, 6)
    assert not marked.counts_exact and marked.counts_source == "list-marker"


def test_sidekiq_shows_processes_threads_and_in_flight_as_of_the_last_heartbeat() -> None:
    broker = MemoryBroker()
    adapter = broker.open(source("sidekiq"))
    fill(broker, 5)
    queue = broker.queue("orders")
    queue.consumers, queue.draining, queue.concurrency = 3, 1, 10
    queue.take(2)
    beat = adapter.read(10.0)
    # the draining process is quiet: it serves no more, but its jobs still count in flight
    assert (beat.consumers, beat.slots, beat.in_flight) == (2, 20, 2)
    queue.take(2)
    stale = adapter.read(14.0)  # no heartbeat since: in flight as of the last one
    assert stale.in_flight == 2
    assert stale.readings.in_flight.precision is Precision.ESTIMATE
    assert stale.readings.in_flight.age == 4.0
    assert adapter.read(15.0).in_flight == 4  # the next heartbeat, 5 s on


def test_rabbitmq_shows_its_management_totals_as_of_the_last_statistics_refresh() -> None:
    """As the adapter reads a queue with the management API up: publish and ack totals and the
    unacknowledged count, even where consumers take every message at once (nothing stays
    ready), refreshed every 5 s and placed at the refresh; no enqueue times."""
    broker = MemoryBroker()
    adapter = broker.open(
        parse_metadata({"url": "amqp://memory/", "queue": "orders", "workerThroughput": "1"}).source
    )
    queue = broker.queue("orders")
    queue.consumers = 2
    for n in range(6):  # all taken at once
        queue.push(f"job-{n}".encode(), 1.0)
    queue.take(6)
    queue.finish(4)
    queue.in_flight = 2
    refreshed = adapter.read(10.0)
    assert (refreshed.depth, refreshed.arrivals_total, refreshed.completions_total) == (0, 6, 4)
    assert (refreshed.in_flight, refreshed.consumers) == (2, 2)
    assert refreshed.counts_exact and refreshed.counts_source == "management-totals"
    assert refreshed.counts_observed_at == 10.0 and refreshed.oldest_source == ""
    queue.push(b"job-6", 11.0)
    queue.take(1)
    queue.in_flight = 3
    held = adapter.read(14.0)  # no refresh since: the figures of 10 s
    assert (held.arrivals_total, held.in_flight, held.counts_observed_at) == (6, 2, 10.0)
    later = adapter.read(15.0)  # the next refresh, 5 s on
    assert (later.arrivals_total, later.in_flight, later.counts_observed_at) == (7, 3, 15.0)


def test_a_marker_beyond_maxlen_leaves_a_lower_bound_as_lpos_does() -> None:
    broker = MemoryBroker()
    adapter = broker.open(source("sidekiq"))
    fill(broker, 1)
    adapter.read(1.0)
    queue = broker.queue("orders")
    for n in range(1, MIN_MAXLEN + 500):
        queue.push(f"job-{n}".encode(), 100.0 + n)
    snapshot = adapter.read(2.0)
    assert not snapshot.counts_exact
    assert snapshot.arrivals_total == MIN_MAXLEN  # what LPOS's MAXLEN could see


def test_requeued_jobs_wait_at_the_oldest_end() -> None:
    broker = MemoryBroker()
    fill(broker, 3)
    queue = broker.queue("orders")
    assert queue.take(2) == 2
    queue.requeue([MemoryJob(b"job-0", 100.0), MemoryJob(b"job-1", 101.0)])
    assert queue.in_flight == 0
    assert queue.oldest == MemoryJob(b"job-0", 100.0)
    assert queue.from_push_end(b"job-0", 10) == 2
    with pytest.raises(ValueError, match="already waits"):
        queue.push(b"job-2", 1.0)


async def test_an_outage_a_hang_and_a_misconfiguration_raise_as_real_adapters_do() -> None:
    broker = MemoryBroker()
    adapter = broker.open(source("sidekiq"))
    assert (await adapter.sample()).depth == 0
    broker.fail()
    with pytest.raises(BrokerUnreachable, match="redis queue 'orders': the broker could not"):
        await adapter.sample()
    broker.misconfigure("redis key 'queue:orders' is not a list")
    with pytest.raises(QueueMisconfigured, match="is not a list"):
        await adapter.sample()
    broker.hang()
    hanging = asyncio.ensure_future(adapter.sample())
    await asyncio.sleep(0.1)
    assert not hanging.done()  # no answer at all
    broker.recover()
    assert (await asyncio.wait_for(hanging, 1.0)).depth == 0
    await adapter.aclose()
    assert adapter.closed
