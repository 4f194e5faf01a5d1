"""The Celery adapter against a real Redis, with messages sent and held by Celery and kombu.

Each test uses names holding a fresh token, sends through a Celery app of its own (kombu's
Redis transport), and deletes every key holding the token afterwards. Tests that hold or take
messages give kombu a ``global_keyprefix`` holding the token, so their ``unacked`` hash is
their own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from queue import Empty
from typing import Any

import pytest
import redis.asyncio as aioredis
from celery import Celery
from celery.signals import before_task_publish
from kombu.entity import Exchange, Queue

from brokers.base import Precision, QueueAdapter, QueueSnapshot
from brokers.connections import Connections
from brokers.redis_celery import MAX_UNACKED_READ, UNACKED_UNREADABLE
from brokers.registry import open_adapter
from scaler.spec import parse_metadata
from tests.integration.steady import Steady, assert_counts_match, sample_steady_traffic

pytestmark = pytest.mark.integration

TASK = "reports.render"
SEP = "\x06\x16"


@pytest.fixture
def celery_app(redis_url: str, r: aioredis.Redis) -> Iterator[Callable[..., Any]]:
    """Celery apps on the test Redis; ``prefix`` becomes kombu's ``global_keyprefix``."""
    apps: list[Any] = []

    def open_(prefix: str = "", **conf: Any) -> Any:
        app = Celery("qas-test", broker=redis_url, set_as_current=False)
        if prefix:
            app.conf.broker_transport_options = {"global_keyprefix": prefix}
        app.conf.update(conf)
        apps.append(app)
        return app

    yield open_
    for app in apps:
        app.close()


#: opens a kombu ``SimpleQueue`` (app, queue name or ``Queue``): ``get_nowait()`` takes a
#: message as a worker does (``Channel._get``, then ``QoS.append`` to ``unacked``) without acking
OpenConsumer = Callable[[Any, Any], Any]


@pytest.fixture
def consumer(celery_app: Callable[..., Any]) -> Iterator[OpenConsumer]:
    """kombu consumers on an app's broker connection, closed (unacked messages restored) after."""
    connections: list[Any] = []

    def open_(app: Any, queue: Any) -> Any:
        connection = app.connection_for_read()
        connections.append(connection)
        return connection.SimpleQueue(queue)

    yield open_
    for connection in connections:
        connection.close()


@pytest.fixture
async def open_queue(
    connections: Connections, redis_url: str
) -> AsyncIterator[Callable[..., QueueAdapter]]:
    """Opens adapters the way the scaler does (trigger metadata -> source -> registry)."""
    adapters: list[QueueAdapter] = []

    def open_(queue: str, **layout: str) -> QueueAdapter:
        metadata = {"url": redis_url, "queue": queue, "format": "celery", **layout}
        adapter = open_adapter(
            parse_metadata({**metadata, "workerThroughput": "1"}).source, connections
        )
        adapters.append(adapter)
        return adapter

    yield open_
    for adapter in adapters:
        await adapter.aclose()


@pytest.fixture
def publish_time() -> Iterator[Callable[[Callable[..., None]], None]]:
    """Connects ``before_task_publish`` handlers for one test."""
    handlers: list[Callable[..., None]] = []

    def connect(handler: Callable[..., None]) -> None:
        before_task_publish.connect(handler, weak=False)
        handlers.append(handler)

    yield connect
    for handler in handlers:
        before_task_publish.disconnect(handler)


def judoscale_published_at(properties: dict[str, Any], **_: Any) -> None:
    """Judoscale's handler: the publish time, epoch seconds, in the message properties."""
    properties["published_at"] = time.time()


def hirefire_run_at(headers: dict[str, Any], **_: Any) -> None:
    """HireFire's macro: the publish time, ISO 8601 UTC, in the message headers."""
    headers["run_at"] = datetime.now(UTC).isoformat()


def send(app: Any, queue: str, priority: int | None = None, **options: Any) -> None:
    app.send_task(TASK, args=(7,), queue=queue, priority=priority, **options)


def topic_queue(name: str, exchange: str, binding_key: str) -> Any:
    return Queue(name, Exchange(exchange, type="topic"), routing_key=binding_key)  # type: ignore[no-untyped-call]


