"""Job libraries the accuracy benchmark drives with raw Redis commands: Sidekiq and Resque
(Ruby), plain lists and Streams (no library)."""

from __future__ import annotations

import json
import time
import uuid

from benchmarks.accuracy_library import Library, Truth


class Sidekiq(Library):
    """Raw Sidekiq 8 payloads: LPUSH queue:<q>, the consumer BRPOPs (here RPOP)."""

    name = "sidekiq"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        self.metadata = {"format": "sidekiq"}

    def produce(self) -> None:
        jid, before = uuid.uuid4().hex[:24], time.time()
        job = {
            "class": "W",
            "args": [],
            "jid": jid,
            "queue": self.queue,
            "enqueued_at": int(before * 1000),
        }
        self.client.lpush(f"queue:{self.queue}", json.dumps(job))
        self.truth.record_enqueue(jid, before)

    def take(self) -> bool:
        raw = self.client.rpop(f"queue:{self.queue}")
        if raw is None:
            return False
        self.truth.record_take(json.loads(raw)["jid"])
        return True


class Resque(Library):
    """Raw Resque payloads (no timestamp): RPUSH resque:queue:<q>, LPOP."""

    name = "resque"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        self.metadata = {"format": "resque"}

    def produce(self) -> None:
        jid, before = uuid.uuid4().hex, time.time()
        self.client.rpush(f"resque:queue:{self.queue}", json.dumps({"class": "W", "args": [jid]}))
        self.truth.record_enqueue(jid, before)

    def take(self) -> bool:
        raw = self.client.lpop(f"resque:queue:{self.queue}")
        if raw is None:
            return False
        self.truth.record_take(json.loads(raw)["args"][0])
        return True


class PlainList(Library):
    """A plain list without timestamps: the age comes from the arrival history."""

    name = "list"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        self.metadata = {"format": "list"}

    def produce(self) -> None:
        jid, before = uuid.uuid4().hex, time.time()
        self.client.lpush(self.queue, json.dumps({"id": jid}))
        self.truth.record_enqueue(jid, before)

    def take(self) -> bool:
        raw = self.client.rpop(self.queue)
        if raw is None:
            return False
        self.truth.record_take(json.loads(raw)["id"])
        return True


class Stream(Library):
    """XADD producers; a consumer group member reads with XREADGROUP and XACKs."""

    name = "stream"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        self.metadata = {"format": "stream", "consumerGroup": "workers"}
        self.client.xgroup_create(queue, "workers", id="$", mkstream=True)

    def produce(self) -> None:
        before = time.time()
        entry_id = self.client.xadd(self.queue, {"job": "noop"})
        self.truth.record_enqueue(entry_id.decode(), before)

    def take(self) -> bool:
        reply = self.client.xreadgroup("workers", "c1", {self.queue: ">"}, count=1)
        if not reply:
            return False
        entry_id = reply[0][1][0][0]
        self.truth.record_take(entry_id.decode())
        self.client.xack(self.queue, "workers", entry_id)
        return True
