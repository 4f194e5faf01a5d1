"""The formats a trigger may name: the built-in table and the plugins' (the entry points of
:data:`ENTRY_POINTS`, loaded when a format is first looked up), and their adapters, each
imported only when a queue of its format is first opened."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Iterable, Mapping

from brokers.base import AdapterFactory, QueueAdapter, QueueLister, QueueSource
from brokers.connections import Connections
from brokers.errors import InvalidPlugin
from brokers.format_api import BrokerInfo, FormatInfo
from brokers.formats import FORMATS, NOT_APPLYING_HINTS

#: the entry-point group of format plugins: ``NAME = "module:FORMAT_INFO"``, the format's name
ENTRY_POINTS = "queue_age_scaler.formats"
#: keys a format cannot claim as layout keys: the trigger keys every format reads
CORE_KEYS = frozenset(
    {
        "broker", "connection", "url", "queue", "format", "targetAge", "targetDrainTime",
        "workerThroughput", "jobDuration", "workerConcurrency", "minWorkers", "maxWorkers",
        "dependencies", "metric", "activationAge", "activationDepth", "rateWindow",
        "sampleInterval", "slowSampleInterval", "gracePeriod", "learnKnee", "dependencyScope", "dependencyWeight", "queues",
        "queueOrder", "queueTargetAges", "queueJobDurations",
    }
)  # fmt: skip


@functools.cache
def formats() -> Mapping[str, FormatInfo]:
    """Every format by name, the built-in ones first, then the plugins' (raises
    :class:`InvalidPlugin` for a plugin that cannot be used)."""
    return with_plugins(FORMATS, importlib.metadata.entry_points(group=ENTRY_POINTS))


@functools.cache
def origins() -> Mapping[str, str]:
    """Format -> where it comes from: ``built-in``, or the plugin's distribution."""
    found = dict.fromkeys(FORMATS, "built-in")
    for point in importlib.metadata.entry_points(group=ENTRY_POINTS):
        dist = point.dist
        found.setdefault(point.name, f"{dist.name} {dist.version}" if dist else point.value)
    return found


def with_plugins(
    built_in: Mapping[str, FormatInfo], points: Iterable[importlib.metadata.EntryPoint]
) -> dict[str, FormatInfo]:
    """``built_in`` and the format of each entry point, checked against those before it."""
    table = dict(built_in)
    for point in sorted(points, key=lambda p: p.name):
        info = _load(point)
        taken = table.get(info.name)
        if taken is not None:
            whose = "a built-in format" if info.name in built_in else "another plugin's format"
            raise InvalidPlugin(
                f"{_named(point)}: format {info.name!r} is {whose}; give the plugin's format "
                "another name"
            )
        _check_broker(point, info, table.values())
        clash = sorted(CORE_KEYS.intersection(info.layout_keys))
        if clash:
            raise InvalidPlugin(
                f"{_named(point)}: layout key {clash[0]!r} is a key every trigger has; name the "
                "format's own keys otherwise"
            )
        table[info.name] = info
    return table


def _named(point: importlib.metadata.EntryPoint) -> str:
    dist = point.dist.name if point.dist is not None else "an unknown distribution"
    return f"format plugin {point.name!r} ({point.value}, from {dist})"


def _load(point: importlib.metadata.EntryPoint) -> FormatInfo:
    try:
        info = point.load()
    except Exception as error:  # the plugin's own bug, whatever it is: named, never a traceback
        raise InvalidPlugin(
            f"{_named(point)} cannot be loaded: {type(error).__name__}: {error}"
        ) from error
    if not isinstance(info, FormatInfo):
        raise InvalidPlugin(
            f"{_named(point)} is a {type(info).__name__}, not a brokers.format_api.FormatInfo"
        )
    if info.name != point.name:
        raise InvalidPlugin(
            f"{_named(point)} describes format {info.name!r}; the entry point's name must be "
            "the format's"
        )
    return info


def _check_broker(
    point: importlib.metadata.EntryPoint, info: FormatInfo, known: Iterable[FormatInfo]
) -> None:
    """A plugin may add formats to a broker (its very BrokerInfo) or a broker of its own, whose
    schemes are no other broker's."""
    for other in known:
        broker = other.broker
        if broker.name == info.broker.name and broker != info.broker:
            raise InvalidPlugin(
                f"{_named(point)}: broker {broker.name!r} is another one's; use its BrokerInfo "
                f"(format {other.name}'s) or name the plugin's broker otherwise"
            )
        shared = sorted(set(broker.schemes) & set(info.broker.schemes))
        if broker.name != info.broker.name and shared:
            raise InvalidPlugin(
                f"{_named(point)}: URL scheme {shared[0]}:// is broker {broker.name!r}'s"
            )


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


async def list_queues(source: QueueSource, connections: Connections) -> tuple[str, ...]:
    """The queues of ``source``'s format on its broker, importing the lister on first use
    (ValueError for a format that cannot list them: ``FormatInfo.queue_lister`` is empty)."""
    where = format_info(source.format).queue_lister
    if not where:
        raise ValueError(f"format {source.format} cannot list its queues")
    module_name, _, name = where.partition(":")
    lister: QueueLister = getattr(importlib.import_module(module_name), name)
    return await lister(source, connections)


def open_adapter(source: QueueSource, connections: Connections) -> QueueAdapter:
    """An adapter for ``source`` on ``connections``, importing its module on first use."""
    module_name, _, name = format_info(source.format).adapter.partition(":")
    factory: AdapterFactory = getattr(importlib.import_module(module_name), name)
    return factory(source, connections)
