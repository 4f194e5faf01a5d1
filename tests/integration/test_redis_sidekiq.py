"""Sidekiq with the real Ruby client and a real Sidekiq process (Debian's ruby-sidekiq 6.4), on
a private Redis so that the process registry holds only this test's processes: the queue's
depth and age, the jobs a process runs, the workers that serve the queue, quiet and gone
processes; scheduled jobs and retries never count as waiting."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator

import pytest
import redis.asyncio as aioredis

from brokers.base import Precision, QueueSnapshot, Reading
from brokers.connections import Connections
from brokers.redis_registry import REGISTRY_REFUSED
from brokers.registry import open_adapter
from scaler.spec import parse_metadata
from tests.integration.clients import SidekiqProcess, sidekiq_push, until
from tests.integration.conftest import RedisProcess

QUEUE = "mail"


@pytest.fixture
def processes(own_redis: RedisProcess) -> Iterator[Callable[..., SidekiqProcess]]:
    started: list[SidekiqProcess] = []

    def start(queues: list[str], concurrency: int) -> SidekiqProcess:
        process = SidekiqProcess(own_redis.url, queues, concurrency)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


async def sample(url: str, queue: str = QUEUE) -> QueueSnapshot:
    metadata = {"url": url, "queue": queue, "format": "sidekiq", "workerThroughput": "1"}
    connections = Connections()
    adapter = open_adapter(parse_metadata(metadata).source, connections)
    try:
        return await adapter.sample()
    finally:
        await adapter.aclose()
        await connections.aclose()


async def beat_shows(r: aioredis.Redis, process: SidekiqProcess, field: str, value: str) -> bool:
    """Whether ``process``'s last heartbeat wrote ``field`` = ``value`` (its identity is
    ``host:pid:random``)."""
    pid = f":{process.process.pid}:".encode()
    identities = [i for i in await r.smembers("processes") if pid in i]
    return len(identities) == 1 and await r.hget(identities[0], field) == value.encode()


async def test_jobs_scheduled_and_retries_do_not_wait(own_redis: RedisProcess) -> None:
    before = time.time()
    sidekiq_push(own_redis.url, QUEUE, plain=3, scheduled=2, retries=1)
    snapshot = await sample(own_redis.url)
    assert snapshot.depth == 3
    # no process registered: unknown, not 0 (the workers may not be Sidekiq's)
    assert (snapshot.in_flight, snapshot.consumers) == (None, None)
    assert snapshot.oldest_enqueued_at is not None
    assert before <= snapshot.oldest_enqueued_at <= snapshot.observed_at
    assert snapshot.oldest_precision is Precision.EXACT


async def test_a_real_process_runs_jobs_and_serves_the_queue(
    own_redis: RedisProcess, processes: Callable[..., SidekiqProcess]
) -> None:
    r = aioredis.Redis.from_url(own_redis.url)
    sidekiq_push(own_redis.url, QUEUE, plain=5, scheduled=2)
    sidekiq_push(own_redis.url, "other", plain=1)
    worker = processes([QUEUE, "other"], concurrency=3)
    processes(["reports"], concurrency=4)  # serves another queue only

    async def all_busy_beat() -> bool:
        identities = await r.smembers("processes")
        busy = sorted([int(await r.hget(i, "busy") or -1) for i in identities])
        return busy == [0, 3]

    await until(all_busy_beat)
    busy = await sample(own_redis.url)
    assert busy.consumers == 1  # the process, a replica; its 3 threads are its job slots
    assert busy.slots == 3
    assert busy.in_flight is not None and busy.depth is not None
    # three threads hold jobs of mail and other; none is lost or counted twice
    other = await sample(own_redis.url, "other")
    assert other.in_flight is not None and other.depth is not None
    assert busy.in_flight + other.in_flight == 3
    assert busy.depth + busy.in_flight == 5 and other.depth + other.in_flight == 1
    assert (other.consumers, other.slots) == (1, 3)

    worker.signal(signal.SIGTSTP)  # quiet: takes no more jobs, finishes what it holds
    await until(lambda: beat_shows(r, worker, "quiet", "true"))
    quiet = await sample(own_redis.url)
    assert (quiet.consumers, quiet.slots) == (0, 0) and quiet.in_flight == busy.in_flight
    await r.aclose()


async def test_processes_threads_and_jobs_of_real_processes_against_the_truth(
    own_redis: RedisProcess, processes: Callable[..., SidekiqProcess]
) -> None:
    """Two real processes serve the queue (2 and 3 threads), holding 5 of its 8 jobs: the
    processes, their threads and the jobs in flight, as of their heartbeats, with the age of
    the oldest heartbeat; once every job is done, nothing runs."""
    r = aioredis.Redis.from_url(own_redis.url)
    sidekiq_push(own_redis.url, QUEUE, plain=8)
    first, second = processes([QUEUE], concurrency=2), processes([QUEUE, "other"], concurrency=3)
    await until(lambda: beat_shows(r, first, "busy", "2"))
    await until(lambda: beat_shows(r, second, "busy", "3"))
    busy = await sample(own_redis.url)
    beats = [float(await r.hget(i, "beat") or 0) for i in await r.smembers("processes")]
    assert (busy.depth, busy.in_flight, busy.consumers, busy.slots) == (3, 5, 2, 5)
    readings = busy.readings
    assert readings.in_flight.source == "sidekiq-work"
    assert readings.in_flight.precision is Precision.ESTIMATE
    assert readings.in_flight.age == pytest.approx(busy.observed_at - min(beats), abs=0.01)
    assert 0 <= readings.in_flight.age < 10  # one heartbeat every 5 s, on a loaded machine
    assert readings.slots.precision is Precision.EXACT

    await r.set(f"{QUEUE}:release", 1)  # every job ends at once, the last three right after

    async def all_done() -> bool:
        snapshot = await sample(own_redis.url)
        return (snapshot.depth, snapshot.in_flight) == (0, 0)

    await until(all_done)
    assert (await sample(own_redis.url)).slots == 5
    await r.aclose()


async def test_a_process_whose_beat_is_older_than_a_minute_is_gone(
    own_redis: RedisProcess, processes: Callable[..., SidekiqProcess]
) -> None:
    r = aioredis.Redis.from_url(own_redis.url)
    sidekiq_push(own_redis.url, QUEUE, plain=2)
    worker = processes([QUEUE], concurrency=2)
    await until(lambda: beat_shows(r, worker, "busy", "2"))
    assert (await sample(own_redis.url)).in_flight == 2
    worker.signal(signal.SIGKILL)  # no goodbye: the registry keeps it until its keys expire
    worker.process.wait()
    (identity,) = await r.smembers("processes")
    await r.hset(identity, "beat", time.time() - 61)
    gone = await sample(own_redis.url)
    assert (gone.consumers, gone.in_flight) == (0, 0)
    await r.aclose()


@pytest.mark.parametrize("version", [7, 8])
async def test_the_registry_as_sidekiq_7_and_8_write_it(
    version: int, redis_url: str, token: str, r: aioredis.Redis
) -> None:
    """Sidekiq 7 and 8 are not in Debian: their heartbeats (launcher.rb ``❤``) written as they
    write them, under a namespace of this test's own."""
    prefix = f"qas-{token}"
    now = time.time()

    async def register(
        identity: str, queues: list[str], concurrency: int, **fields: object
    ) -> None:
        info: dict[str, object] = {
            "identity": identity,
            "queues": queues,
            "concurrency": concurrency,
        }
        if version == 8:  # capsules; the deprecated "queues" still there; concurrency in the hash
            info = {
                "identity": identity,
                "queues": queues,
                "capsules": {
                    "default": {"concurrency": concurrency, "weights": dict.fromkeys(queues, 0)},
                    "bulk": {"concurrency": 7, "weights": {"bulk": 0}},
                },
            }
        hash_ = {"info": json.dumps(info), "busy": 0, "beat": now, "quiet": "false"} | fields
        if version == 8:
            hash_["concurrency"] = concurrency + 7
        await r.sadd(f"{prefix}:processes", identity)
        await r.hset(f"{prefix}:{identity}", mapping=hash_)  # type: ignore[arg-type]

    async def running(identity: str, *queues: str) -> None:
        for tid, queue in enumerate(queues):
            payload = json.dumps({"class": "HardJob", "queue": queue, "jid": f"j{tid}"})
            work = {"queue": queue, "payload": payload, "run_at": int(now)}
            await r.hset(
                f"{prefix}:{identity}:work", f"t{tid}", json.dumps(work, separators=(",", ":"))
            )

    await register("a:1:x", [QUEUE, "other"], 5)
    await running("a:1:x", QUEUE, QUEUE, "other")
    await register("b:2:y", [QUEUE], 3, quiet="true")
    await running("b:2:y", QUEUE)
    await register("c:3:z", [QUEUE], 4, beat=now - 61)  # gone
    await register("d:4:w", ["bulk"], 2)
    await running("c:3:z", QUEUE)
    # two capsules: 7.1 to 8.0.8 record their queues (``weights``) but one total of threads;
    # 8.0.9+ each capsule's threads
    weights = [{QUEUE: 0}, {"bulk": 0}]
    two: dict[str, object] = {"identity": "e:5:v", "queues": [QUEUE, "bulk"]}
    if version == 7:
        two |= {"concurrency": 6, "weights": weights}
    else:
        two |= {
            "capsules": {
                "default": {"concurrency": 2, "mode": "strict", "weights": weights[0]},
                "bulk": {"concurrency": 4, "mode": "strict", "weights": weights[1]},
            }
        }
    await r.sadd(f"{prefix}:processes", "e:5:v")
    two_hash = {"info": json.dumps(two), "busy": 0, "beat": now - 2, "quiet": "false"}
    await r.hset(f"{prefix}:e:5:v", mapping=two_hash | {"concurrency": 6})  # type: ignore[arg-type]
    metadata = {"url": redis_url, "queue": QUEUE, "format": "sidekiq", "workerThroughput": "1"}
    connections = Connections()
    adapter = open_adapter(parse_metadata(metadata | {"keyPrefix": prefix}).source, connections)
    try:
        snapshot = await adapter.sample()
    finally:
        await adapter.aclose()
        await connections.aclose()
    # a (its default capsule, in 8) and e; b is quiet, c gone, d elsewhere
    assert snapshot.consumers == 2
    assert snapshot.in_flight == 3  # a's two and the one quiet b still runs
    readings = snapshot.readings
    if version == 7:  # e's 6 threads may serve bulk only: their share of the queue is not known
        assert (snapshot.slots, readings.slots.precision) == (5 + 6, Precision.ESTIMATE)
    else:
        assert (snapshot.slots, readings.slots.precision) == (5 + 2, Precision.EXACT)
    assert readings.consumers == Reading(Precision.EXACT, "sidekiq-processes", readings.slots.age)
    # as of the heartbeats: the oldest of those counted is e's, 2 s before
    assert readings.in_flight.precision is Precision.ESTIMATE
    assert readings.in_flight.age == pytest.approx(snapshot.observed_at - (now - 2), abs=1e-3)


