"""The RabbitMQ adapter on a real RabbitMQ (3.10 from the OS packages): classic, quorum and
priority queues, Celery's, a backlog nobody consumes, messages held unacknowledged by a real
consumer, a missing queue, and one management request per vhost however many queues."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator

import httpx
import pika
import pytest
from celery import Celery

from brokers.base import Precision, QueueSnapshot
from brokers.connections import Connections
from brokers.rabbitmq import RabbitQueueAdapter
from brokers.rabbitmq_options import STATISTICS_INTERVAL
from brokers.registry import open_adapter
from scaler.errors import UNREACHABLE, BrokerUnavailable, QueueMisconfigured
from tests.conftest import closed_port
from tests.integration.rabbit import Rabbit, rabbit, spec_for, spread, unique, watching

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

#: how long the broker may take to show a new queue's figures: its own statistics emission
#: and the management collector's, 5 s each by default
STATS_DELAY = 15.0


@pytest.fixture
def helper(rabbitmq_url: str) -> Iterator[Rabbit]:
    with rabbit(rabbitmq_url) as made:
        yield made


async def test_classic_queue_age_from_head_message_timestamp(
    rabbitmq_url: str, helper: Rabbit
) -> None:
    queue = helper.declare(unique("classic"))
    enqueued = time.time() - 40.0
    for age in (40.0, 30.0, 20.0):  # the oldest first, each with the AMQP timestamp property
        helper.publish(queue, timestamp=int(time.time() - age))
    async with watching(spec_for(rabbitmq_url, queue)) as watch:
        # the head is read at once; the publish totals come with the management API's next
        # statistics refresh (every 5 s; later on a busy node: seen once in a full run)
        snapshot, signals = await watch.until(
            lambda s, _: (
                s.oldest_source == "head_message_timestamp" and s.arrivals_total is not None
            ),
            STATS_DELAY,
            "the head and the publish totals",
        )
    assert signals.oldest_age.value == pytest.approx(snapshot.observed_at - enqueued, abs=1.5)
    assert signals.oldest_age.precision is Precision.EXACT
    assert (snapshot.depth, snapshot.in_flight, snapshot.consumers) == (3, 0, 0)
    assert snapshot.arrivals_total == 3
    assert snapshot.counts_source == "management-totals"


async def test_quorum_queue_age_from_the_arrival_history(rabbitmq_url: str, helper: Rabbit) -> None:
    queue = helper.declare(unique("quorum"), quorum=True)
    # read every second throughout: an empty queue otherwise relaxes toward the slow bound, and
    # the estimate is then only as close as the gap between the reads around the first publish
    # (a CI run: 15.7 s for 12.0 s after a 7 s gap, within that gap but not this tolerance)
    spec = spec_for(rabbitmq_url, queue, slowSampleInterval="1s")
    async with watching(spec) as watch:
        await watch.until(lambda s, _: s.arrivals_total is not None, STATS_DELAY, "first totals")
        await spread(helper, queue, 40, 8.0)  # no timestamps: quorum queues show none anyway
        # once the broker has shown every publish, the history spans the oldest job
        snapshot, signals = await watch.until(
            lambda s, _: s.arrivals_total == 40, STATS_DELAY, "all 40 publishes"
        )
    truth = snapshot.observed_at - helper.published[queue][0]
    assert signals.oldest_age.source == "arrival-history"
    assert signals.oldest_age.precision is Precision.ESTIMATE
    # the first publish lies between the last refresh that showed 0 and the first that showed
    # some (one statistics period apart), and the history spreads those arrivals over the whole
    # gap: the estimate is at most a period older than the truth, never younger by more than
    # the spacing of the reads (four runs alone: 1.30 to 1.42 s older)
    estimate = signals.oldest_age.value
    assert estimate is not None
    assert (
        truth - spec.sample_interval
        <= estimate
        <= truth + STATISTICS_INTERVAL + spec.sample_interval
    )
    assert snapshot.depth == 40
    assert snapshot.oldest_enqueued_at is None  # quorum queues have no head_message_timestamp
    assert signals.arrival_rate.value is not None and signals.arrival_rate.value > 0


async def test_celery_tasks_over_amqp(rabbitmq_url: str, helper: Rabbit) -> None:
    queue = unique("celery")
    app = Celery("qas-test", broker=rabbitmq_url)
    try:
        first = time.time()
        for _ in range(6):
            app.send_task("tasks.add", args=(1, 2), queue=queue)
            await asyncio.sleep(0.5)
        helper.queues.append(queue)  # Celery declared it (classic, durable): delete it after
        async with watching(spec_for(rabbitmq_url, queue)) as watch:
            snapshot, signals = await watch.until(
                lambda s, g: s.arrivals_total == 6 and g.oldest_age.value is not None,
                STATS_DELAY,
                "the six tasks and an age",
            )
    finally:
        with app.connection_for_write() as connection:
            connection.default_channel.exchange_delete(queue)
        app.close()
    assert snapshot.depth == 6
    assert snapshot.consumers == 0
    # Celery sets no AMQP timestamp: the scaler started after the tasks were sent, so the
    # arrival history only knows they are older than its first point
    assert signals.oldest_age.source == "arrival-history"
    assert signals.oldest_age.precision is Precision.LOWER_BOUND
    age = signals.oldest_age.value
    assert age is not None and 0 < age <= snapshot.observed_at - first + 0.5


async def test_priority_queue_head_is_a_lower_bound(rabbitmq_url: str, helper: Rabbit) -> None:
    queue = helper.declare(unique("priority"), arguments={"x-max-priority": 10})
    helper.publish(queue, timestamp=int(time.time() - 30), priority=1)
    head = time.time() - 10
    helper.publish(queue, timestamp=int(head), priority=9)
    async with watching(spec_for(rabbitmq_url, queue)) as watch:
        snapshot, signals = await watch.until(
            lambda s, _: s.oldest_source == "head_message_timestamp", STATS_DELAY, "the head"
        )
    # the broker shows the head of the highest priority: the older low-priority job waits too
    assert signals.oldest_age.precision is Precision.LOWER_BOUND
    assert signals.oldest_age.value == pytest.approx(snapshot.observed_at - head, abs=1.5)
    assert snapshot.depth == 2


async def test_backlog_with_no_consumers(rabbitmq_url: str, helper: Rabbit) -> None:
    queue = helper.declare(unique("backlog"))
    helper.publish(queue, 50)
    async with watching(spec_for(rabbitmq_url, queue)) as watch:
        snapshot, signals = await watch.until(  # the management API fills a new queue's
            lambda s, _: s.in_flight is not None and s.consumer_capacity is not None,  # figures
            STATS_DELAY,  # one statistics interval apart, not all at once
            "the management figures",
        )
    assert (snapshot.depth, snapshot.in_flight, snapshot.consumers) == (50, 0, 0)
    assert snapshot.consumer_capacity == 0.0
    assert signals.depth == 50


async def test_unacknowledged_messages_are_in_flight(rabbitmq_url: str, helper: Rabbit) -> None:
    queue = helper.declare(unique("unacked"))
    helper.publish(queue, 10)
    held = threading.Event()
    stop = threading.Event()

    def consume_without_acking() -> None:  # a real consumer that takes 3 and works "forever"
        connection = pika.BlockingConnection(pika.URLParameters(rabbitmq_url))
        channel = connection.channel()
        channel.basic_qos(prefetch_count=3)
        received: list[int] = []
        channel.basic_consume(queue, lambda *_: received.append(1))
        while not stop.is_set():
            connection.process_data_events(0.1)
            if len(received) == 3:
                held.set()
        connection.close()  # the broker requeues the three

    consumer = threading.Thread(target=consume_without_acking)
    consumer.start()
    try:
        assert await asyncio.to_thread(held.wait, 10.0)
        async with watching(spec_for(rabbitmq_url, queue)) as watch:
            snapshot, _ = await watch.until(
                lambda s, _: s.in_flight == 3, STATS_DELAY, "three messages in flight"
            )
    finally:
        stop.set()
        await asyncio.to_thread(consumer.join)
    assert (snapshot.depth, snapshot.consumers) == (7, 1)


def quorum_leader(queue: str, action: str) -> None:
    """``action`` on the Ra server of the quorum ``queue`` (vhost /), inside the broker:
    ``suspend``/``resume`` freeze it (it stays the leader but answers nothing), ``stop``/``restart``
    take it down (no member online) and back."""
    calls = {
        "suspend": "sys:suspend(whereis(element(1, Leader)))",
        "resume": "sys:resume(whereis(element(1, Leader)))",
        "stop": "rabbit_quorum_queue:stop_server(Leader)",
        "restart": "rabbit_quorum_queue:restart_server(Leader)",
    }
    expression = (
        f'{{ok, Q}} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"{queue}">>)), '
        f"Leader = amqqueue:get_pid(Q), {calls[action]}."
    )
    subprocess.run(["rabbitmqctl", "eval", expression], check=True, capture_output=True, timeout=60)


async def management_ready(queue: str, count: int) -> None:
    """Wait until the management API shows ``count`` messages ready in ``queue``."""
    async with httpx.AsyncClient(auth=("guest", "guest"), timeout=5) as api:
        deadline = time.monotonic() + STATS_DELAY
        while True:
            reply = await api.get(f"http://127.0.0.1:15672/api/queues/%2F/{queue}")
            if reply.status_code == 200 and reply.json().get("messages_ready") == count:
                return
            assert time.monotonic() < deadline, f"the management API never showed {count} ready"
            await asyncio.sleep(0.5)


@pytest.mark.timeout(120)
async def test_a_quorum_queue_whose_leader_is_silent_or_gone_never_reads_as_empty(
    connections: Connections, rabbitmq_url: str, helper: Rabbit
) -> None:
    """RabbitMQ answers a passive declare of a quorum queue with 0/0 when its leader does not
    answer within 250 ms or there is none: the adapter must not pass that off as an empty queue."""
    queue = helper.declare(unique("quorum-leader"), quorum=True)
    helper.publish(queue, 5)
    await management_ready(queue, 5)
    adapter = open_adapter(spec_for(rabbitmq_url, queue).source, connections)
    try:
        snapshot = await adapter.sample()
        assert (snapshot.depth, snapshot.warnings) == (5, ())

        await asyncio.to_thread(quorum_leader, queue, "suspend")
        try:
            snapshot = await adapter.sample()
        finally:
            await asyncio.to_thread(quorum_leader, queue, "resume")
        assert snapshot.depth == 5
        # the management API's entry for a queue whose leader is silent leaves its consumers
        # out at times (seen once in CI): unknown then, never a count made up
        assert snapshot.consumers in (0, None)
        assert snapshot.warnings == ("quorum_stat_unanswered",)

        await asyncio.to_thread(quorum_leader, queue, "stop")
        try:
            with pytest.raises(BrokerUnavailable) as caught:
                for _ in range(int(STATS_DELAY * 2)):  # until the management API shows it
                    snapshot = await adapter.sample()
                    assert snapshot.depth == 5, snapshot
                    await asyncio.sleep(0.5)
            assert "the quorum queue has no leader" in str(caught.value)
        finally:
            await asyncio.to_thread(quorum_leader, queue, "restart")
        recovered: QueueSnapshot | None = None
        for _ in range(int(STATS_DELAY * 2)):  # the new leader's figures, as before the stop
            with contextlib.suppress(BrokerUnavailable):
                recovered = await adapter.sample()
            if recovered is not None and recovered.depth == 5 and not recovered.warnings:
                break
            await asyncio.sleep(0.5)
        assert recovered is not None and (recovered.depth, recovered.warnings) == (5, ())
    finally:
        await adapter.aclose()


async def test_missing_queue_names_vhost_and_queue_and_the_channel_recovers(
    connections: Connections, rabbitmq_url: str, helper: Rabbit
) -> None:
    present = helper.declare(unique("present"))
    missing = unique("missing")
    absent = open_adapter(spec_for(rabbitmq_url, missing).source, connections)
    there = open_adapter(spec_for(rabbitmq_url, present).source, connections)
    try:
        with pytest.raises(QueueMisconfigured) as caught:
            await absent.sample()
        assert f"'{missing}' in vhost '/'" in str(caught.value)
        assert "guest" not in str(caught.value)
        # the 404 closed the shared channel; the next declare opens another
        assert (await there.sample()).depth == 0
        with pytest.raises(QueueMisconfigured):
            await absent.sample()
    finally:
        await absent.aclose()
        await there.aclose()
    # never created by the scaler
    with pytest.raises(pika.exceptions.ChannelClosedByBroker):
        helper.channel.queue_declare(missing, passive=True)


async def test_queues_of_one_vhost_share_one_request_per_round_and_one_connection(
    connections: Connections, rabbitmq_url: str, helper: Rabbit
) -> None:
    queues = [helper.declare(unique(f"shared{i}")) for i in range(3)]
    adapters = [open_adapter(spec_for(rabbitmq_url, q).source, connections) for q in queues]
    try:
        assert all(isinstance(a, RabbitQueueAdapter) for a in adapters)
        rabbits = [a for a in adapters if isinstance(a, RabbitQueueAdapter)]
        assert len({id(a.connection) for a in rabbits}) == 1
        assert len({id(a.stats) for a in rabbits}) == 1
        before = rabbits[0].stats.requests
        for _ in range(4):  # four rounds of three samplers
            await asyncio.gather(*(a.sample() for a in adapters))
        assert rabbits[0].stats.requests - before == 4
    finally:
        for adapter in adapters:
            await adapter.aclose()


async def test_a_vhost_named_in_the_url(connections: Connections, rabbitmq_url: str) -> None:
    vhost = unique("vhost")
    api = httpx.Client(base_url="http://127.0.0.1:15672", auth=("guest", "guest"), timeout=10)
    api.put(f"/api/vhosts/{vhost}").raise_for_status()
    try:
        api.put(
            f"/api/permissions/{vhost}/guest", json={"configure": ".*", "write": ".*", "read": ".*"}
        ).raise_for_status()
        url = rabbitmq_url.rsplit("/", 1)[0] + f"/{vhost}"
        with rabbit(url) as helper:
            queue = helper.declare(unique("in-vhost"))
            helper.publish(queue, 2)
            adapter = open_adapter(spec_for(url, queue).source, connections)
            try:
                assert (await adapter.sample()).depth == 2
            finally:
                await adapter.aclose()
        missing = open_adapter(
            spec_for(rabbitmq_url.rsplit("/", 1)[0] + "/nope", "q").source, connections
        )
        try:
            with pytest.raises(QueueMisconfigured) as caught:
                await missing.sample()
        finally:
            await missing.aclose()
        assert "vhost 'nope'" in str(caught.value)
    finally:
        api.delete(f"/api/vhosts/{vhost}")
        api.close()


async def test_amqp_down_falls_back_to_the_management_figures_and_both_down_is_unavailable(
    connections: Connections,
    helper: Rabbit,
) -> None:
    with closed_port() as closed:  # nothing listens there: AMQP is "down"
        await _amqp_down_then_both_down(connections, helper, closed)


async def _amqp_down_then_both_down(connections: Connections, helper: Rabbit, closed: int) -> None:
    queue = helper.declare(unique("amqp-down"))
    helper.publish(queue, 5)
    url = f"amqp://guest:guest@127.0.0.1:{closed}/%2F"
    adapter = open_adapter(
        spec_for(url, queue, managementUrl="http://127.0.0.1:15672").source, connections
    )
    try:
        for _ in range(int(STATS_DELAY * 2)):  # unavailable until the broker shows the figures,
            try:  # which lag the queue by a statistics interval or two, each table on its own
                snapshot = await adapter.sample()  # (depth may come before consumers: unknown)
                if snapshot.depth == 5 and snapshot.consumers is not None:
                    break
            except BrokerUnavailable as error:
                assert "management API: no figures for the queue yet" in error.detail
            await asyncio.sleep(0.5)
    finally:
        await adapter.aclose()
    assert snapshot.warnings == ("amqp_unavailable",)
    assert (snapshot.depth, snapshot.in_flight, snapshot.consumers) == (5, 0, 0)

    down = open_adapter(
        spec_for(url, queue, managementUrl=f"http://guest:guest@127.0.0.1:{closed}").source,
        connections,
    )
    try:
        with pytest.raises(BrokerUnavailable) as caught:
            await down.sample()
    finally:
        await down.aclose()
    assert str(caught.value) == f"rabbitmq queue {queue!r}: {UNREACHABLE}"
    assert "AMQP: " in caught.value.detail and "management API: ConnectError" in caught.value.detail
