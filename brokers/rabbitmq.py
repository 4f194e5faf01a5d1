"""Any RabbitMQ queue (classic, quorum, priority; Celery's included) -> QueueSnapshot.

Two sources, read at once each sample, neither touching a message:

- AMQP passive ``queue.declare`` (``brokers.rabbitmq_amqp``): ready messages and consumers, as
  of now. One round trip per queue, on a connection shared by every queue of the vhost.
- The management API (``brokers.rabbitmq_management``), one request per vhost per round:
  ``messages_unacknowledged`` (in flight), ``consumer_capacity``, ``head_message_timestamp``,
  and the cumulative ``message_stats``: arrivals = ``publish``; completions = ``ack`` +
  ``deliver_no_ack`` + ``get_no_ack`` (every message that left the queue for good through a
  consumer; messages that expire, are dropped, or are rejected without requeue are not counted).
  The 5-second ``*_details.rate`` figures are not used: rates come from these totals.

The oldest age: ``head_message_timestamp``, the AMQP ``timestamp`` property (whole seconds,
taken as the middle of that second) of the queue's head, on classic queues whose publishers, or
whose broker (3.12+ message interceptors), set it. It is the older of the ready head and the
unacknowledged head held in memory, so while messages are in flight the age is an estimate; on
a priority queue it is the head of the highest non-empty priority, so the age is a lower bound.
Quorum queues, heads paged out to disk and messages without the property give none: the age is
left unknown here, and the scaler estimates it from the arrival history of ``publish``.

The management figures are refreshed by the broker every ``collect_statistics_interval`` (5 s
by default) and repeated in between; the snapshot says when they were refreshed
(``counts_observed_at``, from ``rabbitmq_management.RefreshClock``), so that the rates and the
arrival history place the totals at that time, not at the sample.

Degraded: with the management API down, the snapshot has the AMQP counts only (in flight, age
and totals unknown) and the warning ``management_unavailable`` (``management_denied`` when the
API refuses the user); with AMQP down, the management figures stand in for the ready count and
consumers (``amqp_unavailable``); with both down the sample fails as BrokerUnreachable, or as
NotTheBroker where the AMQP port answered in another protocol (the clients see the fixed
sentences of ``brokers.errors``; what each side said goes to the server's log). A refused login,
vhost or queue is BrokerRefused, a missing queue QueueMisconfigured, without the broker's reply
text (it names the user).

Quorum queues answer a passive declare with 0 ready and 0 consumers whenever their leader does
not answer within 250 ms, or there is none (``rabbit_quorum_queue:stat/2`` turns a timeout, an
error or a missing leader into ``{ok, 0, 0}``): a 0 that is not a count. So a quorum queue that
the management API shows without a leader fails the sample as BrokerUnavailable, and a 0/0 declare on a quorum queue that the management API last saw holding
messages gives way to the management figures (``messages_ready``, ``consumers``, up to a
statistics interval old) with the warning ``quorum_stat_unanswered``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from typing import Any

from brokers import rabbitmq_amqp, rabbitmq_management
from brokers.base import Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.errors import (
    TLS_FILES,
    BrokerRefused,
    BrokerUnavailable,
    BrokerUnreachable,
    NotTheBroker,
    QueueMisconfigured,
)
from brokers.rabbitmq_amqp import AmqpUnavailable
from brokers.rabbitmq_management import VhostReply
from brokers.rabbitmq_options import COUNTS_SOURCE, RabbitOptions
from brokers.rabbitmq_url import management_endpoint, parse_amqp_url

OLDEST_SOURCE = "head_message_timestamp"
#: a passive declare slower than this counts as AMQP being down for the sample
AMQP_TIMEOUT = 1.5
#: warning kinds (the management ones are in brokers.rabbitmq_management)
AMQP_UNAVAILABLE = "amqp_unavailable"
NO_STATS = "management_no_stats"
QUORUM_STAT_UNANSWERED = "quorum_stat_unanswered"


class RabbitQueueAdapter:
    """Samples one RabbitMQ queue through the connections it shares with its vhost's queues."""

    broker = "rabbitmq"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._source = source
        self._endpoint = parse_amqp_url(source.url)
        self._management = management_endpoint(
            source.url, source.options_as(RabbitOptions).management_url
        )
        try:
            self.stats = rabbitmq_management.acquire(
                connections, self._management, self._endpoint.vhost
            )
        except (OSError, ssl.SSLError) as exc:
            raise QueueMisconfigured(
                f"{source.describe()}: {TLS_FILES}", detail=f"management API: {exc!r}"
            ) from None
        self._clients = rabbitmq_management.clients(connections)
        self._amqp = rabbitmq_amqp.amqp_connections(connections)
        self.connection = self._amqp.acquire(self._endpoint)
        self._used = 0.0  # start of the management reply used last

    async def aclose(self) -> None:
        # the management client first: it closes at once, while the AMQP connection's thread
        # may take seconds to end, and a sampler's stop may not wait that long
        await self._clients.release(self._management)
        await self._amqp.release(self._endpoint)

    async def sample(self) -> QueueSnapshot:
        declared, reply = await asyncio.gather(
            asyncio.wait_for(self.connection.declare_passive(self.queue), AMQP_TIMEOUT),
            self.stats.reply_after(self._used),
            return_exceptions=True,
        )
        observed_at = time.time()
        if isinstance(reply, BaseException):
            raise reply
        self._used = reply.started
        if isinstance(declared, TimeoutError):
            declared = AmqpUnavailable(f"no answer within {AMQP_TIMEOUT:g}s")
        if isinstance(declared, BaseException) and not isinstance(declared, AmqpUnavailable):
            raise declared  # QueueMisconfigured, or a bug
        entry = reply.queues.get(self.queue)
        if entry is not None and entry.get("type") == "stream":
            raise QueueMisconfigured(
                f"{self._source.describe()} is a stream, not a job queue; streams are not supported"
            )
        if entry is not None and _leaderless(entry):
            raise BrokerUnavailable(
                self.broker,
                self.queue,
                "the quorum queue has no leader (none elected, or no member online): RabbitMQ "
                "answers its counts as 0 until one is elected",
            )
        if entry is not None and "messages_ready" not in entry:
            entry = None  # a new queue whose figures the broker has not emitted yet
        if isinstance(declared, AmqpUnavailable) and entry is None:
            why = reply.error[1] if reply.error else "no figures for the queue yet"
            detail = f"AMQP: {declared}; management API: {why}"
            if declared.not_amqp:
                raise NotTheBroker(self.broker, self.queue, "RabbitMQ (AMQP)", detail=detail)
            raise BrokerUnreachable(self.broker, self.queue, detail=detail)
        return self._snapshot(observed_at, declared, reply, entry)

    def _snapshot(
        self,
        observed_at: float,
        declared: tuple[int, int] | AmqpUnavailable,
        reply: VhostReply,
        entry: Mapping[str, Any] | None,
    ) -> QueueSnapshot:
        warnings: list[str] = []
        if reply.error is not None:
            warnings.append(reply.error[0])
        elif entry is None:
            warnings.append(NO_STATS)
        depth: int | None
        consumers: int | None
        if isinstance(declared, AmqpUnavailable):
            assert entry is not None  # sample() raised otherwise
            warnings.append(AMQP_UNAVAILABLE)
            depth, consumers = _int(entry.get("messages_ready")), _int(entry.get("consumers"))
        elif _unanswered_quorum_stat(declared, entry):
            assert entry is not None
            warnings.append(QUORUM_STAT_UNANSWERED)
            depth, consumers = _int(entry.get("messages_ready")), _int(entry.get("consumers"))
        else:
            depth, consumers = declared
        if entry is None:
            return QueueSnapshot(
                observed_at=observed_at,
                depth=depth,
                consumers=consumers,
                counts_source=COUNTS_SOURCE,
                warnings=tuple(warnings),
            )
        arrivals, completions = rabbitmq_management.totals(entry)
        in_flight = _int(entry.get("messages_unacknowledged"))
        head = _int(entry.get("head_message_timestamp"))  # '' on quorum queues, or no head
        priority = "x-max-priority" in (entry.get("arguments") or {})
        return QueueSnapshot(
            observed_at=observed_at,
            depth=depth,
            in_flight=in_flight,
            oldest_enqueued_at=head + 0.5 if head else None,  # the middle of a whole second
            oldest_precision=_head_precision(in_flight, priority) if head else Precision.UNKNOWN,
            oldest_source=OLDEST_SOURCE if head else "",
            arrivals_total=arrivals,
            completions_total=completions,
            counts_source=COUNTS_SOURCE,
            consumers=consumers,
            consumer_capacity=_float(entry.get("consumer_capacity")),
            warnings=tuple(warnings),
            counts_observed_at=reply.refreshed_at.get(self.queue, reply.at),
        )


