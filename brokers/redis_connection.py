"""Redis connections shared by every adapter on the same URL, and the one place where Redis
errors become the project's errors.

A failure is told to clients in the fixed sentences of ``brokers.errors``, by kind; what Redis or
the socket said goes into the error's ``detail``, for the server's log, with the URL and the
password taken out:

- no answer at all (refused, closed or reset without a reply, timed out, unknown host, a TLS
  handshake or file that fails): :class:`~brokers.errors.BrokerUnreachable`. PostgreSQL and
  MQTT close the connection without a word when they read Redis's bytes, but so does a TCP
  proxy whose Redis is down, so a silent close is not taken for another server;
- an answer that is not Redis's protocol (an HTTP, AMQP, MySQL or NATS greeting):
  :class:`~brokers.errors.NotTheBroker`;
- a refused login or command (``WRONGPASS``, ``NOAUTH``, ``NOPERM``, protected mode's
  ``DENIED``): :class:`~brokers.errors.BrokerRefused`;
- ``WRONGTYPE`` and ``NOGROUP``: :class:`~brokers.errors.QueueMisconfigured`, naming the key;
- any other error reply (``LOADING``, ``BUSY``, ``MASTERDOWN``...): BrokerUnavailable naming
  the reply's code word only.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    InvalidResponse,
    NoPermissionError,
    NoScriptError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from brokers.base import QueueSource
from brokers.connections import Connections
from brokers.errors import (
    BrokerRefused,
    BrokerUnavailable,
    BrokerUnreachable,
    NotTheBroker,
    QueueMisconfigured,
    ScalerError,
    logged_detail,
)
from brokers.redis_batch import Command as Command  # the adapters name it from here
from brokers.redis_batch import RedisBatcher
from brokers.redis_url import driver_info
from brokers.shared import SharedByKey

SOCKET_TIMEOUT = 2.0
#: the type of key each command needs, for the message when a key has another type
KEY_TYPES = {
    "LLEN": "list",
    "LINDEX": "list",
    "LPOS": "list",
    "LRANGE": "list",
    "ZCARD": "sorted set",
    "ZCOUNT": "sorted set",
    "ZMSCORE": "sorted set",
    "ZRANGE": "sorted set",
    "ZRANGEBYSCORE": "sorted set",
    "SCARD": "set",
    "SMEMBERS": "set",
    "HGET": "hash",
    "HSTRLEN": "hash",
    "HLEN": "hash",
    "HGETALL": "hash",
    "XINFO": "stream",
    "XRANGE": "stream",
}

#: error replies that say the queue is not laid out as its format expects; they will not go away
#: by trying again, unlike LOADING or BUSY
MISCONFIGURED = ("WRONGTYPE", "NOGROUP")
#: error replies that refuse the login or the command: a password or the user's ACL is wrong
REFUSED_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM", "DENIED")
#: the first command a script calls, which names the type of key it needs
_FIRST_CALL = re.compile(r"redis\.call\('([A-Z]+)'")
#: the code word of an error reply (``LOADING``, ``BUSY``...), the only part shown to clients
_CODE_WORD = re.compile(r"[A-Z]{2,20}")


@dataclass(frozen=True, slots=True)
class _Client:
    """The server's client for one Redis URL, and the batcher its adapters' round trips go
    through."""

    redis: Redis
    batcher: RedisBatcher
    #: keys a read found missing, by key: when (monotonic), for ``RedisConnection.seen_missing``
    missing: dict[str, float] = field(default_factory=dict)


def _open_client(url: str, connections: Connections) -> _Client:
    """A client of its own pool, of at most ``max_per_broker`` connections (the server's bound
    per broker) shared by all its samplers on ``url``; a round trip that finds them all busy
    waits for one (redis-py's own pool refuses past 100, which failed samples when many
    samplers of one Redis woke together)."""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=connections.max_per_broker,
        timeout=SOCKET_TIMEOUT,  # the longest a round trip waits for one of them
        socket_connect_timeout=SOCKET_TIMEOUT,
        socket_timeout=SOCKET_TIMEOUT,
        # one immediate retry on a broken connection (after a Redis restart, say);
        # none on a timeout, so a hung server fails within SOCKET_TIMEOUT
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        driver_info=driver_info(),
    )
    client = Redis.from_pool(pool)  # closing the client closes its pool
    traffic = connections.traffic(url)
    return _Client(client, RedisBatcher(client, traffic, batch=connections.batch))


async def _close_client(client: _Client) -> None:
    await client.batcher.aclose()
    await client.redis.aclose()


def _by_hash(command: Command) -> Command:
    """``EVAL script ...`` as ``EVALSHA sha1(script) ...``; any other command as it is."""
    if command[0] != "EVAL":
        return command
    return ("EVALSHA", _script_hash(str(command[1])), *command[2:])


@functools.cache
def _script_hash(script: str) -> str:
    return hashlib.sha1(script.encode(), usedforsecurity=False).hexdigest()  # as Redis names it


class RedisConnection:
    """One adapter's use of the server's client for its URL (one per URL, shared by every
    adapter on that URL)."""

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self._source = source
        self._clients: SharedByKey[str, _Client] = connections.kind(
            "redis", lambda url: _open_client(url, connections), _close_client
        )
        self._client: _Client | None = self._clients.acquire(source.url)

    async def aclose(self) -> None:
        if self._client is not None:
            self._client = None
            await self._clients.release(self._source.url)

    def note_missing(self, key: str, now: float) -> None:
        """A read found ``key`` missing at ``now`` (monotonic), for the other adapters on this
        Redis to reuse (``seen_missing``)."""
        if self._client is not None:
            self._client.missing[key] = now

    def seen_missing(self, key: str, now: float, within: float) -> bool:
        """An adapter on this Redis found ``key`` missing less than ``within`` seconds ago."""
        if self._client is None:
            return False
        seen = self._client.missing.get(key)
        return seen is not None and now - seen < within

    async def execute(self, commands: Sequence[Command], *, transaction: bool) -> list[Any]:
        """Run ``commands`` in one round trip (MULTI/EXEC when ``transaction``), shared with the
        other adapters' on this Redis that are due at the same time (``brokers.redis_batch``).

        A script (``EVAL``) is sent by its hash (``EVALSHA``); where Redis does not hold it (a
        new or restarted Redis: ``NOSCRIPT``), the round trip is made again with ``EVAL``, which
        loads it. The scripts only read, so running the rest twice changes nothing."""
        replies = await self._round_trip([_by_hash(c) for c in commands], transaction)
        if any(isinstance(reply, NoScriptError) for reply in replies):
            replies = await self._round_trip(commands, transaction)
        for command, reply in zip(commands, replies, strict=True):
            if isinstance(reply, ResponseError) and str(reply).startswith(MISCONFIGURED):
                raise self._misconfigured(command, reply)
            if isinstance(reply, ResponseError):
                raise self._failure(reply)
        return replies

    async def _round_trip(self, commands: Sequence[Command], transaction: bool) -> list[Any]:
        if self._client is None:
            raise RuntimeError(f"{self._source.describe()}: adapter is closed")
        try:
            return await self._client.batcher.run(commands, transaction=transaction)
        except (RedisError, OSError) as exc:
            raise self._failure(exc) from None

    def _misconfigured(self, command: Command, error: ResponseError) -> QueueMisconfigured:
        name, key = command[0], command[1]
        if name == "XINFO" and len(command) > 2:  # XINFO STREAM key
            key = str(command[2])
        if name == "EVAL" and len(command) > 3:  # EVAL script 1 key: named by its first call
            call = _FIRST_CALL.search(str(command[1]))
            name = call.group(1) if call else name
            key = command[3] if isinstance(command[3], str | bytes) else str(command[3])
        shown = key.decode(errors="replace") if isinstance(key, bytes) else str(key)
        if str(error).startswith("NOGROUP"):
            return QueueMisconfigured(
                f"{self._source.describe()}: {error}; create the group (XGROUP CREATE) or fix consumerGroup"
            )
        expected = KEY_TYPES.get(name, "key of another type")
        return QueueMisconfigured(
            f"{self._source.describe()}: key {shown!r} is not a {expected} "
            f"as format {self._source.format} expects ({error})"
        )

    def _failure(self, error: Exception) -> ScalerError:
        """The project's error for a failed round trip (see the module's docstring)."""
        broker, queue = self._source.broker, self._source.queue
        detail = logged_detail(error, self._source.url)
        text = str(error)
        if isinstance(error, AuthenticationError | AuthorizationError | NoPermissionError) or (
            isinstance(error, ResponseError) and text.startswith(REFUSED_REPLIES)
        ):
            return BrokerRefused(broker, queue, detail=detail)
        if isinstance(error, InvalidResponse):
            return NotTheBroker(broker, queue, "Redis", detail=detail)
        if isinstance(error, BusyLoadingError):  # redis-py's name for a LOADING reply
            return BrokerUnavailable(
                broker, queue, "Redis answered LOADING (it is loading its data)", detail=detail
            )
        if isinstance(error, ResponseError):  # BUSY, MASTERDOWN...: try again later
            word = _CODE_WORD.match(text)
            code = word.group() if word else "an error"
            return BrokerUnavailable(
                broker,
                queue,
                f"Redis answered {code} (the scaler's log has the reply)",
                detail=detail,
            )
        return BrokerUnreachable(broker, queue, detail=detail)
