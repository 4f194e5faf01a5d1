"""BullMQ with the real Node client (tests/clients/bullmq_driver.js, BullMQ 6 from npm): the
scaler reads the oldest job across ``wait``, ``prioritized`` and due ``delayed`` jobs, the jobs a
real Worker holds active, its workers, the pause flag and the counts from the id counter and the
events stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from brokers.base import Precision, QueueSnapshot
from brokers.redis_bullmq import COUNTS_SOURCE, PAUSED
from scaler.probe import probe
from tests.integration.clients import BullMQDriver, until
from tests.integration.test_redis_formats import Janitor, OpenQueue, janitor, open_queue

__all__ = ["janitor", "open_queue"]  # the fixtures, shared with the other Redis formats

StartDriver = Callable[..., Awaitable[BullMQDriver]]


@pytest.fixture
async def bullmq(redis_url: str, janitor: Janitor) -> AsyncIterator[StartDriver]:
    drivers: list[BullMQDriver] = []

    async def start(prefix: str = "bull") -> BullMQDriver:
        driver = await BullMQDriver.start(redis_url, janitor.name(), prefix)
        drivers.append(driver)
        return driver

    yield start
    for driver in drivers:
        await driver.close()


async def backdate(r: aioredis.Redis, queue: str, ids: list[str], seconds: float) -> float:
    """Make the jobs ``ids`` look added ``seconds`` ago (BullMQ's ``timestamp``, ms); that
    time, in seconds."""
    stamp = int((time.time() - seconds) * 1000)
    for id_ in ids:
        await r.hset(f"bull:{queue}:{id_}", "timestamp", stamp)
    return stamp / 1000


def age(snapshot: QueueSnapshot) -> float:
    assert snapshot.oldest_enqueued_at is not None, snapshot
    return snapshot.observed_at - snapshot.oldest_enqueued_at


async def test_oldest_prioritized_job_older_than_the_plain_ones(
    bullmq: StartDriver, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    """The reported bug: 24.8 s read from the newest plain job while a prioritized job had
    waited 34.5 s."""
    driver = await bullmq()
    queue = janitor.name()
    oldest = await backdate(r, queue, await driver.add(2, priority=5), 34.5)
    await backdate(r, queue, await driver.add(3), 24.8)
    snapshot = await open_queue("bullmq", queue).sample()
    assert snapshot.depth == 5 and snapshot.in_flight == 0
    assert snapshot.oldest_enqueued_at == pytest.approx(oldest, abs=0.001)
    assert snapshot.oldest_precision is Precision.EXACT
    assert snapshot.oldest_source == "payload:timestamp"
    assert snapshot.paused is False and snapshot.warnings == ()


async def test_oldest_job_of_any_priority_in_a_large_set(
    bullmq: StartDriver, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    driver = await bullmq()
    queue = janitor.name()
    # the oldest jobs have the lowest priority (the highest number), the last band of the set
    oldest = await backdate(r, queue, await driver.add(40, priority=9), 60.0)
    for priority in (1, 2, 3, 7):
        await backdate(r, queue, await driver.add(40, priority=priority), 10.0 + priority)
    snapshot = await open_queue("bullmq", queue).sample()
    assert snapshot.depth == 200
    assert snapshot.oldest_enqueued_at == pytest.approx(oldest, abs=0.001)
    assert snapshot.oldest_precision is Precision.EXACT


async def test_delayed_jobs_wait_from_their_due_time(
    bullmq: StartDriver, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    driver = await bullmq()
    queue = janitor.name()
    ids = await driver.add(2, delay=2000)
    due_at = (int(await r.hget(f"bull:{queue}:{ids[0]}", "timestamp") or 0) + 2000) / 1000
    adapter = open_queue("bullmq", queue)
    early = await adapter.sample()
    if early.observed_at < due_at:  # not due: not waiting
        assert early.depth == 0 and early.oldest_enqueued_at is None
    await asyncio.sleep(max(0.0, due_at - time.time()) + 0.1)
    due = await adapter.sample()
    # due, and no worker moved them to wait: they wait in the delayed set, since they fell due
    assert due.depth == 2
    assert due.oldest_enqueued_at == pytest.approx(due_at, abs=0.001)
    assert due.oldest_precision is Precision.EXACT
    # a fetching worker would promote them to wait, setting their delay to 0: the age still
    # counts from when they fell due (the job's opts keep the delay)
    await r.eval(PROMOTE, 2, f"bull:{queue}:delayed", f"bull:{queue}:wait")
    promoted = await adapter.sample()
    assert promoted.depth == 2 and await r.llen(f"bull:{queue}:wait") == 2
    assert promoted.oldest_enqueued_at == pytest.approx(due_at, abs=0.001)


#: what BullMQ's promoteDelayedJobs does to a due job without a priority
PROMOTE = """
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('LPUSH', KEYS[2], id)
  redis.call('HSET', string.gsub(KEYS[1], 'delayed$', id), 'delay', 0)
end
"""


async def test_a_real_worker_holds_jobs_active(
    bullmq: StartDriver, janitor: Janitor, open_queue: OpenQueue
) -> None:
    driver = await bullmq()
    queue = janitor.name()
    adapter = open_queue("bullmq", queue)
    first = await adapter.sample()
    assert first.consumers == 0 and first.arrivals_total is not None
    await driver.add(5)
    await driver.call("worker", concurrency=2, name="w1")
    await driver.call("worker", concurrency=1)  # an unnamed one: named after the queue alone

    async def three_held() -> bool:
        return bool((await driver.call("held"))["held"] == 3)

    await until(three_held)
    busy = await adapter.sample()
    assert (busy.depth, busy.in_flight) == (2, 3)
    assert busy.consumers == (await driver.call("workers"))["count"] == 2
    assert busy.arrivals_total - first.arrivals_total == 5  # type: ignore[operator]

    assert (await driver.call("release"))["released"] == 3

    async def three_done_two_held() -> bool:
        counts = await driver.call("counts")
        return bool((counts["completed"], counts["active"]) == (3, 2))

    await until(three_done_two_held)
    done = await adapter.sample()
    assert (done.depth, done.in_flight) == (0, 2)
    assert done.completions_total - busy.completions_total == 3  # type: ignore[operator]
    assert done.counts_exact and done.counts_source == COUNTS_SOURCE


async def test_arrivals_and_completions_exact_when_the_queue_empties_between_samples(
    bullmq: StartDriver, janitor: Janitor, open_queue: OpenQueue
) -> None:
    """A list marker would see nothing here: every job came and went between two samples."""
    driver = await bullmq()
    queue = janitor.name()
    adapter = open_queue("bullmq", queue)
    await driver.call("worker", concurrency=5)
    before = await adapter.sample()
    await driver.add(10)
    custom = await driver.call("add", count=1, opts={"jobId": f"custom-{janitor.token}"})
    assert custom["ids"] == [f"custom-{janitor.token}"]  # no id from the counter: an event

    async def all_done() -> bool:
        await driver.call("release")
        return bool((await driver.call("counts"))["completed"] == 11)

    await until(all_done)
    after = await adapter.sample()
    assert after.depth == 0 and after.in_flight == 0
    assert after.arrivals_total - before.arrivals_total == 11  # type: ignore[operator]
    assert after.completions_total - before.completions_total == 11  # type: ignore[operator]
    assert after.counts_exact


async def test_pause_and_resume(
    bullmq: StartDriver, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    driver = await bullmq()
    queue = janitor.name()
    await driver.call("pause")
    oldest = await backdate(r, queue, await driver.add(3), 12.0)
    adapter = open_queue("bullmq", queue)
    paused = await adapter.sample()
    assert paused.paused is True and PAUSED in paused.warnings
    assert paused.depth == 3 and paused.oldest_enqueued_at == pytest.approx(oldest, abs=0.001)
    await driver.call("resume")
    resumed = await adapter.sample()
    assert resumed.paused is False and PAUSED not in resumed.warnings
    assert resumed.depth == 3


async def test_legacy_paused_list(
    bullmq: StartDriver, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    driver = await bullmq()
    queue = janitor.name()
    oldest = await backdate(r, queue, await driver.add(3), 30.0)
    # BullMQ before 5 paused a queue by renaming :wait to :paused
    await r.rename(f"bull:{queue}:wait", f"bull:{queue}:paused")
    snapshot = await open_queue("bullmq", queue).sample()
    assert snapshot.depth == 3 and snapshot.paused is True
    assert snapshot.oldest_enqueued_at == pytest.approx(oldest, abs=0.001)


async def test_key_prefix(
    bullmq: StartDriver, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    driver = await bullmq("myprefix")
    queue = janitor.name()
    await driver.add(1, priority=2)
    ids = await driver.add(2)
    stamp = int((time.time() - 20) * 1000)
    await r.hset(f"myprefix:{queue}:{ids[0]}", "timestamp", stamp)
    snapshot = await open_queue("bullmq", queue, keyPrefix="myprefix").sample()
    assert snapshot.depth == 3 and snapshot.oldest_enqueued_at == pytest.approx(stamp / 1000)
    assert (await open_queue("bullmq", queue).sample()).depth == 0  # not under bull:


async def test_probe_shows_a_paused_queue_and_holds_its_workers(
    bullmq: StartDriver, redis_url: str, janitor: Janitor
) -> None:
    driver = await bullmq()
    queue = janitor.name()
    await driver.add(30)
    await driver.call("worker", concurrency=2, name="held")

    async def two_held() -> bool:
        return bool((await driver.call("held"))["held"] == 2)

    await until(two_held)
    await driver.call("pause")  # the two jobs the worker took stay active
    metadata = {"url": redis_url, "queue": queue, "format": "bullmq", "workerThroughput": "0.1"}
    out = await probe(metadata | {"sampleInterval": "200ms"}, {}, 1.0)
    assert out["paused"] is True and "paused" in out["warnings"]
    assert (out["depth"], out["in_flight"], out["consumers"]) == (28, 2, 1)
    assert out["desired_workers"] == 1 and out["reason"] == "paused: holding the workers"
    assert out["active"] is True
