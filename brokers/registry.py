"""The formats a trigger may name, and their adapters, each imported only when a queue of its
format is first opened."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping

from brokers.base import AdapterFactory, QueueAdapter, QueueSource
from brokers.format_api import BrokerInfo, FormatInfo
from brokers.formats import FORMATS, NOT_APPLYING_HINTS


@functools.cache
def formats() -> Mapping[str, FormatInfo]:
    """Every format by name, in the order listings show them."""
    return dict(FORMATS)


def format_info(name: str) -> FormatInfo:
    """The format ``name`` (a name a parsed trigger holds: KeyError for any other)."""
    return formats()[name]


@functools.cache
def brokers() -> Mapping[str, BrokerInfo]:
    """Every broker by name, in the order of the formats that name it."""
    found: dict[str, BrokerInfo] = {}
    for info in formats().values():
        found.setdefault(info.broker.name, info.broker)
    return found


@functools.cache
def schemes() -> Mapping[str, BrokerInfo]:
    """URL scheme -> its broker."""
    return {scheme: broker for broker in brokers().values() for scheme in broker.schemes}


@functools.cache
def layout_keys() -> tuple[str, ...]:
    """Every format's layout keys, each once, in the order of the formats."""
    keys = (key for info in formats().values() for key in info.layout_keys)
    return tuple(dict.fromkeys(keys))


def applies_to(key: str) -> str | None:
    """The format a message about a layout key that does not apply points to, if any."""
    for name in NOT_APPLYING_HINTS:
        if key in FORMATS[name].layout_keys:
            return name
    return None


def open_adapter(source: QueueSource) -> QueueAdapter:
    """An adapter for ``source``, importing its module on first use."""
    module_name, _, name = format_info(source.format).adapter.partition(":")
    factory: AdapterFactory = getattr(importlib.import_module(module_name), name)
    return factory(source)