def assert_unknown_age(snapshot: QueueSnapshot) -> None:
    assert snapshot.oldest_enqueued_at is None
    assert snapshot.oldest_precision is Precision.UNKNOWN
    assert snapshot.oldest_source == ""


# --- Depth and layout ---------------------------------------------------------------------------


async def test_depth_sums_the_priority_lists_and_age_is_unknown(
    celery_app: Callable[..., Any],
    consumer: OpenConsumer,
    r: aioredis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    app, queue = celery_app(), f"qas-celery-{token}"
    priorities = [None, 0, 1, 3, 5, 6, 9, 9]
    for priority in priorities:
        send(app, queue, priority)
    # kombu's own keys: step 0 is the bare name, steps 3, 6, 9 <queue>\x06\x16<step>
    lengths = [await r.llen(key) for key in (queue, *(f"{queue}{SEP}{p}" for p in (3, 6, 9)))]
    assert lengths == [3, 2, 1, 2]

    snapshot = await open_queue(queue).sample()
    assert snapshot.depth == len(priorities) == consumer(app, queue).qsize()  # kombu's _size
    assert snapshot.in_flight == 0
    assert snapshot.consumers is None
    assert_unknown_age(snapshot)  # Celery sends no publish time: unknown, never 0
    assert snapshot.warnings == ()
    assert snapshot.counts_source == "list-marker"


async def test_key_prefix_is_kombus_global_keyprefix(
    celery_app: Callable[..., Any],
    r: aioredis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    prefix, queue = f"qas-{token}:", f"billing-{token}"
    app = celery_app(prefix)
    for priority in (0, 0, 9):
        send(app, queue, priority)
    assert await r.llen(f"{prefix}{queue}") == 2
    assert await r.llen(f"{prefix}{queue}{SEP}9") == 1

    assert (await open_queue(queue, keyPrefix=prefix).sample()).depth == 3
    assert (await open_queue(queue).sample()).depth == 0


# --- Celery's documented priority recipe: priority_steps=list(range(10)), sep=":" ---------------


def celery_docs_priorities(prefix: str) -> dict[str, Any]:
    """The transport options Celery's docs give for Redis priorities, under a key prefix."""
    return {
        "priority_steps": list(range(10)),
        "sep": ":",
        "queue_order_strategy": "priority",
        "global_keyprefix": prefix,
    }


#: the trigger metadata for that recipe
CELERY_DOCS_KEYS = {"prioritySteps": "0-9", "prioritySeparator": ":"}


async def test_celery_docs_priority_recipe_is_read_with_priority_steps_and_separator(
    celery_app: Callable[..., Any],
    consumer: OpenConsumer,
    r: aioredis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    prefix, queue = f"qas-{token}:", f"qas-celery-{token}"
    app = celery_app(broker_transport_options=celery_docs_priorities(prefix))
    priorities = [None, 0, 1, 5, 5, 9, 9, 9]
    for priority in priorities:
        send(app, queue, priority)
    # kombu's own keys: step 0 is the bare name, the others <queue>:<step>
    lists = {step: f"{prefix}{queue}{':' + str(step) if step else ''}" for step in range(10)}
    assert [await r.llen(lists[step]) for step in range(10)] == [2, 1, 0, 0, 0, 2, 0, 0, 0, 3]

    adapter = open_queue(queue, keyPrefix=prefix, **CELERY_DOCS_KEYS)
    snapshot = await adapter.sample()
    taker = consumer(app, queue)
    # kombu's own count (not qsize(): its passive declare, EXISTS, ignores global_keyprefix)
    assert snapshot.depth == len(priorities) == taker.channel._size(queue)
    assert snapshot.in_flight == 0
    assert_unknown_age(snapshot)

    # kombu's defaults read only the bare list: the others are not seen, which is why the keys
    # exist
    assert (await open_queue(queue, keyPrefix=prefix).sample()).depth == 2

    taken = [taker.get_nowait() for _ in range(3)]  # delivered, not acked: steps 0, 0, 1 first
    assert [message.properties.get("priority") for message in taken] == [0, 0, 1]
    snapshot = await adapter.sample()
    assert (snapshot.depth, snapshot.in_flight) == (len(priorities) - 3, 3)
    taken[0].ack()
    assert (await adapter.sample()).in_flight == 2


async def test_celery_docs_priority_recipe_in_flight_through_a_topic_exchange(
    celery_app: Callable[..., Any],
    consumer: OpenConsumer,
    r: aioredis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    prefix, exchange = f"qas-{token}:", f"events-{token}"
    daily = topic_queue(f"daily-{token}", exchange, "reports.#")
    app = celery_app(broker_transport_options=celery_docs_priorities(prefix), task_queues=[daily])
    send(app, daily.name, priority=5, routing_key="reports.daily.eu")
    send(app, daily.name, priority=9, routing_key="reports.weekly")
    consumer(app, daily).get_nowait()
    # the binding set's members are joined with the same sep as the priority lists
    members = await r.smembers(f"{prefix}_kombu.binding.{exchange}")
    assert members == {f"reports.#:^reports\\..*?$:{daily.name}".encode()}
    entries = [json.loads(value)[1:] for value in await r.hvals(f"{prefix}unacked")]
    assert entries == [[exchange, "reports.daily.eu"]]

    snapshot = await open_queue(daily.name, keyPrefix=prefix, **CELERY_DOCS_KEYS).sample()
    assert (snapshot.depth, snapshot.in_flight) == (1, 1)
    # with kombu's default sep the binding cannot be read, so the message is not found in
    # flight; nor is the waiting one, in list <queue>:9
    snapshot = await open_queue(daily.name, keyPrefix=prefix).sample()
    assert (snapshot.depth, snapshot.in_flight) == (0, 0)


# --- In flight ----------------------------------------------------------------------------------


async def test_in_flight_counts_this_queues_unacked_messages(
    celery_app: Callable[..., Any],
    consumer: OpenConsumer,
    r: aioredis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    prefix, mail, sms = f"qas-{token}:", f"mail-{token}", f"sms-{token}"
    app = celery_app(prefix)
    for priority in (0, 0, 9):
        send(app, mail, priority)
    send(app, sms)
    send(app, sms)
    mail_consumer, sms_consumer = consumer(app, mail), consumer(app, sms)
    taken = [mail_consumer.get_nowait(), mail_consumer.get_nowait()]  # delivered, not acked
    sms_consumer.get_nowait()
    # kombu's QoS.append: delivery tag -> [message, exchange, routing key]; Celery publishes to
    # the anonymous exchange, routing key = queue name
    entries = [json.loads(value)[1:] for value in await r.hvals(f"{prefix}unacked")]
    assert sorted(entries) == [["", mail], ["", mail], ["", sms]]

    mail_adapter = open_queue(mail, keyPrefix=prefix)
    snapshot = await mail_adapter.sample()
    assert (snapshot.depth, snapshot.in_flight) == (1, 2)
    snapshot = await open_queue(sms, keyPrefix=prefix).sample()
    assert (snapshot.depth, snapshot.in_flight) == (1, 1)

    taken[0].ack()
    assert (await mail_adapter.sample()).in_flight == 1


async def test_in_flight_routed_through_a_topic_exchange(
    celery_app: Callable[..., Any],
    consumer: OpenConsumer,
    r: aioredis.Redis,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    prefix, exchange = f"qas-{token}:", f"events-{token}"
    daily = topic_queue(f"daily-{token}", exchange, "reports.#")
    audit = topic_queue(f"audit-{token}", exchange, "audit.*")
    app = celery_app(prefix, task_queues=[daily, audit])
    send(app, daily.name, routing_key="reports.daily.eu")  # unacked: [message, exchange, key]
    send(app, audit.name, routing_key="audit.login")
    consumer(app, daily).get_nowait()
    consumer(app, audit).get_nowait()
    entries = [json.loads(value)[1:] for value in await r.hvals(f"{prefix}unacked")]
    assert sorted(entries) == [[exchange, "audit.login"], [exchange, "reports.daily.eu"]]

    snapshot = await open_queue(daily.name, keyPrefix=prefix).sample()
    assert (snapshot.depth, snapshot.in_flight) == (0, 1)


async def test_in_flight_is_unknown_beyond_the_read_limit_or_unreadable(
    r: aioredis.Redis, token: str, open_queue: Callable[..., QueueAdapter]
) -> None:
    prefix, queue = f"qas-{token}:", f"q-{token}"
    entry = json.dumps([{"properties": {}}, "", queue])
    await r.hset(f"{prefix}unacked", mapping={str(i): entry for i in range(MAX_UNACKED_READ)})
    adapter = open_queue(queue, keyPrefix=prefix)
    assert (await adapter.sample()).in_flight == MAX_UNACKED_READ

    await r.hset(f"{prefix}unacked", "one-more", entry)
    snapshot = await adapter.sample()
    assert snapshot.in_flight is None
    assert snapshot.warnings == ()

    await r.delete(f"{prefix}unacked")
    await r.hset(f"{prefix}unacked", mapping={"a": entry, "b": b"\x80\x05pickled"})
    snapshot = await adapter.sample()
    assert snapshot.in_flight is None
    assert snapshot.warnings == (UNACKED_UNREADABLE,)


# --- Oldest age from a publish time -------------------------------------------------------------


async def test_published_at_gives_the_exact_age_of_the_oldest_across_lists(
    celery_app: Callable[..., Any],
    publish_time: Callable[[Callable[..., None]], None],
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    app, queue = celery_app(), f"qas-celery-{token}"
    publish_time(judoscale_published_at)
    first_sent = time.time()
    send(app, queue, priority=9)  # the oldest message, in the last list kombu serves
    await asyncio.sleep(1.5)
    for priority in (0, 3, 9):  # the step 9 list's oldest stays at its tail
        send(app, queue, priority)

    snapshot = await open_queue(queue).sample()
    assert snapshot.depth == 4
    assert snapshot.oldest_enqueued_at is not None
    assert snapshot.oldest_enqueued_at == pytest.approx(first_sent, abs=1.0)
    assert snapshot.observed_at - snapshot.oldest_enqueued_at >= 1.5
    assert snapshot.oldest_precision is Precision.EXACT
    assert snapshot.oldest_source == "payload:properties.published_at"
    assert snapshot.warnings == ()


async def test_a_list_whose_oldest_message_has_no_time_makes_the_age_unknown(
    celery_app: Callable[..., Any],
    publish_time: Callable[[Callable[..., None]], None],
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    app, queue = celery_app(), f"qas-celery-{token}"
    send(app, queue, priority=6)  # sent before the producer stamps anything
    publish_time(judoscale_published_at)
    send(app, queue, priority=0)

    snapshot = await open_queue(queue).sample()
    assert snapshot.depth == 2
    assert_unknown_age(snapshot)  # the unstamped one may be older: no lower bound as exact
    assert snapshot.warnings == ()


async def test_timestamp_field_reads_a_header_the_producer_sets(
    celery_app: Callable[..., Any],
    publish_time: Callable[[Callable[..., None]], None],
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    app, queue = celery_app(), f"qas-celery-{token}"
    publish_time(hirefire_run_at)
    sent = time.time()
    send(app, queue)
    send(app, queue, priority=6)

    adapter = open_queue(queue, timestampField="headers.run_at", timestampUnit="iso")
    snapshot = await adapter.sample()
    assert snapshot.oldest_enqueued_at == pytest.approx(sent, abs=1.0)
    assert snapshot.oldest_precision is Precision.EXACT
    assert snapshot.oldest_source == "payload:headers.run_at"


# --- Arrivals and completions (list markers) ----------------------------------------------------


async def test_steady_traffic_counts_are_exact_while_every_list_keeps_a_backlog(
    celery_app: Callable[..., Any],
    consumer: OpenConsumer,
    token: str,
    open_queue: Callable[..., QueueAdapter],
) -> None:
    prefix, queue = f"qas-{token}:", f"qas-celery-{token}"
    app = celery_app(prefix)
    for priority in [0] * 150 + [3, 6, 9] * 5:
        send(app, queue, priority)
    # half the sends go to step 0, which the consumer drains first; the others only grow
    priorities = itertools.cycle([0, 0, 0, 3, 6, 9])
    taker = consumer(app, queue)

    def produce() -> bool:
        send(app, queue, next(priorities))
        return True

    def consume() -> bool:
        try:
            taker.get_nowait().ack()
        except Empty:
            return False
        return True

    producer, taking = Steady(60, produce), Steady(40, consume)
    first, snapshots, last = await sample_steady_traffic(
        open_queue(queue, keyPrefix=prefix), producer, taking
    )
    assert_counts_match(first, snapshots, last, producer.done, taking.done)
    assert last.depth == 165 + producer.done - taking.done
    assert last.in_flight == 0
