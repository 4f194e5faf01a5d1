"""A pool trigger's metadata: ``queues``, ``queueOrder`` and ``queueTargetAges`` -> a
:class:`~scaler.pool_spec.PoolSpec` (the syntax is in :mod:`scaler.pool_spec`).

Every problem is an :class:`~scaler.errors.InvalidMetadata` naming the key, the entry and what
to set instead.
"""

from __future__ import annotations

from brokers.format_api import FormatInfo
from brokers.registry import formats
from brokers.suggest import nearest
from scaler.durations import parse_duration
from scaler.errors import InvalidMetadata
from scaler.metadata_reader import MetadataReader
from scaler.pool_spec import PoolEntry, PoolSpec, ServingOrder, is_glob, weight_like

_ORDERS = [order.value for order in ServingOrder]


def parse_pool(reader: MetadataReader, info: FormatInfo, max_queues: int) -> PoolSpec | None:
    """The pool ``queues`` lists, or None for a single-queue trigger (then ``queueOrder`` and
    ``queueTargetAges`` must not be set). ``max_queues``: the most a pool may list (the
    server's --max-pool-queues; its globs are held to it when they are resolved)."""
    text = reader.get("queues")
    if text is None:
        for key in ("queueOrder", "queueTargetAges"):
            if reader.get(key) is not None:
                raise InvalidMetadata(
                    key, "applies to a pool trigger only; list its queues in queues, or remove it"
                )
        return None
    order = ServingOrder(reader.choice("queueOrder", _ORDERS, ServingOrder.STRICT.value))
    entries = _entries(text, order, info)
    if len(entries) > max_queues:
        raise InvalidMetadata(
            "queues",
            f"lists {len(entries)} queues; a pool may have at most {max_queues} (the scaler's "
            "--max-pool-queues): split the pool, or ask the operator to raise the cap",
        )
    ages = _target_ages(reader.get("queueTargetAges"), [e.pattern for e in entries])
    entries = tuple(
        PoolEntry(e.pattern, e.weight, ages.get(e.pattern, e.target_age)) for e in entries
    )
    return PoolSpec(entries, order, drain_follows_age=reader.get("targetDrainTime") is None)


def _entries(text: str, order: ServingOrder, info: FormatInfo) -> tuple[PoolEntry, ...]:
    entries: list[PoolEntry] = []
    seen: set[str] = set()
    for position, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        if not item:
            raise InvalidMetadata(
                "queues",
                f"entry {position} of {text!r} is empty; list queue names separated by commas: "
                "critical,default,low (with queueOrder weighted, critical:5,default:3,low)",
            )
        name, weight = _weighted(item, order)
        if name in seen:
            raise InvalidMetadata("queues", f"queue {name!r} is listed twice; list each queue once")
        seen.add(name)
        if is_glob(name) and not info.queue_lister:
            raise InvalidMetadata(
                "queues",
                f"entry {name!r} is a glob, but format {info.name} cannot list its queues, so "
                f"the glob cannot be resolved; name each queue (globs work with formats "
                f"{_listing_formats()})",
            )
        entries.append(PoolEntry(name, weight))
    return tuple(entries)


def _weighted(item: str, order: ServingOrder) -> tuple[str, int]:
    """``name`` or ``name:weight``; a ``:`` not followed by a number belongs to the name."""
    name, colon, after = item.rpartition(":")
    if not colon or not weight_like(after.strip()):
        return item, 1
    name = name.strip()
    if not after.strip().isdigit() or int(after) < 1:
        raise InvalidMetadata(
            "queues",
            f"entry {item!r}: the weight {after.strip()!r} is not a whole number of at least 1",
        )
    if order is not ServingOrder.WEIGHTED:
        raise InvalidMetadata(
            "queues",
            f"entry {item!r} has a weight, which only queueOrder weighted uses (queueOrder is "
            f"{order.value}); set queueOrder: weighted, or drop the weights",
        )
    if not name:
        raise InvalidMetadata("queues", f"entry {item!r} has a weight but no queue name")
    return name, int(after)


def _target_ages(text: str | None, patterns: list[str]) -> dict[str, float]:
    """``queueTargetAges``: ``entry=duration`` pairs, each entry as ``queues`` writes it."""
    if text is None:
        return {}
    ages: dict[str, float] = {}
    for raw in text.split(","):
        item = raw.strip()
        pattern, equals, duration = (part.strip() for part in item.partition("="))
        if not equals or not pattern:
            raise InvalidMetadata(
                "queueTargetAges",
                f"entry {item!r}; expected QUEUE=DURATION pairs separated by commas, each QUEUE "
                "as queues lists it: critical=10s,low=10m",
            )
        if pattern not in patterns:
            close = nearest(pattern, patterns, cutoff=0.5)
            hint = f" (did you mean {close!r}?)" if close else ""
            raise InvalidMetadata(
                "queueTargetAges",
                f"{pattern!r} is not an entry of queues{hint}; name the queues (or globs) as "
                f"queues lists them: {', '.join(patterns)}",
            )
        if pattern in ages:
            raise InvalidMetadata("queueTargetAges", f"{pattern!r} is given twice; give it once")
        try:
            seconds = parse_duration(duration)
        except ValueError:
            seconds = -1.0
        if seconds <= 0:
            raise InvalidMetadata(
                "queueTargetAges",
                f"{pattern}={duration!r}; expected a duration above zero such as 30, 500ms, 90s, "
                "5m or 1h",
            )
        ages[pattern] = seconds
    return ages


def _listing_formats() -> str:
    return ", ".join(name for name, info in formats().items() if info.queue_lister)