def _leaderless(entry: Mapping[str, Any]) -> bool:
    """Whether the management API shows a quorum queue without a leader (``leader`` null as soon
    as its Raft server stops; ``online`` empty once the broker sees no member running)."""
    if entry.get("type") != "quorum":
        return False
    return ("leader" in entry and entry["leader"] is None) or entry.get("online") == []


def _unanswered_quorum_stat(declared: tuple[int, int], entry: Mapping[str, Any] | None) -> bool:
    """Whether a quorum queue's 0/0 declare is its leader's silence rather than a count: the
    management API last saw messages ready in it."""
    if entry is None or entry.get("type") != "quorum" or declared != (0, 0):
        return False
    ready = _int(entry.get("messages_ready"))
    return ready is not None and ready > 0


def _head_precision(in_flight: int | None, priority: bool) -> Precision:
    if in_flight != 0:  # the head may be an unacknowledged message, older than the ready head
        return Precision.ESTIMATE
    if priority:  # older messages may wait at lower priorities
        return Precision.LOWER_BOUND
    return Precision.EXACT


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


#: a management reply this young lists the queues of a pool's globs (the samplers' replies count)
LIST_REUSE = 5.0


async def list_queues(source: QueueSource, connections: Connections) -> tuple[str, ...]:
    """The queues of ``source``'s vhost, as the management API lists them (``GET
    /api/queues/<vhost>``, the request the samplers of the vhost share), in name order; streams
    are left out (they are not job queues)."""
    endpoint = parse_amqp_url(source.url)
    management = management_endpoint(source.url, source.options_as(RabbitOptions).management_url)
    clients = rabbitmq_management.clients(connections)
    try:
        stats = rabbitmq_management.acquire(connections, management, endpoint.vhost)
    except (OSError, ssl.SSLError) as exc:
        raise QueueMisconfigured(
            f"{source.describe()}: {TLS_FILES}", detail=f"management API: {exc!r}"
        ) from None
    try:
        reply = await stats.reply_after(time.time() - LIST_REUSE)
    finally:
        await clients.release(management)
    if reply.error is not None:
        kind, detail = reply.error
        what = f"the management API lists no queues ({detail})"
        if kind == rabbitmq_management.DENIED:
            raise BrokerRefused(source.broker, source.queue, detail=what)
        raise BrokerUnavailable(source.broker, source.queue, what)
    return tuple(sorted(name for name, q in reply.queues.items() if q.get("type") != "stream"))
