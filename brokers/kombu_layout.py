"""Where kombu's Redis transport keeps a Celery queue, and which queue an unacked message is for.

Pure: no I/O. Everything here is read from kombu 5.7's ``kombu/transport/redis.py`` (``Channel``
and ``QoS``), ``kombu/transport/virtual/base.py`` and ``kombu/transport/virtual/exchange.py``:

- A queue is one list per priority step (the transport option ``priority_steps``, kombu's
  default ``(0, 3, 6, 9)``: :data:`PRIORITY_STEPS`): ``Channel._q_for_pri`` names step 0 by the
  bare queue name and any other step ``<queue><sep><step>``, ``sep`` being the transport option
  of that name (``Channel.sep``, default ``\\x06\\x16``: :data:`SEP`). Celery's documentation for
  Redis priorities sets ``priority_steps=list(range(10))`` and ``sep=":"``: lists ``<queue>``,
  ``<queue>:1`` ... ``<queue>:9``. ``Channel._size`` sums the lists of every step, in the order
  given; ``Channel.priority`` bisects the steps, so kombu needs them sorted.
- ``global_keyprefix`` is prepended, with no separator, to every key kombu touches
  (``GlobalKeyPrefixMixin._prefix_args``): the lists, ``unacked`` and the binding sets alike.
- ``QoS.append`` stores each delivered, unacked message in the hash ``unacked`` (delivery tag
  -> JSON ``[message, exchange, routing_key]``, the last two from the message's
  ``properties.delivery_info``) and the zset ``unacked_index`` (delivery tag -> delivery time).
- The queue name itself is not stored. kombu finds it again with ``Channel._lookup(exchange,
  routing_key)``: the anonymous exchange ``""`` routes by routing key = queue name (Celery
  publishes there for every direct-exchange queue: ``send_task_message`` in
  ``celery/app/amqp.py`` converts to the anonymous exchange); a named exchange routes through
  its binding set ``_kombu.binding.<exchange>``, members ``routing_key SEP pattern SEP queue``
  joined with the same ``sep`` as the priority lists (``Channel._queue_bind``; ``get_table``
  splits them by it again): a topic binding matches the regex ``pattern``, any other binding
  (direct, the default type) the routing key exactly. Fanout exchanges (Celery's broadcast
  queues, delivered by pub/sub, not lists) are read as direct ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: kombu's default ``priority_steps``; step 0 is the bare queue name
PRIORITY_STEPS = (0, 3, 6, 9)
#: kombu's default ``sep``, between a queue name and its priority step, and in bindings
SEP = "\x06\x16"
#: kombu's default ``unacked_key``; the only one read (no trigger metadata key sets another)
UNACKED = "unacked"
BINDINGS = "_kombu.binding."


def priority_lists(
    prefix: str, queue: str, steps: Sequence[int] = PRIORITY_STEPS, sep: str = SEP
) -> tuple[str, ...]:
    """The keys of ``queue``'s lists, one per step in the order given (step 0 is the bare name)."""
    return tuple(prefix + (f"{queue}{sep}{step}" if step else queue) for step in steps)


def binding_key(prefix: str, exchange: str) -> str:
    return f"{prefix}{BINDINGS}{exchange}"


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where an unacked message was published to."""

    exchange: str
    routing_key: str


@dataclass(frozen=True, slots=True)
class Binding:
    """One member of ``_kombu.binding.<exchange>``: a queue bound by routing key or pattern."""

    routing_key: str
    pattern: str
    queue: str


def parse_delivery(value: bytes) -> Delivery | None:
    """An ``unacked`` hash value, JSON ``[message, exchange, routing_key]``; None if not that."""
    try:
        entry = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's limit
        return None
    if not isinstance(entry, list) or len(entry) != 3:
        return None
    _, exchange, routing_key = entry
    if not isinstance(exchange, str) or not isinstance(routing_key, str | None):
        return None
    return Delivery(exchange, routing_key or "")


def parse_binding(member: bytes, sep: str = SEP) -> Binding | None:
    """A binding set member, ``routing_key SEP pattern SEP queue``; None if not that.

    A member that ``sep`` splits into more than three parts (a separator that also occurs in a
    routing key or queue name) is not read: kombu's own lookup cannot unpack it either.
    """
    parts = member.decode("utf-8", errors="replace").split(sep)
    if len(parts) != 3:
        return None
    return Binding(*parts)


def routes_to(delivery: Delivery, queue: str, bindings: Sequence[Binding]) -> bool:
    """Whether kombu would route ``delivery`` to ``queue``; ``bindings`` are its exchange's."""
    if not delivery.exchange:
        return delivery.routing_key == queue
    return any(
        binding.queue == queue and _matches(binding, delivery.routing_key) for binding in bindings
    )


def _matches(binding: Binding, routing_key: str) -> bool:
    if binding.pattern:  # a topic exchange: TopicExchange.key_to_pattern made this regex
        try:
            return re.match(binding.pattern, routing_key) is not None
        except re.error:  # not kombu's: kombu could not route by it either
            return False
    return binding.routing_key == routing_key
