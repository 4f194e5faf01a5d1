"""Redis connections shared by every adapter on the same URL, and the one place where Redis
errors become the project's errors (no URL or password in any message)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from brokers.shared import SharedByKey
from scaler.errors import BrokerUnavailable, QueueMisconfigured
from scaler.spec import QueueSource

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
    "HLEN": "hash",
    "HGETALL": "hash",
    "XINFO": "stream",
    "XRANGE": "stream",
}

#: error replies that say the queue is not laid out as its format expects; they will not go away
#: by trying again, unlike LOADING or BUSY
MISCONFIGURED = ("WRONGTYPE", "NOGROUP")

Command = tuple[str, str | bytes, *tuple[str | bytes | int | float, ...]]


def _open_client(url: str) -> Redis:
    return Redis.from_url(
        url,
        socket_connect_timeout=SOCKET_TIMEOUT,
        socket_timeout=SOCKET_TIMEOUT,
        # one immediate retry on a broken connection (after a Redis restart, say);
        # none on a timeout, so a hung server fails within SOCKET_TIMEOUT
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )


async def _close_client(client: Redis) -> None:
    await client.aclose()


#: one client per URL, shared by every adapter on that URL
CLIENTS: SharedByKey[str, Redis] = SharedByKey(_open_client, _close_client)


class RedisConnection:
    """One adapter's use of the shared client for its URL."""

    def __init__(self, source: QueueSource) -> None:
        self._source = source
        self._client: Redis | None = CLIENTS.acquire(source.url)

    async def aclose(self) -> None:
        if self._client is not None:
            self._client = None
            await CLIENTS.release(self._source.url)

    async def execute(self, commands: Sequence[Command], *, transaction: bool) -> list[Any]:
        """Run ``commands`` in one round trip (MULTI/EXEC when ``transaction``)."""
        if self._client is None:
            raise RuntimeError(f"{self._source.describe()}: adapter is closed")
        pipe = self._client.pipeline(transaction=transaction)
        for command in commands:
            pipe.execute_command(*command)
        try:
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        except (RedisConnectionError, RedisTimeoutError, OSError, ResponseError) as exc:
            raise self._unavailable(exc) from exc
        for command, reply in zip(commands, replies, strict=True):
            if isinstance(reply, ResponseError) and str(reply).startswith(MISCONFIGURED):
                raise self._misconfigured(command, reply)
            if isinstance(reply, ResponseError):  # LOADING, BUSY, MASTERDOWN...: try again later
                raise self._unavailable(reply)
        return replies

    def _misconfigured(self, command: Command, error: ResponseError) -> QueueMisconfigured:
        name = command[0]
        key = command[2] if name == "XINFO" and len(command) > 2 else command[1]  # XINFO STREAM key
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

    def _unavailable(self, error: Exception) -> BrokerUnavailable:
        detail = f"{type(error).__name__}: {error}"
        password = urlsplit(self._source.url).password
        for secret in (self._source.url, password):
            if secret:
                detail = detail.replace(secret, "<hidden>")
        return BrokerUnavailable(self._source.broker, self._source.queue, detail)
