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
    adapter: str = "brokers.redis_queues:RedisQueueAdapter"


_PREFIX_ONLY = frozenset({"keyPrefix"})
_GENERIC = frozenset({"keyPrefix", "timestampField", "timestampUnit", "oldestEnd"})

FORMATS: dict[str, FormatInfo] = {
    info.name: info
    for info in (
        # Sidekiq: LPUSH queue:<name>, BRPOP; oldest at -1; JSON enqueued_at (7.x float s, 8.x int ms)
        FormatInfo("sidekiq", "redis", "", End.TAIL, False, False, _PREFIX_ONLY),
        # RQ: RPUSH rq:queue:<name> of ids, BLPOP; oldest at 0; rq:job:<id> enqueued_at (ISO UTC)
        FormatInfo("rq", "redis", "rq", End.HEAD, True, True, _PREFIX_ONLY),
        # BullMQ: LPUSH bull:<q>:wait, RPOPLPUSH to :active; oldest at -1; bull:<q>:<id> timestamp (ms)
        FormatInfo("bullmq", "redis", "bull", End.TAIL, False, True, _PREFIX_ONLY),
        # Dramatiq: RPUSH dramatiq:<q>, LPOP; oldest at 0; dramatiq:<q>.msgs message_timestamp (ms)
        FormatInfo("dramatiq", "redis", "dramatiq", End.HEAD, False, False, _PREFIX_ONLY),
        # A plain list of JSON payloads, laid out as the user says
        FormatInfo("list", "redis", "", End.TAIL, False, False, _GENERIC),
    )
}

#: formats documented in DESIGN that later issues add; named in errors so users know
PLANNED_FORMATS = ("celery", "resque", "huey", "arq", "stream")

#: the default format per broker
DEFAULT_FORMAT = {"redis": "list"}
