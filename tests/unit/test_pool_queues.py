"""Resolving a pool's globs: the broker's queues listed at most every relist interval however
many pools ask, the last good list standing in while listing fails, and the cap."""

from __future__ import annotations

import pytest

from brokers.base import QueueSource
from brokers.connections import Connections
from scaler import pool_queues
from scaler.errors import BrokerUnavailable, QueueMisconfigured, ResourceExhausted
from scaler.pool_queues import PoolQueues
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec


class Broker:
    """The queue names a broker lists, and how often it was asked; ``down`` fails the listing."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.calls = 0
        self.down = False

    async def __call__(self, source: QueueSource, connections: Connections) -> tuple[str, ...]:
        self.calls += 1
        if self.down:
            raise BrokerUnavailable("redis", source.queue, "connection refused")
        return self.names


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Broker:
    listed = Broker("low-a", "low-b", "mail")
    monkeypatch.setattr(pool_queues, "list_queues", listed)
    return listed


def pool(queues: str = "critical,low-*") -> TriggerSpec:
    return parse_metadata(
        {"url": "redis://localhost", "format": "sidekiq", "queues": queues, "workerThroughput": "1"}
    )


async def test_a_list_is_shared_until_it_is_due_again(broker: Broker) -> None:
    resolver = PoolQueues(Connections(), relist_every=3600)
    first = await resolver.resolve(pool())
    assert [q.name for q in first] == ["critical", "low-a", "low-b"]
    await resolver.resolve(pool("low-*,mail"))
    assert broker.calls == 1  # one broker, one listing


async def test_the_last_good_list_stands_in_while_listing_fails(broker: Broker) -> None:
    resolver = PoolQueues(Connections(), relist_every=0)
    await resolver.resolve(pool())
    broker.down = True
    again = await resolver.resolve(pool())
    assert [q.name for q in again] == ["critical", "low-a", "low-b"]
    fresh = PoolQueues(Connections(), relist_every=0)
    with pytest.raises(BrokerUnavailable):
        await fresh.resolve(pool())


async def test_the_cap_and_a_glob_that_matches_nothing(broker: Broker) -> None:
    with pytest.raises(ResourceExhausted, match="are 3 with the broker's queues"):
        await PoolQueues(Connections(), max_queues=2).resolve(pool())
    with pytest.raises(QueueMisconfigured, match="match none of the queues"):
        await PoolQueues(Connections()).resolve(pool("reports-*"))


async def test_a_pool_without_globs_lists_nothing(broker: Broker) -> None:
    queues = await PoolQueues(Connections()).resolve(pool("a,b"))
    assert [q.name for q in queues] == ["a", "b"]
    assert broker.calls == 0
