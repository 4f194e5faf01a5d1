"""Queues kept in Redis lists (Sidekiq, RQ, Dramatiq, Resque, Huey, lists) -> QueueSnapshot.

One sample is one MULTI/EXEC round trip: the list's length, its oldest and newest elements and
the position of the previous marker (``brokers.list_marker``), read by ``brokers.list_ends``,
which sends an end's element only when it changed since the last sample and is at most
``payloads.MAX_PAYLOAD_BYTES`` long; and the format's other counts. Formats that keep the
enqueue time in a job hash (RQ, Dramatiq) take a second round trip to read it, when the
oldest job is not the one seen last time; a time field above the bound is measured
(``HSTRLEN``) and not fetched. A job whose payload is too large, or nested too deep, has no
time (warning ``payload_too_large`` or ``payload_too_deep``): the scaler then estimates the
age from the arrival history, as for jobs that carry no time.

Key names and list ends, as the installed libraries write them (``P`` is the key prefix):

- sidekiq: list ``queue:<q>`` (``P:queue:<q>`` with a namespace), LPUSH, oldest at the tail.
- rq: list ``P:queue:<q>`` of ids, RPUSH, oldest at the head; ``P:job:<id>`` field
  ``enqueued_at``; workers = SCARD ``P:workers:<q>`` (in flight and the counts:
  ``brokers.redis_rq``, in the same transaction).
- dramatiq: list ``P:<q>`` of ids, RPUSH, oldest at the head; hash ``P:<q>.msgs`` id -> JSON
  message with ``message_timestamp``.
- resque: list ``P:queue:<q>`` (redis-namespace ``resque``) of JSON ``{"class", "args"}``,
  RPUSH (``push_to_queue`` in resque ``lib/resque/data_store.rb``), LPOP: oldest at the head.
  No enqueue time unless a producer adds ``timestamp`` (s; Judoscale's Resque extension).
- huey: list ``P.<name>`` (``huey.redis.<name>``: ``RedisStorage.queue_key`` in
  ``huey/storage.py``) of pickled messages, LPUSH (``enqueue``), BRPOP (``dequeue``): oldest at
  the tail; no enqueue time. ``<name>`` is the name given to ``RedisHuey(name)``, cleaned as
  ``RedisStorage.clean_name`` does (only ``[A-Za-z0-9_]`` kept), so users write the name as in
  their code (a Huey built with ``clean_name=False`` and other characters is not found).
- list: key ``P<q>`` (prefix and queue joined as given), JSON payloads, ends as configured.

Plain Resque jobs and Huey jobs carry no enqueue time: their age is left unknown here, and the
scaler estimates it from the arrival history.
"""

from __future__ import annotations

import enum
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from brokers.base import End, Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.list_ends import Element, ListEnds
from brokers.payloads import MAX_PAYLOAD_BYTES, TOO_LARGE, Stamp, checked_at, stamp_reader
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import ListLayout

COUNTS_SOURCE = "list-marker"
#: KEYS[1] a job hash, ARGV[1] its field, ARGV[2] the size bound: {size, value or false}
FIELD_SCRIPT = """
local size = redis.call('HSTRLEN', KEYS[1], ARGV[1])
if size > tonumber(ARGV[2]) then return {size, false} end
return {size, redis.call('HGET', KEYS[1], ARGV[1])}
"""


class Role(enum.Enum):
    """What a count beside the main list means."""

    CONSUMERS = "consumers"


@dataclass(frozen=True, slots=True)
class Count:
    role: Role
    command: str
    key: str


@dataclass(frozen=True, slots=True)
class Layout:
    """Where one format keeps one queue."""

    list_key: str
    oldest_end: End
    counts: tuple[Count, ...] = ()
    #: job id -> (hash key, field) holding its enqueue time; None: the list holds the payloads
    time_field: Callable[[bytes], tuple[bytes, bytes]] | None = None


def layout_for(source: QueueSource) -> Layout:
    """The keys of ``source``'s queue; the oldest end is the format's (``list``: the user's)."""
    options = source.options_as(ListLayout)
    p, q = options.key_prefix, source.queue
    oldest_end = options.oldest_end
    match source.format:
        case "sidekiq":
            return Layout(_key(p, "queue", q), oldest_end)
        case "rq":
            rq_job = _key(p, "job", "").encode()
            return Layout(
                _key(p, "queue", q),
                oldest_end,
                (Count(Role.CONSUMERS, "SCARD", _key(p, "workers", q)),),
                lambda id_: (rq_job + id_, b"enqueued_at"),
            )
        case "dramatiq":
            messages = (_key(p, q) + ".msgs").encode()
            return Layout(_key(p, q), oldest_end, (), lambda id_: (messages, id_))
        case "resque":
            return Layout(_key(p, "queue", q), oldest_end)
        case "huey":
            name = huey_name(q)
            return Layout(f"{p}.{name}" if p else name, oldest_end)
        case "list":
            return Layout(p + q, oldest_end)
    raise ValueError(f"format {source.format!r} is not a Redis list format")


