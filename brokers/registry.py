"""Broker name -> adapter, imported only when a queue on that broker is first opened."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from brokers.base import QueueAdapter
from scaler.errors import InvalidMetadata
from scaler.spec import QueueSource

#: broker -> "module:callable" taking a QueueSource and returning a QueueAdapter
ADAPTERS: dict[str, str] = {
    "redis": "brokers.redis_queues:RedisQueueAdapter",
}


def open_adapter(source: QueueSource) -> QueueAdapter:
    """An adapter for ``source``, importing its broker's module on first use."""
    target = ADAPTERS.get(source.broker)
    if target is None:
        raise InvalidMetadata(
            "broker", f"got {source.broker!r}; expected one of {', '.join(sorted(ADAPTERS))}"
        )
    module_name, _, name = target.partition(":")
    factory: Callable[[QueueSource], QueueAdapter] = getattr(
        importlib.import_module(module_name), name
    )
    return factory(source)
