"""AMQP passive ``queue.declare`` through pika, off the event loop.

Each AMQP endpoint (host, port, vhost, user, TLS) gets one pika ``BlockingConnection`` owned by
one thread, shared by every adapter on it. Requests queue up for that thread and run in turn
on one channel; between them the thread services the connection's heartbeats. A thread rather
than pika's asyncio adapter: the blocking API gives each declare a plain reply-or-exception,
and when a declare of a missing queue closes the channel (404), the next request simply opens a
new one, with no callbacks racing in between. A request whose caller gave up is skipped.

A passive declare never creates a queue; its reply counts the ready messages only (not the
unacknowledged ones) and the consumers. Quorum queues answer 0/0 when their leader does not
answer within 250 ms (``rabbit_quorum_queue:stat/2``): ``brokers.rabbitmq`` checks that 0/0
against the management API.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import ssl
import threading

import pika
import pika.exceptions
from pika.adapters.utils.connection_workflow import AMQPConnectorException

from brokers.connections import Connections
from brokers.errors import TLS_FILES, BrokerRefused, QueueMisconfigured
from brokers.rabbitmq_url import AmqpEndpoint
from brokers.shared import SharedByKey

#: seconds between heartbeats; the thread services them while no request runs
HEARTBEAT = 10
#: how long the thread waits for a request before servicing the connection
IDLE_POLL = 1.0
CONNECT_TIMEOUT = 2.0
#: AMQP reply codes that no retry will fix: access refused (a wrong password, or no permission),
#: vhost not found or not allowed
REFUSED = (403, 530)

_Request = tuple[str, "concurrent.futures.Future[tuple[int, int]]"]

# pika logs each connection it opens and closes, and each failure several times over: the
# failures reach the sampler as exceptions, which logs each once
logging.getLogger("pika").setLevel(logging.CRITICAL)


class AmqpUnavailable(Exception):
    """The broker did not answer over AMQP, or not as RabbitMQ (``not_amqp``: another server
    answered). The message is a detail for the server's log; it names no secret."""

    def __init__(self, detail: str, *, not_amqp: bool = False) -> None:
        super().__init__(detail)
        self.not_amqp = not_amqp


