"""What each queue format is, without importing any broker client.

The metadata parser validates against this table; the adapters read the same table, so the two
cannot disagree about which end of a list is oldest or what a format can observe.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class End(enum.StrEnum):
    """An end of a Redis list. ``head`` is index 0 (where LPUSH adds), ``tail`` is index -1."""

    HEAD = "head"
    TAIL = "tail"

    @property
    def opposite(self) -> End:
        return End.TAIL if self is End.HEAD else End.HEAD


@dataclass(frozen=True, slots=True)
class FormatInfo:
    """One job library's layout on its broker."""

    name: str
    broker: str
    #: the library's key namespace; ``""`` where it has none
    key_prefix: str
    #: the end of the waiting list that holds the oldest job
    oldest_end: End
    #: whether the format shows how many workers are attached (needed to learn throughput,
    #: and to hold the ceiling in ``age`` and ``drainTime`` mode)
    reports_consumers: bool
    #: whether the format shows jobs picked up and not yet finished
    reports_in_flight: bool
    #: layout keys a user may set for this format
    layout_keys: frozenset[str]
    #: "module:callable" that opens an adapter for a queue of this format
    adapter: str


_PREFIX_ONLY = frozenset({"keyPrefix"})
_GENERIC = frozenset({"keyPrefix", "timestampField", "timestampUnit", "oldestEnd"})
_LISTS = "brokers.redis_queues:RedisQueueAdapter"

FORMATS: dict[str, FormatInfo] = {
    info.name: info
    for info in (
        # Sidekiq: LPUSH queue:<name>, BRPOP; oldest at -1; JSON enqueued_at (7.x float s, 8.x int
        # ms); workers and in flight from the processes' heartbeats (brokers/redis_sidekiq.py)
        FormatInfo(
            "sidekiq", "redis", "", End.TAIL, True, True, _PREFIX_ONLY,
            "brokers.redis_sidekiq:SidekiqAdapter",
        ),
        # RQ: RPUSH rq:queue:<name> of ids, BLPOP; oldest at 0; rq:job:<id> enqueued_at (ISO UTC)
        # completions from the workers' job counters (brokers/redis_rq.py)
        FormatInfo("rq", "redis", "rq", End.HEAD, True, True, _PREFIX_ONLY, "brokers.redis_rq:RQAdapter"),
        # BullMQ: wait list, prioritized and delayed sets, active list, meta, id counter, events
        # stream, workers in CLIENT LIST (brokers/redis_bullmq.py)
        FormatInfo(
            "bullmq", "redis", "bull", End.TAIL, True, True, _PREFIX_ONLY,
            "brokers.redis_bullmq:BullMQAdapter",
        ),
        # Dramatiq: RPUSH dramatiq:<q>, LPOP; oldest at 0; dramatiq:<q>.msgs message_timestamp (ms);
        # in flight from the live workers' ack sets (brokers/redis_dramatiq.py)
        FormatInfo(
            "dramatiq", "redis", "dramatiq", End.HEAD, False, True, _PREFIX_ONLY,
            "brokers.redis_dramatiq:DramatiqAdapter",
        ),
        # Celery (kombu's Redis transport): LPUSH <q> and the priority lists <q><sep><step>
        # (kombu's defaults: \x06\x16 and steps 3, 6, 9; prioritySteps, prioritySeparator), BRPOP;
        # oldest at -1 of each; no enqueue time unless the producer adds one; in flight in the
        # unacked hash
        FormatInfo(
            "celery", "redis", "", End.TAIL, False, True,
            frozenset(
                {"keyPrefix", "timestampField", "timestampUnit", "prioritySteps", "prioritySeparator"}
            ),
            "brokers.redis_celery:CeleryAdapter",
        ),
        # Resque: RPUSH resque:queue:<name>, LPOP; oldest at 0; no enqueue time; workers and in
        # flight from the worker registry (brokers/redis_resque.py)
        FormatInfo(
            "resque", "redis", "resque", End.HEAD, True, True, _PREFIX_ONLY,
            "brokers.redis_resque:ResqueAdapter",
        ),
        # Huey (RedisHuey): LPUSH huey.redis.<name>, BRPOP; oldest at -1; pickled, no enqueue time
        FormatInfo("huey", "redis", "huey.redis", End.TAIL, False, False, _PREFIX_ONLY, _LISTS),
        # arq: sorted set <queue> (default arq:queue) scored by enqueue or defer-until ms
        FormatInfo("arq", "redis", "arq", End.HEAD, False, True, _PREFIX_ONLY, "brokers.redis_arq:ArqAdapter"),
        # A Redis Stream read by a consumer group: entry ids carry the add time
        FormatInfo(
            "stream", "redis", "", End.HEAD, True, True, frozenset({"consumerGroup"}),
            "brokers.redis_streams:StreamAdapter",
        ),
        # A plain list of JSON payloads, laid out as the user says
        FormatInfo("list", "redis", "", End.TAIL, False, False, _GENERIC, _LISTS),
        # Any RabbitMQ queue (classic, quorum, priority; Celery's too): AMQP passive declare and
        # the management API. There is no list end to pick: the broker keeps the order.
        FormatInfo(
            "amqp", "rabbitmq", "", End.HEAD, True, True, frozenset({"managementUrl"}),
            "brokers.rabbitmq:RabbitQueueAdapter",
        ),
    )
}  # fmt: skip

#: the default format per broker
DEFAULT_FORMAT = {"redis": "list", "rabbitmq": "amqp"}
