"""The round trips that adapters on one Redis ask for in the same turn of the event loop, sent as
one pipeline.

Every adapter reads its queue with ``RedisConnection.execute``: a group of commands, run in one
round trip (inside MULTI/EXEC when the group asks for a transaction and has more than one
command; a single command is atomic on its own). Samplers of one Redis that wake together (they
do: their intervals are whole seconds, and KEDA asks about many queues at once) would each take
a connection of the pool and make a round trip of their own. The :class:`RedisBatcher` of a
client collects the groups asked for until the event loop has run what is ready, then writes
them to one connection in one pipeline, up to :data:`BATCH_COMMANDS` commands a round trip, and
hands each group its own replies. A transaction stays a transaction: each group has its own
MULTI/EXEC inside the pipeline, so one group's error (an ``EXECABORT``, a ``WRONGTYPE``) is
that group's alone, and a command's reply is what redis-py's pipeline gives for it (the same
response callbacks, error replies in place).

A failure of the connection itself (reset, timeout, a reply that is not Redis's protocol) fails
every group of that round trip with it; one immediate retry on a broken connection is made, as
redis-py's own pipeline does (the commands only read). ``batch=False`` sends each group in a
round trip of its own, as before batching: the tests compare the two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import Connection
from redis.exceptions import ExecAbortError, ResponseError

from brokers.connections import Traffic

#: the most commands one pipelined round trip carries (a few hundred queues' reads); more groups
#: go in further round trips, on further connections of the pool
BATCH_COMMANDS = 512

Command = tuple[str, str | bytes, *tuple[str | bytes | int | float, ...]]


@dataclass(slots=True)
class _Group:
    """One adapter's round trip: its commands and where its replies go."""

    commands: Sequence[Command]
    transaction: bool
    replies: asyncio.Future[list[Any]] = field(repr=False)

    @property
    def wrapped(self) -> bool:
        """Sent inside MULTI/EXEC."""
        return self.transaction and len(self.commands) > 1

    @property
    def wire_commands(self) -> int:
        return len(self.commands) + (2 if self.wrapped else 0)


class RedisBatcher:
    """Sends the groups of commands asked for on one client, many in one round trip."""

    def __init__(
        self, client: Redis, traffic: Traffic, *, batch: bool = True, limit: int = BATCH_COMMANDS
    ) -> None:
        self._client = client
        self._traffic = traffic
        self._limit = limit if batch else 1
        self._pending: list[_Group] = []
        self._sends: set[asyncio.Task[None]] = set()

    async def run(self, commands: Sequence[Command], *, transaction: bool) -> list[Any]:
        """The replies to ``commands``, in order, error replies in place (as
        ``pipeline.execute(raise_on_error=False)``); raises what the round trip raised when the
        connection failed, or a group's ``EXECABORT`` (its first queueing error)."""
        loop = asyncio.get_running_loop()
        group = _Group(commands, transaction, loop.create_future())
        if not self._pending:
            loop.call_soon(self._flush)  # after every caller already due has added its group
        self._pending.append(group)
        return await group.replies

    def _flush(self) -> None:
        # a group whose caller gave up (its sample's timeout, a stop) is not sent
        pending = [group for group in self._pending if not group.replies.done()]
        self._pending = []
        batch: list[_Group] = []
        size = 0
        for group in pending:
            if batch and size + group.wire_commands > self._limit:
                self._start(batch)
                batch, size = [], 0
            batch.append(group)
            size += group.wire_commands
        if batch:
            self._start(batch)

    def _start(self, batch: list[_Group]) -> None:
        task = asyncio.create_task(self._send(batch), name="redis batch")
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, batch: list[_Group]) -> None:
        try:
            results = await self._round_trip(batch)
        except BaseException as error:  # the connection failed: every group of it fails with it
            for group in batch:
                if not group.replies.done():
                    group.replies.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for group, result in zip(batch, results, strict=True):
            if group.replies.done():  # its caller gave up (a sample's timeout)
                continue
            if isinstance(result, BaseException):
                group.replies.set_exception(result)
            else:
                group.replies.set_result(result)

    async def _round_trip(self, batch: list[_Group]) -> list[list[Any] | BaseException]:
        pool = self._client.connection_pool
        connection: Connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:

            async def exchange() -> list[list[Any] | BaseException]:
                return await self._exchange(connection, batch)

            async def broken(_error: Exception) -> None:
                await connection.disconnect()

            return await connection.retry.call_with_retry(exchange, broken)
        finally:
            await pool.release(connection)

    async def _exchange(
        self, connection: Connection, batch: list[_Group]
    ) -> list[list[Any] | BaseException]:
        wire: list[Command | tuple[str]] = []
        for group in batch:
            if group.wrapped:
                wire += [("MULTI",), *group.commands, ("EXEC",)]
            else:
                wire += group.commands
        self._traffic.add(commands=len(wire), round_trips=1)
        try:
            await connection.send_packed_command(connection.pack_commands(wire))
            return [await self._read(connection, group) for group in batch]
        except BaseException:
            # replies may be left unread: the connection is out of step, so it is dropped
            await connection.disconnect()
            raise

    async def _read(self, connection: Connection, group: _Group) -> list[Any] | BaseException:
        if not group.wrapped:
            replies: list[Any] = []
            for command in group.commands:
                try:
                    replies.append(await self._client.parse_response(connection, command[0]))
                except ResponseError as error:
                    replies.append(error)
            return replies
        queueing: list[ResponseError] = []
        for _ in range(len(group.commands) + 1):  # MULTI's OK, then each command's QUEUED
            try:
                await connection.read_response()
            except ResponseError as error:
                queueing.append(error)
        try:
            executed = await connection.read_response()
        except ExecAbortError as error:
            return queueing[0] if queueing else error
        if not isinstance(executed, list) or len(executed) != len(group.commands):
            return ResponseError("Wrong number of response items from pipeline execution")
        return [
            self._callback(command, reply)
            for command, reply in zip(group.commands, executed, strict=True)
        ]

    def _callback(self, command: Command, reply: Any) -> Any:
        """The reply as redis-py's transaction gives it: through the command's callback."""
        if isinstance(reply, Exception):
            return reply
        callback = self._client.response_callbacks.get(command[0])
        return reply if callback is None else callback(reply)

    async def aclose(self) -> None:
        """Wait for the round trips under way (their callers may still wait on them)."""
        if self._sends:
            await asyncio.gather(*self._sends, return_exceptions=True)
