"""A job worker process for the real scaling loop (tests/integration/test_real_loop.py).

``python -m tests.integration.loop_worker REDIS_URL QUEUE PG_DSN CONCURRENCY``: opens one
PostgreSQL connection per job slot (the pool a worker holds), takes JSON jobs from the Redis
list ``QUEUE`` (BRPOP: oldest at the tail) and runs each as ``SELECT pg_sleep(seconds)`` on a
connection of its pool. It records, in Redis, how often each job ran and how long it waited, and
every connection PostgreSQL refused. On SIGTERM it takes no more jobs, finishes the running ones
and exits: the drain.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from types import FrameType

import psycopg
import redis


def main(redis_url: str, queue: str, dsn: str, concurrency: int) -> None:
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    client = redis.Redis.from_url(redis_url)
    threads = [
        threading.Thread(target=_slot, args=(client, queue, dsn, stopping))
        for _ in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _connect(
    client: redis.Redis, queue: str, dsn: str, stopping: threading.Event
) -> psycopg.Connection[tuple[object, ...]] | None:
    while not stopping.is_set():
        try:
            return psycopg.connect(dsn, autocommit=True)
        except psycopg.OperationalError as error:
            client.rpush(f"{queue}:refused", str(error))
            time.sleep(0.2)
    return None


def _slot(client: redis.Redis, queue: str, dsn: str, stopping: threading.Event) -> None:
    connection = _connect(client, queue, dsn, stopping)
    if connection is None:
        return
    with connection:
        while not stopping.is_set():
            popped = client.brpop([queue], timeout=0.2)
            if popped is None:
                continue
            job = json.loads(popped[1])
            client.hset(f"{queue}:waits", str(job["id"]), repr(time.time() - job["enqueued_at"]))
            connection.execute("SELECT pg_sleep(%s)", (job["seconds"],))
            client.hincrby(f"{queue}:runs", str(job["id"]), 1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
