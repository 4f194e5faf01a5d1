"""The Redis formats' layout keys, parsed into each format's options, and how each shows a
simulated queue. No Redis client is imported here (the URL check imports redis-py when a Redis
URL is first checked)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from brokers.base import End, QueueSource
from brokers.errors import InvalidMetadata
from brokers.format_api import BrokerInfo, FormatInfo, OptionReader, SnapshotModel, SourceContext
from brokers.kombu_layout import PRIORITY_STEPS, SEP
from brokers.redis_url import check_redis_url

TIMESTAMP_UNITS = ("auto", "s", "ms", "iso")
#: one item of ``prioritySteps``: a step, or an inclusive range of steps
_PRIORITY_STEP = re.compile(r"^([0-9]+)(?:\s*-\s*([0-9]+))?$")
#: the most ``prioritySteps``: kombu keeps one list per step, and a sample reads each one
MAX_PRIORITY_STEPS = 256
#: formats whose jobs carry their enqueue time where the adapter reads it
TIMESTAMPED = frozenset({"sidekiq", "rq", "bullmq", "dramatiq"})

REDIS = BrokerInfo(
    name="redis",
    title="Redis",
    schemes=("redis", "rediss", "unix"),
    default_format="list",
    offline_url="redis://offline-check:6379/0",
    url_form="redis://[:password@]host:port/db",
    check_url=check_redis_url,
)


@dataclass(frozen=True, slots=True)
class ListLayout:
    """Where a queue kept in a Redis list (or arq's sorted set) is, and how its jobs are timed."""

    key_prefix: str
    oldest_end: End
    #: the JSON field of a payload holding its enqueue time (format list)
    timestamp_field: str | None = None
    timestamp_unit: str = "auto"


@dataclass(frozen=True, slots=True)
class CeleryLayout:
    """kombu's Redis transport: the key prefix, the priority lists and the payloads' timing."""

    key_prefix: str = ""
    timestamp_field: str | None = None
    timestamp_unit: str = "auto"
    #: kombu's transport option ``priority_steps``, sorted, each once
    priority_steps: tuple[int, ...] = PRIORITY_STEPS
    #: kombu's transport option ``sep``, between a queue name and its step
    priority_separator: str = SEP


@dataclass(frozen=True, slots=True)
class StreamGroup:
    """The consumer group whose backlog a stream's queue is."""

    consumer_group: str


def _key_prefix(context: SourceContext) -> str:
    key_prefix = context.reader.get("keyPrefix")
    return context.format.key_prefix if key_prefix is None else key_prefix


def _timestamp_unit(reader: OptionReader) -> str:
    return reader.choice("timestampUnit", list(TIMESTAMP_UNITS), "auto")


def list_options(context: SourceContext) -> ListLayout:
    """``keyPrefix``, and for format list ``oldestEnd``, ``timestampField``, ``timestampUnit``."""
    reader = context.reader
    default_end = context.format.oldest_end.value
    oldest_end = End(reader.choice("oldestEnd", [e.value for e in End], default_end))
    return ListLayout(
        key_prefix=_key_prefix(context),
        oldest_end=oldest_end,
        timestamp_field=reader.get("timestampField") or None,
        timestamp_unit=_timestamp_unit(reader),
    )


def celery_options(context: SourceContext) -> CeleryLayout:
    """``keyPrefix``, ``timestampField``, ``timestampUnit``, ``prioritySteps``, ``prioritySeparator``."""
    reader = context.reader
    return CeleryLayout(
        key_prefix=_key_prefix(context),
        timestamp_field=reader.get("timestampField") or None,
        timestamp_unit=_timestamp_unit(reader),
        priority_steps=_parse_priority_steps(reader),
        priority_separator=_parse_priority_separator(reader),
    )


def stream_options(context: SourceContext) -> StreamGroup:
    """``consumerGroup``, which a stream's queue needs."""
    group = context.reader.get("consumerGroup") or None
    if group is None:
        raise InvalidMetadata(
            "consumerGroup",
            f"missing; format {context.format.name} needs the consumer group that reads the stream",
        )
    return StreamGroup(group)


_STEPS_EXPECTED = (
    "kombu's priority_steps: whole numbers of at least 0, comma-separated, or a range FIRST-LAST, "
    "for example 0,3,6,9 (kombu's default) or 0-9 (Celery's recipe, list(range(10)))"
)


def _parse_priority_steps(reader: OptionReader) -> tuple[int, ...]:
    """``prioritySteps``: ``0,3,6,9``, ``0-9`` or both forms mixed; sorted, each step once."""
    text = reader.get("prioritySteps")
    if text is None:
        return PRIORITY_STEPS
    steps: set[int] = set()
    for part in (item.strip() for item in text.split(",")):
        match = _PRIORITY_STEP.match(part)
        if match is None:
            raise reader.fail("prioritySteps", f"{_STEPS_EXPECTED}; {part!r} is neither")
        first = int(match[1])
        last = first if match[2] is None else int(match[2])
        if last < first:
            raise reader.fail(
                "prioritySteps", f"{_STEPS_EXPECTED}; the range {part!r} runs backwards"
            )
        if len(steps) + last - first + 1 > MAX_PRIORITY_STEPS:
            raise reader.fail(
                "prioritySteps",
                f"at most {MAX_PRIORITY_STEPS} steps (kombu keeps a list per step, and each is read)",
            )
        twice = steps.intersection(range(first, last + 1))
        if twice:
            raise reader.fail(
                "prioritySteps",
                f"each step once; repeated: {', '.join(map(str, sorted(twice)))}",
            )
        steps.update(range(first, last + 1))
    return tuple(sorted(steps))


def _parse_priority_separator(reader: OptionReader) -> str:
    """``prioritySeparator``, taken as is (blanks included): kombu's ``sep``, never empty."""
    text = reader.values.get("prioritySeparator")
    if text is None:
        return SEP
    if not text:
        raise reader.fail(
            "prioritySeparator",
            "kombu's sep, at least one character, for example ':' (Celery's recipe); "
            "kombu's default is \\x06\\x16",
        )
    return text


def list_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """A list (Celery's lists too) as its adapter reads it: list-marker counts, and payload
    timestamps where the library writes them or ``timestampField`` names one."""
    options = source.options
    field = options.timestamp_field if isinstance(options, ListLayout | CeleryLayout) else None
    timed = info.name in TIMESTAMPED or field is not None
    # the format's oldest end, or a list's oldestEnd
    oldest = options.oldest_end if isinstance(options, ListLayout) else info.oldest_end
    return SnapshotModel("list-marker", "payload" if timed else "", oldest.opposite)


def sidekiq_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """Sidekiq as its adapter reads it: a list with payload times; the processes and their
    threads, quiet ones (draining) not serving; in flight as of the last heartbeat (5 s)."""
    return replace(
        list_model(info, source), heartbeat=5.0, draining_counts=False, reports_slots=True
    )


def rq_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """RQ as its adapter reads it: exact counts from the workers' counters while any is
    registered (else the list marker's); the workers' job slots."""
    return replace(
        list_model(info, source),
        counts_source="rq-worker-counters",
        counters_need_workers=True,
        reports_slots=True,
    )


def resque_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """Resque as its adapter reads it: a list without times; exact counts from the workers'
    ``stat:processed:<id>`` while any is registered (else the list marker's); the workers' job
    slots."""
    return replace(
        list_model(info, source),
        counts_source="resque-worker-counters",
        counters_need_workers=True,
        reports_slots=True,
    )


def bullmq_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """BullMQ as its adapter reads it: arrivals from the id counter and completions from the
    events stream (exact however fast the queue empties), jobs timed by their hashes."""
    return SnapshotModel("bullmq-events", "payload", info.oldest_end.opposite)


def stream_model(info: FormatInfo, source: QueueSource) -> SnapshotModel:
    """A stream read by a consumer group: the stream's counters, entry ids as enqueue times."""
    return SnapshotModel("stream-counters", "entry-id", info.oldest_end.opposite)
