"""The connections one running server (or ``probe``, or a test) holds to its brokers.

Whoever runs samplers makes a :class:`Connections`, passes it to every adapter it opens (the
adapter factory's second argument) and closes it on stop: nothing is kept at module level, so
two servers in one process share nothing, and a stopped server leaves no client behind. Inside
it, each kind of connection (Redis clients, AMQP connections, management HTTP clients) is shared
by key (a URL, an endpoint): the first adapter opens one, the last one closes it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar, cast

from brokers.shared import SharedByKey

#: connections one server opens to one broker (one Redis URL, one management endpoint) at
#: most, shared by all its samplers there (``serve --max-connections-per-broker``)
MAX_CONNECTIONS_PER_BROKER = 16

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Connections:
    """The broker connections of one server, by kind and key."""

    def __init__(self, *, max_per_broker: int = MAX_CONNECTIONS_PER_BROKER) -> None:
        if max_per_broker < 1:
            raise ValueError(f"max_per_broker is {max_per_broker}; expected at least 1")
        self.max_per_broker = max_per_broker
        self._kinds: dict[str, SharedByKey[Any, Any]] = {}

    def kind(
        self, name: str, open_: Callable[[K], V], close: Callable[[V], Awaitable[None]]
    ) -> SharedByKey[K, V]:
        """The shared values of kind ``name`` (opened by ``open_``, closed by ``close``): one
        adapter module's kind of connection."""
        shared = self._kinds.get(name)
        if shared is None:
            shared = self._kinds[name] = SharedByKey(open_, close)
        return cast(SharedByKey[K, V], shared)

    def __len__(self) -> int:
        """How many connections (of every kind) are open."""
        return sum(len(shared) for shared in self._kinds.values())

    async def aclose(self) -> None:
        """Close whatever adapters left open (a close cut short at shutdown)."""
        for shared in self._kinds.values():
            await shared.aclose()
