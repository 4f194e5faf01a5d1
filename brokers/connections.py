"""The connections one running server (or ``probe``, or a test) holds to its brokers.

Whoever runs samplers makes a :class:`Connections`, passes it to every adapter it opens (the
adapter factory's second argument) and closes it on stop: nothing is kept at module level, so
two servers in one process share nothing, and a stopped server leaves no client behind. Inside
it, each kind of connection (Redis clients, AMQP connections, management HTTP clients) is shared
by key (a URL, an endpoint): the first adapter opens one, the last one closes it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from brokers.shared import SharedByKey

#: connections one server opens to one broker (one Redis URL, one management endpoint) at
#: most, shared by all its samplers there (``serve --max-connections-per-broker``)
MAX_CONNECTIONS_PER_BROKER = 16

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(slots=True)
class Traffic:
    """What one server sent one broker so far: commands (requests) and the round trips that
    carried them. Only differences mean anything."""

    commands: int = 0
    round_trips: int = 0

    def add(self, *, commands: int, round_trips: int) -> None:
        self.commands += commands
        self.round_trips += round_trips


class Connections:
    """The broker connections of one server, by kind and key, and the traffic they carried.

    ``batch``: the round trips that adapters on one broker ask for together go as one, where
    the broker allows (Redis pipelines); False sends each adapter's on its own."""

    def __init__(
        self, *, max_per_broker: int = MAX_CONNECTIONS_PER_BROKER, batch: bool = True
    ) -> None:
        if max_per_broker < 1:
            raise ValueError(f"max_per_broker is {max_per_broker}; expected at least 1")
        self.max_per_broker = max_per_broker
        self.batch = batch
        self._kinds: dict[str, SharedByKey[Any, Any]] = {}
        self._traffic: dict[str, Traffic] = {}

    def traffic(self, url: str) -> Traffic:
        """The traffic to the broker at ``url`` (a queue source's URL), kept after its
        connections close."""
        traffic = self._traffic.get(url)
        if traffic is None:
            traffic = self._traffic[url] = Traffic()
        return traffic

    def traffic_by_broker(self) -> dict[str, Traffic]:
        """The traffic per broker URL so far (a copy)."""
        return {url: Traffic(t.commands, t.round_trips) for url, t in self._traffic.items()}

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
