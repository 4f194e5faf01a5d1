"""Connections shared by every adapter on the same key (a URL, an endpoint): the first user
opens one, the last one closes it."""

from __future__ import annotations

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
        self._entries: dict[K, _Entry[V]] = {}

    def acquire(self, key: K) -> V:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(self._open(key))
        entry.users += 1
        return entry.value

    async def release(self, key: K) -> None:
        entry = self._entries[key]
        entry.users -= 1
        if entry.users == 0:
            del self._entries[key]
            await self._close(entry.value)

    def __len__(self) -> int:
        """How many keys have a value open."""
        return len(self._entries)
