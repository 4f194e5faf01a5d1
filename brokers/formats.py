"""The built-in formats, without importing any broker client.

The metadata parser validates against this table (through :mod:`brokers.registry`, which adds
the plugins' formats); the adapters read the same table, so the two cannot disagree about which
end of a list is oldest or what a format can observe.
"""

from __future__ import annotations

from brokers.base import End
from brokers.format_api import FormatInfo, SnapshotModelFactory
from brokers.rabbitmq_options import RABBITMQ, amqp_options, queue_model
from brokers.redis_options import (
    REDIS,
    bullmq_model,
    celery_options,
    list_model,
    list_options,
    resque_model,
    rq_model,
    sidekiq_model,
    stream_model,
    stream_options,
)

__all__ = ["DEFAULT_FORMAT", "FORMATS", "NOT_APPLYING_HINTS", "End", "FormatInfo"]

_PREFIX_ONLY = ("keyPrefix",)
_GENERIC = ("keyPrefix", "timestampField", "timestampUnit", "oldestEnd")
_CELERY = ("keyPrefix", "timestampField", "timestampUnit", "prioritySteps", "prioritySeparator")
_LISTS = "brokers.redis_queues:RedisQueueAdapter"


def _list(
    name: str,
    prefix: str,
    end: End,
    consumers: bool,
    in_flight: bool,
    summary: str,
    adapter: str = _LISTS,
    model: SnapshotModelFactory = list_model,
    lister: str = "",
) -> FormatInfo:
    return FormatInfo(
        name, REDIS, prefix, end, consumers, in_flight, _PREFIX_ONLY, adapter,
        list_options, model, summary, lister,
    )  # fmt: skip


FORMATS: dict[str, FormatInfo] = {
    info.name: info
    for info in (
        # Sidekiq: LPUSH queue:<name>, BRPOP; oldest at -1; JSON enqueued_at (7.x float s, 8.x int
        # ms); processes, threads and in flight from the heartbeats (brokers/redis_sidekiq.py)
        _list(
            "sidekiq", "", End.TAIL, True, True,
            "Sidekiq (Ruby): queue:<name>, processes, threads and in flight from the heartbeats",
            "brokers.redis_sidekiq:SidekiqAdapter", sidekiq_model,
            lister="brokers.redis_sidekiq:list_queues",
        ),
        # RQ: RPUSH rq:queue:<name> of ids, BLPOP; oldest at 0; rq:job:<id> enqueued_at (ISO UTC);
        # arrivals and completions from the workers' job counters (brokers/redis_rq.py)
        _list(
            "rq", "rq", End.HEAD, True, True,
            "RQ (Python): rq:queue:<name>, workers, in flight, arrivals and completions",
            "brokers.redis_rq:RQAdapter", rq_model,
        ),
        # BullMQ: wait list, prioritized and delayed sets, active list, meta, id counter, events
        # stream, workers in CLIENT LIST (brokers/redis_bullmq.py)
        _list(
            "bullmq", "bull", End.TAIL, True, True,
            "BullMQ (Node.js): bull:<name>:wait/prioritized/delayed, workers, in flight, counts",
            "brokers.redis_bullmq:BullMQAdapter", bullmq_model,
        ),
        # Dramatiq: RPUSH dramatiq:<q>, LPOP; oldest at 0; dramatiq:<q>.msgs message_timestamp (ms);
        # in flight and worker processes from the ack sets and heartbeats (brokers/redis_dramatiq.py)
        _list(
            "dramatiq", "dramatiq", End.HEAD, True, True,
            "Dramatiq (Python): dramatiq:<name>, in flight and workers from the ack sets",
            "brokers.redis_dramatiq:DramatiqAdapter",
        ),
        # Celery (kombu's Redis transport): LPUSH <q> and the priority lists <q><sep><step>
        # (kombu's defaults: \x06\x16 and steps 3, 6, 9; prioritySteps, prioritySeparator), BRPOP;
        # oldest at -1 of each; no enqueue time unless the producer adds one; in flight in the
        # unacked hash
        FormatInfo(
            "celery", REDIS, "", End.TAIL, False, True, _CELERY, "brokers.redis_celery:CeleryAdapter",
            celery_options, list_model, "Celery on Redis (kombu): <name> and its priority lists, in flight",
        ),
        # Resque: RPUSH resque:queue:<name>, LPOP; oldest at 0; no enqueue time; workers and in
        # flight from the worker registry (brokers/redis_resque.py)
        _list(
            "resque", "resque", End.HEAD, True, True,
            "Resque (Ruby): resque:queue:<name>, workers, in flight and counts from the registry",
            "brokers.redis_resque:ResqueAdapter", resque_model,
        ),
        # Huey (RedisHuey): LPUSH huey.redis.<name>, BRPOP; oldest at -1; pickled, no enqueue time
        _list("huey", "huey.redis", End.TAIL, False, False, "Huey (Python): huey.redis.<name>"),
        # arq: sorted set <queue> (default arq:queue) scored by enqueue or defer-until ms
        FormatInfo(
            "arq", REDIS, "arq", End.HEAD, False, True, _PREFIX_ONLY, "brokers.redis_arq:ArqAdapter",
            list_options, None, "arq (Python): the sorted set <name>, in flight",
        ),
        # A Redis Stream read by a consumer group: entry ids carry the add time
        FormatInfo(
            "stream", REDIS, "", End.HEAD, True, True, ("consumerGroup",),
            "brokers.redis_streams:StreamAdapter", stream_options, stream_model,
            "a Redis Stream read by a consumer group (consumerGroup)",
        ),
        # A plain list of JSON payloads, laid out as the user says
        FormatInfo(
            "list", REDIS, "", End.TAIL, False, False, _GENERIC, _LISTS, list_options, list_model,
            "any Redis list (keyPrefix, oldestEnd, timestampField, timestampUnit)",
        ),
        # Any RabbitMQ queue (classic, quorum, priority; Celery's too): AMQP passive declare and
        # the management API. There is no list end to pick: the broker keeps the order.
        FormatInfo(
            "amqp", RABBITMQ, "", End.HEAD, True, True, ("managementUrl",),
            "brokers.rabbitmq:RabbitQueueAdapter", amqp_options, queue_model,
            "any RabbitMQ queue: classic, quorum, priority (managementUrl)",
            "brokers.rabbitmq:list_queues",
        ),
    )
}  # fmt: skip

#: the default format per broker
DEFAULT_FORMAT = {"redis": REDIS.default_format, "rabbitmq": RABBITMQ.default_format}
#: the formats a "does not apply to format X" message points to for a layout key, in order
NOT_APPLYING_HINTS = ("list", "celery")
