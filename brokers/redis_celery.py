"""Celery queues on kombu's Redis transport -> QueueSnapshot.

The layout (``brokers.kombu_layout``, with its sources in kombu 5.7): a queue is one list per
priority step, the bare name for step 0 and ``<q><sep><step>`` for the others, all under the key
prefix (kombu's ``global_keyprefix``, prepended as is). The steps and ``sep`` are kombu's
transport options ``priority_steps`` and ``sep``, given by the trigger metadata keys
``prioritySteps`` and ``prioritySeparator`` (``QueueSource.priority_steps`` and
``priority_separator``); by default kombu's: steps 0, 3, 6, 9 and ``\\x06\\x16``. kombu LPUSHes
(``Channel._put``) and takes from the tail (``BRPOP`` in ``Channel._brpop_start``, ``RPOP`` in
``Channel._get``), so each list's push end is its head and its oldest message its tail (index -1).

One sample is one MULTI/EXEC round trip: for each list, ``brokers.list_ends``'s script (its
length, its oldest and newest elements, each sent only when changed and at most
``payloads.MAX_PAYLOAD_BYTES`` long, and ``LPOS`` of the previous list marker); and ``HLEN`` of
the ``unacked`` hash.

- depth: the sum of the lists' lengths (as ``Channel._size`` counts).
- arrivals and completions: one ``ListMarker`` per list, summed; exact only when every list's
  interval is. A list empty at both ends of an interval may have seen jobs come and go, so a
  queue whose priority lists stay empty (no producer sets a priority) has lower-bound counts.
- oldest: Celery's protocol 2 carries no publish time, so it is unknown unless producers add
  one (``brokers.payloads.celery_stamp``: ``properties.published_at`` as Judoscale's
  ``before_task_publish`` handler sets it, ``headers.published_at``, or ``timestampField``).
  The oldest of the lists' tails, exact only when every non-empty list's tail has a time: one
  without a time may be older, and a lower bound must not pass for exact. A tail too large or
  nested too deep to read has no time (``payload_too_large``, ``payload_too_deep``). Each
  tail's time is read once, while it stays the tail.
- in flight: messages delivered and not yet acked, which kombu keeps in the hash ``unacked``
  (one per Redis db and key prefix, not per queue; a worker's prefetched messages and the ETA
  and countdown tasks it holds are there too, as kombu cannot tell them from running ones). Its
  values name the exchange and routing key, not the queue: each is routed as kombu routes it
  (``kombu_layout.routes_to``). Up to :data:`MAX_UNACKED_READ` entries a second round trip
  lists them (``HKEYS``), a third fetches the ones not read before (each entry once: kombu's
  delivery tags are unique and an entry is never rewritten; one above
  ``payloads.MAX_PAYLOAD_BYTES`` never, which leaves the count unknown with the warning
  ``payload_too_large``), and another the binding sets of any named exchanges among them;
  above that the count is unknown.
- consumers: unknown; kombu's Redis transport keeps no registry of them.

``priority_steps`` and ``sep`` follow the trigger (above), and ``sep`` splits the binding set
members too. kombu's default is assumed for the transport option ``unacked_key`` (``unacked``):
no trigger metadata key sets it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from brokers.base import End, Precision, QueueSnapshot, QueueSource
from brokers.connections import Connections
from brokers.kombu_layout import (
    UNACKED,
    Binding,
    Delivery,
    binding_key,
    parse_binding,
    parse_delivery,
    priority_lists,
    routes_to,
)
from brokers.list_ends import Element, Ends, ListEnds
from brokers.payloads import MAX_PAYLOAD_BYTES, TOO_LARGE, Stamp, checked_at, stamp_reader
from brokers.redis_connection import Command, RedisConnection
from brokers.redis_options import CeleryLayout
from brokers.redis_queues import COUNTS_SOURCE

#: the most ``unacked`` entries read in one sample; above it, in flight is unknown
MAX_UNACKED_READ = 10_000
#: a warning kind: an ``unacked`` entry that is not kombu's ``[message, exchange, routing_key]``
UNACKED_UNREADABLE = "unacked_unreadable"
#: KEYS[1] the ``unacked`` hash, ARGV[1] the size bound, ARGV[2...] delivery tags: for each,
#: its size and its entry (false when above the bound, or gone: size 0)
UNACKED_SCRIPT = """
local replies = {}
for i = 2, #ARGV do
  local size = redis.call('HSTRLEN', KEYS[1], ARGV[i])
  replies[#replies + 1] = size
  if size > tonumber(ARGV[1]) then
    replies[#replies + 1] = false
  else
    replies[#replies + 1] = redis.call('HGET', KEYS[1], ARGV[i])
  end
end
return replies
"""


class CeleryAdapter:
    """Samples one Celery queue: its priority lists and its share of the ``unacked`` hash."""

    broker = "redis"

    def __init__(self, source: QueueSource, connections: Connections) -> None:
        self.queue = source.queue
        options = source.options_as(CeleryLayout)
        self._prefix = options.key_prefix
        self._sep = options.priority_separator
        lists = priority_lists(
            options.key_prefix, source.queue, options.priority_steps, options.priority_separator
        )
        self._lists = tuple(ListEnds(key, End.TAIL) for key in lists)
        #: per list, the hash of its tail last read and its time without a clock check
        self._tails: list[tuple[bytes, Stamp] | None] = [None for _ in lists]
        self._read_stamp = stamp_reader("celery", options.timestamp_field, options.timestamp_unit)
        #: the ``unacked`` entries read so far, by delivery tag (at most MAX_UNACKED_READ)
        self._deliveries: dict[bytes, Delivery | str | None] = {}
        self._redis = RedisConnection(source, connections)

    async def sample(self) -> QueueSnapshot:
        commands: list[Command] = [
            ends.command(tail[0] if tail is not None else b"")
            for ends, tail in zip(self._lists, self._tails, strict=True)
        ]
        commands.append(("HLEN", self._prefix + UNACKED))
        replies = await self._redis.execute(commands, transaction=True)
        observed_at = time.time()

        lists = [ends.observe(reply) for ends, reply in zip(self._lists, replies, strict=False)]
        unacked: int = replies[-1]
        oldest, stamp_warnings = self._oldest(lists, observed_at)
        in_flight, unacked_warnings = await self._in_flight(unacked)
        return QueueSnapshot(
            observed_at=observed_at,
            depth=sum(sample.length for sample in lists),
            in_flight=in_flight,
            oldest_enqueued_at=oldest.enqueued_at,
            oldest_precision=_precision(oldest),
            oldest_source=f"payload:{oldest.field}" if oldest.enqueued_at is not None else "",
            arrivals_total=sum(sample.counts.arrivals_total for sample in lists),
            completions_total=sum(sample.counts.completions_total for sample in lists),
            # a priority list that has never held a job is taken as unused, not as one where
            # jobs came and went unseen: otherwise no Celery queue without priorities would
            # ever have exact counts
            counts_exact=all(
                sample.counts.exact
                for sample, ends in zip(lists, self._lists, strict=True)
                if ends.marker.ever_used
            ),
            counts_source=COUNTS_SOURCE,
            consumers=None,
            warnings=stamp_warnings + unacked_warnings,
        )

    async def aclose(self) -> None:
        await self._redis.aclose()

    def _oldest(self, lists: Sequence[Ends], now: float) -> tuple[Stamp, tuple[str, ...]]:
        """The earliest publish time of the lists' oldest messages, if every one has a time."""
        stamps = [
            self._tail_stamp(index, sample.oldest, now)
            for index, sample in enumerate(lists)
            if sample.oldest is not None
        ]
        warnings = tuple(dict.fromkeys(s.warning for s in stamps if s.warning is not None))
        known = [(s.enqueued_at, s) for s in stamps if s.enqueued_at is not None]
        if not known or len(known) < len(stamps):
            return Stamp(None), warnings
        return min(known, key=lambda pair: pair[0])[1], warnings

    def _tail_stamp(self, index: int, tail: Element, now: float) -> Stamp:
        """The time of list ``index``'s oldest message, read once while it stays there."""
        if tail.too_large:
            return Stamp(None, warning=TOO_LARGE)
        if tail.payload is not None:  # a message not read before
            self._tails[index] = (tail.digest, self._read_stamp(tail.payload, math.inf))
        held = self._tails[index]
        return checked_at(held[1], now) if held is not None else Stamp(None)

    async def _in_flight(self, unacked: int) -> tuple[int | None, tuple[str, ...]]:
        """How many of the ``unacked`` hash's entries (``unacked`` in all) are this queue's."""
        if unacked == 0:
            self._deliveries.clear()
            return 0, ()
        if unacked > MAX_UNACKED_READ:
            self._deliveries.clear()
            return None, ()
        deliveries = await self._read_unacked()
        if TOO_LARGE in deliveries:
            return None, (TOO_LARGE,)
        known = [delivery for delivery in deliveries if isinstance(delivery, Delivery)]
        if len(known) < len(deliveries):
            return None, (UNACKED_UNREADABLE,)
        bindings = await self._bindings(sorted({d.exchange for d in known if d.exchange}))
        return sum(routes_to(d, self.queue, bindings.get(d.exchange, ())) for d in known), ()

    async def _read_unacked(self) -> list[Delivery | str | None]:
        """Every ``unacked`` entry, parsed; each entry is fetched once (kombu's delivery tags
        are unique and an entry is never rewritten), and one above the size bound never
        (``TOO_LARGE`` in its place)."""
        key = self._prefix + UNACKED
        (tags,) = await self._redis.execute([("HKEYS", key)], transaction=False)
        new = [tag for tag in tags if tag not in self._deliveries]
        if new:
            command: Command = ("EVAL", UNACKED_SCRIPT, 1, key, MAX_PAYLOAD_BYTES, *new)
            (replies,) = await self._redis.execute([command], transaction=False)
            for tag, size, value in zip(new, replies[::2], replies[1::2], strict=True):
                if value is not None:
                    self._deliveries[tag] = parse_delivery(value)
                elif size > MAX_PAYLOAD_BYTES:
                    self._deliveries[tag] = TOO_LARGE
                # else acked since HKEYS: gone
        self._deliveries = {tag: self._deliveries[tag] for tag in tags if tag in self._deliveries}
        return list(self._deliveries.values())

    async def _bindings(self, exchanges: Sequence[str]) -> dict[str, list[Binding]]:
        """The binding sets of named exchanges (empty for none)."""
        if not exchanges:
            return {}
        commands: list[Command] = [("SMEMBERS", binding_key(self._prefix, e)) for e in exchanges]
        replies: list[Any] = await self._redis.execute(commands, transaction=False)
        return {
            exchange: [
                binding
                for binding in (parse_binding(member, self._sep) for member in members)
                if binding is not None
            ]
            for exchange, members in zip(exchanges, replies, strict=True)
        }


def _precision(stamp: Stamp) -> Precision:
    if stamp.enqueued_at is None:
        return Precision.UNKNOWN
    if stamp.warning is not None:  # clamped clock skew
        return Precision.ESTIMATE
    return Precision.EXACT