async def test_a_user_who_may_not_read_the_registry_still_reads_the_queue(
    own_redis: RedisProcess, processes: Callable[..., SidekiqProcess]
) -> None:
    r = aioredis.Redis.from_url(own_redis.url)
    sidekiq_push(own_redis.url, QUEUE, plain=3)
    worker = processes(["reports"], concurrency=1)
    await until(lambda: beat_shows(r, worker, "quiet", "false"))  # registered
    await r.acl_setuser(
        "queue-only",
        enabled=True,
        passwords=["+secret"],
        keys=[f"queue:{QUEUE}"],
        commands=["+@all"],
    )
    url = own_redis.url.replace("redis://", "redis://queue-only:secret@")
    connections = Connections()
    adapter = open_adapter(
        parse_metadata(
            {"url": url, "queue": QUEUE, "format": "sidekiq"} | {"workerThroughput": "1"}
        ).source,
        connections,
    )
    try:
        snapshots = [await adapter.sample() for _ in range(2)]
    finally:
        await adapter.aclose()
        await connections.aclose()
        await r.aclose()
    for snapshot in snapshots:
        assert snapshot.depth == 3
        assert (snapshot.consumers, snapshot.in_flight) == (None, None)
        assert snapshot.warnings == (REGISTRY_REFUSED,)