def huey_name(name: str) -> str:
    """A Huey name as ``RedisStorage.clean_name`` (huey/storage.py) cleans it for its keys."""
    return re.sub("[^A-Za-z0-9_]", "", name)


def _key(prefix: str, *parts: str) -> str:
    return ":".join((prefix, *parts) if prefix else parts)


class RedisQueueAdapter:
    """Samples one queue kept in a Redis list. Keeps the list marker and the oldest job's time."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        self._source = source
        self._layout = layout_for(source)
        options = source.options_as(ListLayout)
        self._read_stamp = stamp_reader(
            source.format, options.timestamp_field, options.timestamp_unit
        )
        self._ends = ListEnds(self._layout.list_key, self._layout.oldest_end)
        #: the hash of the oldest element last read, and its time without a clock check
        self._oldest: tuple[bytes, Stamp] | None = None
        self._redis = RedisConnection(source, connections)

    async def sample(self) -> QueueSnapshot:
        snapshot, _ = await self.sample_with(())
        return snapshot

    async def sample_with(self, commands: Sequence[Command]) -> tuple[QueueSnapshot, Sequence[Any]]:
        """The snapshot, and the replies to ``commands``, run in the same transaction as the
        list's reads (a format's other records, read at the same moment)."""
        layout = self._layout
        known = self._oldest[0] if self._oldest is not None else b""
        own: list[Command] = [self._ends.command(known)]
        own += [(count.command, count.key) for count in layout.counts]
        replies = await self._redis.execute([*own, *commands], transaction=True)
        observed_at = time.time()

        ends = self._ends.observe(replies[0])
        extra = self._counts(replies[1 : len(own)])
        stamp = await self._stamp(ends.oldest, observed_at)
        counts = ends.counts
        snapshot = QueueSnapshot(
            observed_at=observed_at,
            depth=ends.length,
            oldest_enqueued_at=stamp.enqueued_at,
            oldest_precision=_precision(stamp),
            oldest_source=f"payload:{stamp.field}" if stamp.enqueued_at is not None else "",
            arrivals_total=counts.arrivals_total,
            completions_total=counts.completions_total,
            counts_exact=counts.exact,
            counts_source=COUNTS_SOURCE,
            consumers=extra.get(Role.CONSUMERS),
            warnings=(stamp.warning,) if stamp.warning else (),
        )
        return snapshot, replies[len(own) :]

    async def aclose(self) -> None:
        await self._redis.aclose()

    def _counts(self, replies: Sequence[int]) -> dict[Role, int]:
        totals: dict[Role, int] = {}
        for count, reply in zip(self._layout.counts, replies, strict=True):
            totals[count.role] = totals.get(count.role, 0) + reply
        return totals

    async def _stamp(self, oldest: Element | None, now: float) -> Stamp:
        """The oldest job's enqueue time, read once per job: in the element itself, or in its
        job hash."""
        if oldest is None:
            return Stamp(None)
        if oldest.too_large:
            return Stamp(None, warning=TOO_LARGE)
        if oldest.payload is not None:  # a job not read before
            unclocked = await self._unclocked(oldest.payload)
            if unclocked is None:  # its hash is not written yet, or gone: ask again next time
                self._oldest = None
                return self._read_stamp(None, now)
            self._oldest = (oldest.digest, unclocked)
        if self._oldest is None:  # cannot be: the script sends an element whose hash differs
            return Stamp(None)
        return checked_at(self._oldest[1], now)

    async def _unclocked(self, element: bytes) -> Stamp | None:
        """The time in ``element`` or in its job hash, before any clock check; None when the
        job hash has no such field."""
        time_field = self._layout.time_field
        if time_field is None:
            return self._read_stamp(element, math.inf)
        key, field = time_field(element)
        (reply,) = await self._redis.execute(
            [("EVAL", FIELD_SCRIPT, 1, key, field, MAX_PAYLOAD_BYTES)], transaction=False
        )
        size, raw = reply
        if size > MAX_PAYLOAD_BYTES:
            return Stamp(None, warning=TOO_LARGE)
        if raw is None:
            return None
        return self._read_stamp(raw, math.inf)


def _precision(stamp: Stamp) -> Precision:
    if stamp.enqueued_at is None:
        return Precision.UNKNOWN
    if stamp.warning is not None:  # clamped clock skew
        return Precision.ESTIMATE
    return Precision.EXACT
