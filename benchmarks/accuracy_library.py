"""The accuracy benchmark's ground truth (when each job was enqueued and taken) and what one
job library provides it: enqueue one job, take one, or run its own worker."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis


@dataclass
class Truth:
    """What the producers and consumers did, with their own clocks (time.time())."""

    #: (job id, enqueue time) in enqueue order
    enqueued: list[tuple[str, float]] = field(default_factory=list)
    #: job id -> the time a consumer took it
    taken: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record_enqueue(self, job_id: str, before: float) -> None:
        now = time.time()
        with self.lock:
            self.enqueued.append((job_id, (before + now) / 2))

    def record_take(self, job_id: str) -> None:
        with self.lock:
            self.taken[job_id] = time.time()


class Library:
    """One job library: how to enqueue one job, and how to take one (None: a worker does it)."""

    name: str
    metadata: dict[str, str]

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        self.redis_url = redis_url
        self.queue = queue
        self.truth = truth
        # redis-py's sync replies are typed as unions of every reply shape; this is test traffic
        self.client: Any = redis.Redis.from_url(redis_url)

    def produce(self) -> None:
        raise NotImplementedError

    def take(self) -> bool:
        """Take one job if one waits; True if it did."""
        raise NotImplementedError

    def start_worker(self, rate: float) -> None:
        """For libraries whose consumer is their own worker: start it, at about ``rate`` jobs/s."""
        raise NotImplementedError

    uses_worker = False

    def stop(self) -> None:
        """Stop workers and delete every key of the queue."""
        for key in self.client.scan_iter(match=f"*{self.queue}*"):
            self.client.delete(key)
        self.client.close()
