"""Queue format -> adapter, imported only when a queue of that format is first opened."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from brokers.base import QueueAdapter
from brokers.formats import FORMATS
from scaler.trigger_spec import QueueSource


def open_adapter(source: QueueSource) -> QueueAdapter:
    """An adapter for ``source``, importing its module on first use."""
    module_name, _, name = FORMATS[source.format].adapter.partition(":")
    factory: Callable[[QueueSource], QueueAdapter] = getattr(
        importlib.import_module(module_name), name
    )
    return factory(source)
