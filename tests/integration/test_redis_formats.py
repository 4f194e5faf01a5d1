"""The Redis adapter against a real Redis, with queues laid out by the job libraries themselves.

Each test uses queue names holding a fresh token and deletes every key holding that token (and
its entries in the libraries' shared index sets) afterwards.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import dramatiq
import pytest
import redis
import redis.asyncio as aioredis
import rq
from dramatiq.brokers.redis import RedisBroker

from brokers.base import Precision, QueueAdapter, QueueSnapshot
from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.errors import UNREACHABLE, BrokerUnavailable, QueueMisconfigured
from scaler.spec import parse_metadata
from tests.conftest import free_port
from tests.integration.clients import until
from tests.integration.conftest import RedisProcess
from tests.integration.steady import Steady, assert_counts_match, sample_steady_traffic

pytestmark = pytest.mark.integration

AGE_TOLERANCE = 1.0
#: the oldest, middle and newest job of most tests, in seconds before now
AGES = (30.0, 20.0, 10.0)


@dataclass
class Janitor:
    """Deletes the keys holding ``token`` and the index-set members registered with it."""

    token: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    members: list[tuple[str, str]] = field(default_factory=list)

    def name(self, label: str = "q") -> str:
        return f"qas-{label}-{self.token}"


@pytest.fixture
async def r(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def janitor(r: aioredis.Redis) -> AsyncIterator[Janitor]:
    janitor = Janitor()
    yield janitor
    keys = [key async for key in r.scan_iter(match=f"*{janitor.token}*", count=1000)]
    if keys:
        await r.delete(*keys)
    for key, member in janitor.members:
        remove = r.zrem if await r.type(key) == b"zset" else r.srem
        await remove(key, member)


OpenQueue = Callable[..., QueueAdapter]


@pytest.fixture
async def open_queue(connections: Connections, redis_url: str) -> AsyncIterator[OpenQueue]:
    """Opens adapters the way the scaler does (trigger metadata -> source -> registry)."""
    adapters: list[QueueAdapter] = []

    def open_(format_name: str, queue: str, url: str = redis_url, **layout: str) -> QueueAdapter:
        # a whole trigger, as the server parses it; only its source is used
        metadata = {"url": url, "queue": queue, "format": format_name, "workerThroughput": "1"}
        adapter = open_adapter(parse_metadata(metadata | layout).source, connections)
        adapters.append(adapter)
        return adapter

    yield open_
    for adapter in adapters:
        await adapter.aclose()


def age(snapshot: QueueSnapshot) -> float:
    assert snapshot.oldest_enqueued_at is not None, snapshot
    return snapshot.observed_at - snapshot.oldest_enqueued_at


def assert_age(snapshot: QueueSnapshot, expected: float, source: str) -> None:
    assert age(snapshot) == pytest.approx(expected, abs=AGE_TOLERANCE)
    assert snapshot.oldest_precision is Precision.EXACT
    assert snapshot.oldest_source == source
    assert snapshot.warnings == ()


def rq_time(seconds_ago: float) -> str:
    return datetime.fromtimestamp(time.time() - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ms_ago(seconds_ago: float) -> int:
    return int((time.time() - seconds_ago) * 1000)


# --- Sidekiq ------------------------------------------------------------------------------------


def sidekiq_payload(seconds_ago: float, version: int) -> bytes:
    """A job as Sidekiq's client LPUSHes it: 7.x writes float seconds, 8.x integer ms."""
    when = time.time() - seconds_ago
    stamp: float | int = when if version < 8 else int(when * 1000)
    job = {
        "retry": True,
        "queue": "default",
        "class": "HardJob",
        "args": [42, "x"],
        "jid": uuid.uuid4().hex[:24],
        "created_at": stamp,
        "enqueued_at": stamp,
    }
    return json.dumps(job).encode()


