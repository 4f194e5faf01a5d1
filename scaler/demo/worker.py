"""A demo job worker: ``python -m scaler.demo.worker REDIS_URL QUEUE``.

Takes Sidekiq jobs from the list ``queue:QUEUE`` (BRPOP: Sidekiq pushes on the left, the oldest
job is at the tail), one at a time, and runs each for ``args[0]`` seconds. For each job it pushes
how long the job waited (now minus its ``enqueued_at``) onto ``demo:QUEUE:waits``: the demo counts
completions and the longest wait from that list. On SIGTERM it takes no more jobs, finishes the
running one and exits, as a worker of a Deployment drains; it also exits when the process that
started it is gone.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from types import FrameType

import redis


def queue_key(queue: str) -> str:
    return f"queue:{queue}"


def waits_key(queue: str) -> str:
    return f"demo:{queue}:waits"


def main(redis_url: str, queue: str) -> None:
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    parent = os.getppid()
    client = redis.Redis.from_url(redis_url)
    while not stopping.is_set() and os.getppid() == parent:
        popped = client.brpop([queue_key(queue)], timeout=0.2)
        if popped is None:
            continue
        job = json.loads(popped[1])
        waited = time.time() - float(job["enqueued_at"])
        time.sleep(float(job["args"][0]))
        client.rpush(waits_key(queue), f"{waited:.3f}")
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