class AmqpConnection:
    """One AMQP connection and the thread that owns it."""

    def __init__(self, endpoint: AmqpEndpoint) -> None:
        self.endpoint = endpoint
        #: protocol round trips made (connection opens count as one), for benchmarks and tests
        self.round_trips = 0
        self._requests: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._connection: pika.BlockingConnection | None = None
        self._channel: pika.adapters.blocking_connection.BlockingChannel | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"amqp {endpoint.host}:{endpoint.port}", daemon=True
        )
        self._thread.start()

    async def declare_passive(self, name: str) -> tuple[int, int]:
        """(ready messages, consumers) of queue ``name``.

        Raises QueueMisconfigured when the queue or the vhost does not exist or the user may not
        see them, AmqpUnavailable when the broker does not answer."""
        future: concurrent.futures.Future[tuple[int, int]] = concurrent.futures.Future()
        self._requests.put((name, future))
        return await asyncio.wrap_future(future)

    async def aclose(self) -> None:
        self._requests.put(None)
        await asyncio.to_thread(self._thread.join, 5.0)

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                request = self._requests.get(timeout=IDLE_POLL)
            except queue.Empty:
                self._service()
                continue
            if request is None:
                break
            name, future = request
            if not future.set_running_or_notify_cancel():
                continue  # the caller gave up
            try:
                future.set_result(self._declare(name))
            except BaseException as exc:  # handed to the caller, raised there
                future.set_exception(exc)
        self._drop()

    def _service(self) -> None:
        if self._connection is not None:
            try:
                self._connection.process_data_events(0)
            except pika.exceptions.AMQPError:
                self._drop()

    def _declare(self, name: str) -> tuple[int, int]:
        for attempt in (1, 2):  # one retry on a fresh connection (after a broker restart, say)
            try:
                channel = self._open_channel()
                self.round_trips += 1
                frame = channel.queue_declare(name, passive=True)
            except pika.exceptions.ChannelClosedByBroker as exc:
                self._channel = None
                raise self._refused(name, exc.reply_code, repr(exc)) from None
            except pika.exceptions.ConnectionClosedByBroker as exc:
                self._drop()
                if exc.reply_code in REFUSED:
                    raise self._refused(name, exc.reply_code, repr(exc)) from None
                if attempt == 2:
                    raise self._unavailable(exc) from None
            except (pika.exceptions.AMQPError, AMQPConnectorException, OSError) as exc:
                self._drop()
                if isinstance(exc, pika.exceptions.ProbableAuthenticationError):
                    raise self._refused(name, 403, repr(exc)) from None
                if isinstance(exc, pika.exceptions.ProbableAccessDeniedError):
                    raise self._refused(
                        name, 530, repr(exc)
                    ) from None  # no such vhost, or no access
                if attempt == 2 or isinstance(exc, pika.exceptions.IncompatibleProtocolError):
                    raise self._unavailable(exc) from None
            else:
                method = frame.method
                return int(method.message_count), int(method.consumer_count)
        raise AssertionError("unreachable")

    def _open_channel(self) -> pika.adapters.blocking_connection.BlockingChannel:
        if self._connection is None or not self._connection.is_open:
            self._connection = pika.BlockingConnection(self._parameters())
            self._channel = None
            self.round_trips += 1
        if self._channel is None or not self._channel.is_open:
            self._channel = self._connection.channel()
            self.round_trips += 1
        return self._channel

    def _parameters(self) -> pika.ConnectionParameters:
        e = self.endpoint
        tls = None
        if e.tls is not None:
            try:
                context = e.tls.context()
            except (OSError, ssl.SSLError) as exc:  # one message whatever the cause: a missing
                raise QueueMisconfigured(  # file and an unreadable one look the same
                    f"rabbitmq: {TLS_FILES}", detail=f"url: {exc!r}"
                ) from None
            tls = pika.SSLOptions(context, e.tls.server_name or e.host)
        return pika.ConnectionParameters(
            host=e.host,
            port=e.port,
            virtual_host=e.vhost,
            credentials=pika.PlainCredentials(e.username, e.password),
            ssl_options=tls,
            heartbeat=HEARTBEAT,
            socket_timeout=CONNECT_TIMEOUT,
            stack_timeout=2 * CONNECT_TIMEOUT,
            connection_attempts=1,
            client_properties={"connection_name": "queue-age-scaler"},
        )

    def _drop(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(pika.exceptions.AMQPError, OSError):
                connection.close()

    def _refused(self, name: str, code: int, detail: str) -> QueueMisconfigured:
        """The broker's refusal as the project's error; its reply text (which may name the user)
        goes to the detail only."""
        detail = self._hidden(detail)
        where = f"vhost {self.endpoint.vhost!r}"
        if code == 530:
            message = (
                f"the broker refused the {where} to the user (no such vhost, or no access to it); "
                "fix the vhost in the URL (the path: /%2F for /) or the user's permissions"
            )
            return BrokerRefused("rabbitmq", name, message=message, detail=detail)
        if code == 403:
            return BrokerRefused("rabbitmq", name, detail=detail)
        if code == 404:
            return QueueMisconfigured(
                f"rabbitmq queue {name!r} in {where} does not exist; the scaler never creates "
                "queues: declare it (start a worker or producer), or fix queue or the vhost in "
                "the URL",
                detail=detail,
            )
        return QueueMisconfigured(
            f"rabbitmq queue {name!r} in {where}: the broker refused the passive declare "
            f"(AMQP reply code {code})",
            detail=detail,
        )

    def _unavailable(self, error: Exception | str) -> AmqpUnavailable:
        if isinstance(error, str):
            detail = error
        else:  # pika's AMQPConnectionError says nothing in str(), its cause is in repr()
            detail = f"{type(error).__name__}: {error}" if str(error) else repr(error)
        not_amqp = isinstance(error, pika.exceptions.IncompatibleProtocolError)
        return AmqpUnavailable(self._hidden(detail), not_amqp=not_amqp)

    def _hidden(self, detail: str) -> str:
        if self.endpoint.password:
            detail = detail.replace(self.endpoint.password, "<hidden>")
        return detail


async def _close(connection: AmqpConnection) -> None:
    await connection.aclose()


def amqp_connections(connections: Connections) -> SharedByKey[AmqpEndpoint, AmqpConnection]:
    """The server's AMQP connections, one per endpoint, shared by every adapter on it; the last
    release closes the connection and ends its thread."""
    return connections.kind("amqp", AmqpConnection, _close)