@pytest.mark.parametrize("version", [7, 8])
async def test_sidekiq_oldest_job_at_the_tail(
    version: int, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    queue = janitor.name()
    for seconds_ago in AGES:  # LPUSH, oldest first, as jobs arrive
        await r.lpush(f"queue:{queue}", sidekiq_payload(seconds_ago, version))
    snapshot = await open_queue("sidekiq", queue).sample()
    assert snapshot.depth == 3
    assert snapshot.in_flight is None and snapshot.consumers is None
    assert_age(snapshot, AGES[0], "payload:enqueued_at")


async def test_sidekiq_namespace_as_key_prefix(
    r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    queue = janitor.name()
    await r.lpush(f"myapp:queue:{queue}", sidekiq_payload(25, 8), sidekiq_payload(5, 8))
    await r.lpush(f"queue:{queue}", sidekiq_payload(99, 8))  # the un-namespaced queue: ignored
    snapshot = await open_queue("sidekiq", queue, keyPrefix="myapp").sample()
    assert snapshot.depth == 2
    assert_age(snapshot, 25, "payload:enqueued_at")


async def test_empty_and_missing_queue(janitor: Janitor, open_queue: OpenQueue) -> None:
    snapshot = await open_queue("sidekiq", janitor.name()).sample()
    assert snapshot.depth == 0
    assert snapshot.oldest_enqueued_at is None
    assert snapshot.warnings == ()
    assert (snapshot.arrivals_total, snapshot.completions_total) == (0, 0)


# --- RQ -----------------------------------------------------------------------------------------


@pytest.fixture
def sync_redis(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def rq_queue(sync_redis: redis.Redis, janitor: Janitor) -> rq.Queue:
    queue = rq.Queue(janitor.name(), connection=sync_redis)
    janitor.members.append(("rq:queues", queue.key))
    return queue


async def test_rq_oldest_job_at_the_head_with_workers_and_started_jobs(
    sync_redis: redis.Redis, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    queue = rq_queue(sync_redis, janitor)
    jobs = [queue.enqueue("os.getcwd", job_id=f"{janitor.token}-{i}") for i in range(4)]
    for job, seconds_ago in zip(jobs, (40.0, *AGES), strict=True):
        await r.hset(f"rq:job:{job.id}", "enqueued_at", rq_time(seconds_ago))
    worker = rq.Worker([queue], connection=sync_redis, name=f"w-{janitor.token}")
    janitor.members.append(("rq:workers", worker.key))
    worker.register_birth()  # type: ignore[no-untyped-call]
    taken = worker.dequeue_job_and_maintain_ttl(timeout=None)  # takes the 40 s old job
    assert taken is not None and taken[0].id == jobs[0].id
    worker.prepare_execution(taken[0])  # now in StartedJobRegistry (rq:wip:<q>)

    snapshot = await open_queue("rq", queue.name).sample()
    assert snapshot.depth == 3
    assert snapshot.in_flight == 1
    assert snapshot.consumers == 1
    assert_age(snapshot, AGES[0], "payload:enqueued_at")


async def test_rq_completions_from_the_workers_counters_when_the_queue_empties(
    sync_redis: redis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    """Every job comes and goes between two samples: the list marker sees none of it, RQ's
    workers count each one, and a worker that stopped is read once more from its hash: exact
    arrivals and completions."""
    queue = rq_queue(sync_redis, janitor)
    worker = rq.SimpleWorker([queue], connection=sync_redis, name=f"w-{janitor.token}")
    janitor.members.append(("rq:workers", worker.key))
    worker.register_birth()  # type: ignore[no-untyped-call]
    adapter = open_queue("rq", queue.name)
    before = await adapter.sample()
    for i in range(5):
        queue.enqueue("os.getcwd", job_id=f"{janitor.token}-ok-{i}")
    queue.enqueue("os.listdir", "/no/such/dir", job_id=f"{janitor.token}-fails")
    for _ in range(6):  # the worker runs them all, one after the other
        taken = worker.dequeue_job_and_maintain_ttl(timeout=None)
        assert taken is not None
        job, job_queue = taken
        worker.perform_job(job, job_queue, worker.prepare_execution(job))
    worker.register_death()  # type: ignore[no-untyped-call]  # leaves the workers' sets
    after = await adapter.sample()
    assert after.depth == 0 and after.counts_source == "rq-worker-counters"
    assert after.completions_total - before.completions_total == 6  # type: ignore[operator]
    # arrivals: the jobs dequeued (ended, and none in flight) plus the change in depth (0)
    assert after.arrivals_total - before.arrivals_total == 6  # type: ignore[operator]
    assert after.counts_exact  # where the list marker saw nothing at all


async def test_rq_without_registered_workers_counts_by_the_list_marker(
    sync_redis: redis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    """Consumers that are not RQ's workers keep no counter: completions are the marker's."""
    queue = rq_queue(sync_redis, janitor)
    sync_redis.rpush(queue.key, *(f"{janitor.token}-b{i}" for i in range(100)))
    ids = itertools.count()

    def push() -> bool:
        sync_redis.rpush(queue.key, f"{janitor.token}-{next(ids)}")
        return True

    def pop() -> bool:
        return sync_redis.lpop(queue.key) is not None

    producer, consumer = Steady(60, push), Steady(40, pop)
    first, snapshots, last = await sample_steady_traffic(
        open_queue("rq", queue.name), producer, consumer
    )
    assert_counts_match(first, snapshots, last, producer.done, consumer.done)


async def test_rq_oldest_time_is_read_once_per_oldest_job(
    sync_redis: redis.Redis, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    queue = rq_queue(sync_redis, janitor)
    jobs = [queue.enqueue("os.getcwd", job_id=f"{janitor.token}-{i}") for i in range(3)]
    for job, seconds_ago in zip(jobs, AGES, strict=True):
        await r.hset(f"rq:job:{job.id}", "enqueued_at", rq_time(seconds_ago))
    adapter = open_queue("rq", queue.name)
    assert age(await adapter.sample()) == pytest.approx(AGES[0], abs=AGE_TOLERANCE)
    # the same oldest job: its time is not read again (the HGET round trip is skipped)
    await r.hset(f"rq:job:{jobs[0].id}", "enqueued_at", rq_time(500))
    assert age(await adapter.sample()) == pytest.approx(AGES[0], abs=AGE_TOLERANCE)
    # a new oldest job: read
    await r.lpop(queue.key)
    assert age(await adapter.sample()) == pytest.approx(AGES[1], abs=AGE_TOLERANCE)


async def test_rq_job_hash_gone_is_unknown_with_a_warning(
    sync_redis: redis.Redis, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    queue = rq_queue(sync_redis, janitor)
    job = queue.enqueue("os.getcwd", job_id=f"{janitor.token}-0")
    await r.delete(f"rq:job:{job.id}")
    snapshot = await open_queue("rq", queue.name).sample()
    assert snapshot.depth == 1
    assert snapshot.oldest_enqueued_at is None
    assert snapshot.oldest_precision is Precision.UNKNOWN
    assert snapshot.warnings == ("missing_field",)


# --- Dramatiq -----------------------------------------------------------------------------------


@pytest.fixture
def dramatiq_broker(redis_url: str, janitor: Janitor) -> Iterator[Callable[[str], RedisBroker]]:
    brokers: list[RedisBroker] = []

    def open_(namespace: str) -> RedisBroker:
        broker = RedisBroker(url=redis_url, namespace=namespace)  # type: ignore[no-untyped-call]
        janitor.members.append((f"{namespace}:__heartbeats__", broker.broker_id))
        brokers.append(broker)
        return broker

    yield open_
    for broker in brokers:
        broker.close()


def send_email(address: str) -> None:
    """The actor of the Dramatiq tests (never run: the tests only enqueue)."""


async def dramatiq_queue(
    broker: RedisBroker, r: aioredis.Redis, janitor: Janitor, namespace: str
) -> str:
    """Sends one message per age in AGES (oldest first), then dates them AGES ago."""
    queue = janitor.name()
    actor = dramatiq.actor(
        broker=broker, actor_name=f"send_email_{janitor.token}", queue_name=queue
    )(send_email)
    messages = [actor.send(f"user{i}@example.com") for i in range(len(AGES))]
    hash_key = f"{namespace}:{queue}.msgs"
    for message, seconds_ago in zip(messages, AGES, strict=True):
        message_id = message.options["redis_message_id"]
        raw = await r.hget(hash_key, message_id)
        assert raw is not None
        stored = json.loads(raw)
        stored["message_timestamp"] = ms_ago(seconds_ago)
        await r.hset(hash_key, message_id, json.dumps(stored))
    return queue


@pytest.mark.parametrize("namespace", ["dramatiq", "custom"])
async def test_dramatiq_oldest_message_at_the_head(
    namespace: str,
    dramatiq_broker: Callable[[str], RedisBroker],
    r: aioredis.Redis,
    janitor: Janitor,
    open_queue: OpenQueue,
) -> None:
    namespace = f"{namespace}-{janitor.token}" if namespace == "custom" else namespace
    queue = await dramatiq_queue(dramatiq_broker(namespace), r, janitor, namespace)
    layout = {} if namespace == "dramatiq" else {"keyPrefix": namespace}
    snapshot = await open_queue("dramatiq", queue, **layout).sample()
    assert snapshot.depth == 3
    # the producer's broker beats, but holds no message: no worker; a first sample cannot tell
    # whether a consumer has yet to poll
    assert (snapshot.in_flight, snapshot.consumers) == (0, 0)
    assert snapshot.readings.consumers.precision is Precision.LOWER_BOUND
    assert_age(snapshot, AGES[0], "payload:message_timestamp")


async def test_dramatiq_messages_a_real_worker_holds_are_in_flight(
    dramatiq_broker: Callable[[str], RedisBroker],
    r: aioredis.Redis,
    janitor: Janitor,
    open_queue: OpenQueue,
) -> None:
    namespace = f"ns-{janitor.token}"
    broker = dramatiq_broker(namespace)
    queue, release, running = janitor.name(), threading.Event(), threading.Semaphore(0)

    def hold(n: int) -> None:
        running.release()
        release.wait(30)

    actor = dramatiq.actor(broker=broker, actor_name=f"hold_{janitor.token}", queue_name=queue)(
        hold
    )
    for n in range(6):
        actor.send(n)
    worker = dramatiq.Worker(broker, worker_threads=2, worker_timeout=100)
    worker.start()
    try:
        for _ in range(2):
            assert running.acquire(timeout=30)
        snapshot = await open_queue("dramatiq", queue, keyPrefix=namespace).sample()
        acks = [key async for key in r.scan_iter(match=f"{namespace}:__acks__.*.{queue}")]
        held = sum([await r.scard(key) for key in acks])
    finally:
        release.set()
        worker.stop()
    # two run; the worker's consumer prefetched more, which count as in flight too
    assert snapshot.in_flight is not None and snapshot.depth is not None
    assert snapshot.in_flight >= 2 and snapshot.depth + snapshot.in_flight == 6
    assert held == snapshot.in_flight


async def test_dramatiq_worker_processes_from_the_heartbeats_and_ack_sets(
    dramatiq_broker: Callable[[str], RedisBroker],
    r: aioredis.Redis,
    janitor: Janitor,
    open_queue: OpenQueue,
) -> None:
    """Two worker processes (a broker each, as each ``dramatiq`` process has) and a producer:
    once messages have waited for a poll interval both hold some, and count, exactly; once the
    queue is empty they still count while they beat, as a lower bound (a consumer that never
    held a message is not seen)."""
    namespace = f"ns-{janitor.token}"
    queue, release = janitor.name(), threading.Event()

    def hold(n: int) -> None:
        release.wait(30)

    producer = dramatiq_broker(namespace)
    actor = dramatiq.actor(broker=producer, actor_name=f"hold_{janitor.token}", queue_name=queue)
    sender = actor(hold)
    for n in range(6):
        sender.send(n)
    workers = []
    for _ in range(2):
        broker = dramatiq_broker(namespace)
        dramatiq.actor(broker=broker, actor_name=f"hold_{janitor.token}", queue_name=queue)(hold)
        workers.append(dramatiq.Worker(broker, worker_threads=1, worker_timeout=100))
    adapter = open_queue("dramatiq", queue, keyPrefix=namespace)
    for worker in workers:
        worker.start()
    try:

        async def both_hold() -> bool:
            snapshot = await adapter.sample()
            return snapshot.in_flight == 4  # each prefetches two (twice its one thread)

        await until(both_hold)
        first = await adapter.sample()
        await asyncio.sleep(1.1)  # jobs have waited for a poll interval: every consumer is seen
        busy = await adapter.sample()
        assert (busy.depth, busy.in_flight, busy.consumers, busy.slots) == (2, 4, 2, None)
        assert busy.readings.consumers.precision is Precision.EXACT
        assert first.consumers == 2 or first.readings.consumers.precision is not Precision.EXACT
        release.set()

        async def drained() -> bool:
            snapshot = await adapter.sample()
            return (snapshot.depth, snapshot.in_flight) == (0, 0)

        await until(drained)
        idle = await adapter.sample()
        assert idle.consumers == 2 and idle.readings.consumers.precision is Precision.LOWER_BOUND
        fresh = await open_queue("dramatiq", queue, keyPrefix=namespace).sample()
        assert fresh.consumers == 0  # has seen no worker hold a message: nothing to go on
        assert fresh.readings.consumers.precision is Precision.LOWER_BOUND
    finally:
        release.set()
        for worker in workers:
            worker.stop()


async def test_dramatiq_message_not_json(
    dramatiq_broker: Callable[[str], RedisBroker],
    r: aioredis.Redis,
    janitor: Janitor,
    open_queue: OpenQueue,
) -> None:
    queue = await dramatiq_queue(dramatiq_broker("dramatiq"), r, janitor, "dramatiq")
    oldest = await r.lindex(f"dramatiq:{queue}", 0)
    await r.hset(f"dramatiq:{queue}.msgs", oldest, b"\x80\x05pickled")
    snapshot = await open_queue("dramatiq", queue).sample()
    assert snapshot.depth == 3
    assert snapshot.oldest_enqueued_at is None
    assert snapshot.warnings == ("not_json",)


# --- Plain lists --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("oldest_end", "push", "unit", "value"),
    [
        ("head", "rpush", "iso", rq_time),
        ("tail", "lpush", "ms", ms_ago),
        ("tail", "lpush", "auto", lambda seconds_ago: time.time() - seconds_ago),
    ],
)
async def test_list_with_prefix_field_and_end(
    oldest_end: str,
    push: str,
    unit: str,
    value: Callable[[float], object],
    r: aioredis.Redis,
    janitor: Janitor,
    open_queue: OpenQueue,
) -> None:
    queue = janitor.name()
    for seconds_ago in AGES:
        payload = json.dumps({"task": "resize", "meta": {"enqueued_at": value(seconds_ago)}})
        await getattr(r, push)(f"jobs:{queue}", payload)
    adapter = open_queue(
        "list",
        queue,
        keyPrefix="jobs:",
        oldestEnd=oldest_end,
        timestampField="meta.enqueued_at",
        timestampUnit=unit,
    )
    snapshot = await adapter.sample()
    assert snapshot.depth == 3
    assert_age(snapshot, AGES[0], "payload:meta.enqueued_at")


# --- Bad payloads -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "warning", "precision"),
    [
        (b"HardJob[42]", "not_json", Precision.UNKNOWN),
        (b'{"class": "HardJob", "args": []}', "missing_field", Precision.UNKNOWN),
        (b'{"class": "HardJob", "enqueued_at": "today"}', "bad_type", Precision.UNKNOWN),
        (lambda: sidekiq_payload(-60, 8), "future_timestamp", Precision.ESTIMATE),
        (lambda: sidekiq_payload(-3600, 8), "absurd_timestamp", Precision.UNKNOWN),
        (b'{"enqueued_at": 915148800.0}', "absurd_timestamp", Precision.UNKNOWN),  # 1999
    ],
    ids=["not json", "missing field", "string time", "1 min ahead", "1 h ahead", "1999"],
)
async def test_bad_oldest_payload(
    payload: bytes | Callable[[], bytes],
    warning: str,
    precision: Precision,
    r: aioredis.Redis,
    janitor: Janitor,
    open_queue: OpenQueue,
) -> None:
    queue = janitor.name()
    oldest = payload() if callable(payload) else payload
    await r.lpush(f"queue:{queue}", oldest, sidekiq_payload(5, 8))
    snapshot = await open_queue("sidekiq", queue).sample()
    assert snapshot.depth == 2
    assert snapshot.warnings == (warning,)
    assert snapshot.oldest_precision is precision
    if precision is Precision.ESTIMATE:
        assert age(snapshot) == 0.0  # clock skew: clamped, never negative
    else:
        assert snapshot.oldest_enqueued_at is None


# --- Errors and connections ---------------------------------------------------------------------


async def test_wrong_key_type_names_the_key_and_the_type(
    r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    queue = janitor.name()
    await r.set(f"queue:{queue}", "not a list")
    with pytest.raises(QueueMisconfigured, match=rf"'queue:{queue}' is not a list"):
        await open_queue("sidekiq", queue).sample()

    await r.rpush(f"rq:wip:{queue}", "job")
    with pytest.raises(QueueMisconfigured, match=rf"'rq:wip:{queue}' is not a sorted set"):
        await open_queue("rq", queue).sample()


async def test_unreachable_redis_is_unavailable_without_the_password(
    janitor: Janitor, open_queue: OpenQueue
) -> None:
    url = f"redis://admin:s3cret-pw@127.0.0.1:{free_port()}/0"
    adapter = open_queue("sidekiq", janitor.name(), url=url)
    with pytest.raises(BrokerUnavailable) as caught:
        await adapter.sample()
    assert caught.value.queue == janitor.name()
    assert str(caught.value) == f"redis queue {janitor.name()!r}: {UNREACHABLE}"
    assert "Error 111" in caught.value.detail  # the cause, for the server's log only
    assert "s3cret-pw" not in caught.value.logged and url not in caught.value.logged


async def test_adapter_reconnects_after_a_redis_restart(
    own_redis: RedisProcess, open_queue: OpenQueue
) -> None:
    adapter = open_queue("sidekiq", "restarts", url=own_redis.url)
    writer = redis.Redis(port=own_redis.port)
    writer.lpush("queue:restarts", sidekiq_payload(12, 8))
    assert (await adapter.sample()).depth == 1

    own_redis.stop()
    with pytest.raises(BrokerUnavailable):
        await adapter.sample()

    own_redis.start()  # empty again: nothing was saved
    writer.lpush("queue:restarts", sidekiq_payload(7, 8), sidekiq_payload(3, 8))
    writer.close()
    snapshot = await adapter.sample()
    assert snapshot.depth == 2
    assert age(snapshot) == pytest.approx(7, abs=AGE_TOLERANCE)


async def test_adapters_on_one_url_share_one_client(
    redis_url: str, r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    client_name = f"qas-{janitor.token}"
    url = f"{redis_url}{'&' if '?' in redis_url else '?'}client_name={client_name}"

    async def connections() -> int:
        return sum(1 for entry in await r.client_list() if entry.get("name") == client_name)

    first = open_queue("sidekiq", janitor.name("a"), url=url)
    second = open_queue("rq", janitor.name("b"), url=url)
    await first.sample()
    await second.sample()
    assert await connections() == 1
    await first.aclose()
    await second.sample()  # still open for the other adapter
    assert await connections() == 1
    await second.aclose()

    async def closed() -> bool:  # Redis drops the client once it has read the socket's close
        return await connections() == 0

    await until(closed, seconds=5)


def test_registry_imports_redis_only_when_used() -> None:
    code = "import sys, brokers.registry; print('redis' in sys.modules)"
    top = Path(__file__).parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=top, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# --- Arrivals and completions (list marker) -----------------------------------------------------


@dataclass
class Traffic:
    """A producer and a consumer at steady rates on one list, each counting what it did."""

    client: aioredis.Redis
    key: str
    push: str
    pop: str
    produced: int = 0
    consumed: int = 0
    running: bool = True

    async def produce(self, rate: float) -> None:
        await self._steady(rate, self._push_one)

    async def consume(self, rate: float) -> None:
        await self._steady(rate, self._pop_one)

    async def _push_one(self) -> None:
        await getattr(self.client, self.push)(self.key, sidekiq_payload(0, 8))
        self.produced += 1

    async def _pop_one(self) -> None:
        if await getattr(self.client, self.pop)(self.key) is not None:
            self.consumed += 1

    async def _steady(self, rate: float, step: Callable[[], Awaitable[None]]) -> None:
        start, done = time.monotonic(), 0
        while self.running:
            await step()
            done += 1
            await asyncio.sleep(max(0.0, start + done / rate - time.monotonic()))


@pytest.mark.parametrize(
    ("format_name", "layout", "push", "pop"),
    [
        ("sidekiq", {}, "lpush", "rpop"),
        ("list", {"oldestEnd": "head", "timestampField": "enqueued_at"}, "rpush", "lpop"),
    ],
    ids=["push at head", "push at tail"],
)
async def test_steady_traffic_counts_are_exact_while_a_backlog_remains(
    format_name: str,
    layout: dict[str, str],
    push: str,
    pop: str,
    redis_url: str,
    r: aioredis.Redis,
    janitor: Janitor,
    open_queue: OpenQueue,
) -> None:
    queue = janitor.name()
    key = f"queue:{queue}" if format_name == "sidekiq" else queue
    await getattr(r, push)(key, *(sidekiq_payload(60, 8) for _ in range(100)))
    adapter = open_queue(format_name, queue, **layout)
    traffic = Traffic(aioredis.Redis.from_url(redis_url), key, push, pop)

    first = await adapter.sample()
    tasks = [asyncio.create_task(traffic.produce(50)), asyncio.create_task(traffic.consume(40))]
    snapshots = []
    for _ in range(12):  # ~6 s, a sample every 0.5 s
        await asyncio.sleep(0.5)
        snapshots.append(await adapter.sample())
    traffic.running = False
    await asyncio.gather(*tasks)
    await traffic.client.aclose()
    last = await adapter.sample()

    assert all(s.counts_exact for s in [*snapshots, last])
    assert all(s.depth for s in snapshots)  # the backlog never emptied
    arrivals = last.arrivals_total - first.arrivals_total  # type: ignore[operator]
    completions = last.completions_total - first.completions_total  # type: ignore[operator]
    assert traffic.produced > 200 and traffic.consumed > 150
    assert abs(arrivals - traffic.produced) <= 0.15 * traffic.produced
    assert abs(completions - traffic.consumed) <= 0.15 * traffic.consumed
    assert (arrivals, completions) == (traffic.produced, traffic.consumed)
    assert last.depth == 100 + traffic.produced - traffic.consumed
    assert last.counts_source == "list-marker"


async def test_counts_are_lower_bounds_when_the_list_drains_between_samples(
    r: aioredis.Redis, janitor: Janitor, open_queue: OpenQueue
) -> None:
    queue = janitor.name()
    key = f"queue:{queue}"
    adapter = open_queue("sidekiq", queue)
    await r.lpush(key, *(sidekiq_payload(9, 8) for _ in range(5)))
    before = await adapter.sample()
    await r.lpush(key, sidekiq_payload(3, 8))
    await r.rpop(key, 6)  # everything, marker included, is taken
    await r.lpush(key, sidekiq_payload(2, 8), sidekiq_payload(1, 8))
    after = await adapter.sample()
    assert after.counts_exact is False
    # true: 3 arrived, 6 taken; seen at least: 2 arrived, 5 taken
    assert after.arrivals_total - before.arrivals_total == 2  # type: ignore[operator]
    assert after.completions_total - before.completions_total == 5  # type: ignore[operator]
    await r.lpush(key, sidekiq_payload(0, 8))
    assert (await adapter.sample()).counts_exact is True
