"""Connections shared by every adapter on the same key (a URL, an endpoint): the first user
opens one, the last one closes it.

A connection belongs to the event loop that opened it, so sharing is per loop: a server started
on another loop (a test's, a restarted one's) never gets a client bound to a loop that is gone,
even where a user before it could not release its share (a close cut short at shutdown)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    users: int = 0


class SharedByKey(Generic[K, V]):
    """One ``V`` per key, opened by ``open_`` on the first :meth:`acquire` and closed by
    ``close`` on the matching last :meth:`release`."""

    def __init__(self, open_: Callable[[K], V], close: Callable[[V], Awaitable[None]]) -> None:
        self._open = open_
        self._close = close
        self._entries: dict[tuple[asyncio.AbstractEventLoop | None, K], _Entry[V]] = {}

    @staticmethod
    def _on_this_loop(key: K) -> tuple[asyncio.AbstractEventLoop | None, K]:
        try:
            return asyncio.get_running_loop(), key
        except RuntimeError:  # no loop runs: a value for synchronous use
            return None, key

    def acquire(self, key: K) -> V:
        shared = self._on_this_loop(key)
        entry = self._entries.get(shared)
        if entry is None:
            entry = self._entries[shared] = _Entry(self._open(key))
        entry.users += 1
        return entry.value

    async def release(self, key: K) -> None:
        shared = self._on_this_loop(key)
        entry = self._entries[shared]
        entry.users -= 1
        if entry.users == 0:
            del self._entries[shared]
            await self._close(entry.value)

    def __len__(self) -> int:
        """How many keys have a value open."""
        return len(self._entries)

    async def aclose(self) -> None:
        """Close every value still open, whoever holds a share of it."""
        entries, self._entries = self._entries, {}
        for entry in entries.values():
            await self._close(entry.value)
