"""Trigger metadata the server has not seen is parsed one map per turn of the event loop, at most
so many maps a second, and only so many maps wait for their turn.

Calls whose ref the server knows are answered in one step, from cached state. A call with new
metadata waits for its turn; when it comes, it parses (whether it parses or is refused) and
passes the turn on, one loop iteration later and no sooner than ``1 / rate`` seconds after the
previous turn began. So however many new maps arrive at once, each turn of the loop spends at
most one parse on them, and the calls of known triggers (and the samplers) in between wait for
that one parse, not for all of them. The rate bounds what a flood of new maps costs the server
as a whole: each call with a map has more to it than the parse (gRPC's reading of the request,
the refusal sent back), and a flood sent as fast as the server answers would otherwise keep the
loop busy, so that every call waits for a core. Past ``max_waiting`` maps waiting, a new one is
refused at once with RESOURCE_EXHAUSTED, naming the limit: KEDA calls again on its next poll,
and a flood of new maps costs a refusal each, not a queue that grows.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
from collections.abc import AsyncIterator

from scaler.errors import ResourceExhausted


class ParseTurns:
    """One parse of new metadata at a time, a turn of the loop and ``1 / rate`` seconds between
    the starts of two."""

    def __init__(self, max_waiting: int, rate: float) -> None:
        if max_waiting < 1:
            raise ValueError(f"max_waiting is {max_waiting}; expected at least 1")
        if not rate > 0:
            raise ValueError(f"rate is {rate}; expected more than 0 maps a second")
        self.max_waiting = max_waiting
        #: the least time between the starts of two turns
        self._spacing = 1.0 / rate
        self._last_grant = -math.inf
        #: the calls waiting, and the one holding the turn, if any
        self._queue: collections.deque[asyncio.Future[None]] = collections.deque()
        self._waiting = 0
        self._held = False
        self._scheduled = False

    @property
    def waiting(self) -> int:
        """Maps waiting for their turn or being parsed now."""
        return self._waiting

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold the turn while the block parses; raises ResourceExhausted when too many wait."""
        if self._waiting >= self.max_waiting:
            raise ResourceExhausted(
                f"this scaler has {self._waiting} trigger metadata maps it has not seen before "
                "waiting to be parsed, its limit (--max-new-metadata); this call is refused and "
                "KEDA asks again on its next poll (many new ScaledObjects at once, or a flood of "
                "distinct metadata)"
            )
        loop = asyncio.get_running_loop()
        mine = loop.create_future()
        self._queue.append(mine)
        self._waiting += 1
        try:
            if not self._held:
                self._schedule(loop)
            await mine  # given by _grant
            try:
                yield
            finally:
                self._release(loop)
        except asyncio.CancelledError:
            if mine.done() and not mine.cancelled():  # granted, then cancelled: pass it on
                self._release(loop)
            raise
        finally:
            self._waiting -= 1

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._scheduled:
            self._scheduled = True
            delay = self._last_grant + self._spacing - loop.time()
            if delay > 0:
                loop.call_later(delay, self._grant, loop)
            else:
                loop.call_soon(self._grant, loop)

    def _grant(self, loop: asyncio.AbstractEventLoop) -> None:
        """The next turn, to the first call still waiting."""
        self._scheduled = False
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():  # not cancelled while it waited
                waiter.set_result(None)
                self._held = True
                self._last_grant = loop.time()
                return

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._held:
            self._held = False
            if self._queue:
                self._schedule(loop)
