"""The Dramatiq actor of the accuracy benchmark (``benchmarks/accuracy_workers.py``), run by real
``dramatiq`` worker processes: ``dramatiq benchmarks.dramatiq_jobs`` with ``QAS_ACC_URL`` (the
Redis) and ``QAS_ACC_QUEUE`` (the queue) in the environment. ``timed_job(job, ms)`` runs ``ms``
milliseconds and records when it started and finished, and in which process, in the hashes
``<queue>:started`` and ``<queue>:finished`` (job id -> "pid epoch-seconds"), as the Sidekiq and
RQ jobs of the benchmark do."""

from __future__ import annotations

import os
import time

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

URL = os.environ.get("QAS_ACC_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("QAS_ACC_QUEUE", "qas-acc-dramatiq")

broker = RedisBroker(url=URL)  # type: ignore[no-untyped-call]
dramatiq.set_broker(broker)
_records = redis.Redis.from_url(URL)


def _record(event: str, job: str) -> None:
    _records.hset(f"{QUEUE}:{event}", job, f"{os.getpid()} {time.time()}")


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def timed_job(job: str, ms: int) -> None:
    _record("started", job)
    time.sleep(ms / 1000)
    _record("finished", job)
