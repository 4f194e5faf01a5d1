"""Producers and consumers for the accuracy benchmark, one per job library, built with the real
library wherever it is a Python package (RQ, Dramatiq, Celery/kombu, Huey, BullMQ, arq) and with
raw Redis commands where it is not (Sidekiq, Resque: Ruby) or where there is no library (plain
lists, Streams).

Each producer records when it enqueued each job; each consumer records when it took each job.
That is the ground truth (``accuracy_library.py``) the benchmark compares the scaler's signals
with. The raw-Redis ones are in ``accuracy_raw_redis.py``; :data:`LIBRARIES` names them all.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks.accuracy_library import Library, Truth
from benchmarks.accuracy_raw_redis import PlainList, Resque, Sidekiq, Stream


def _noop() -> None:
    """The job every library runs."""


class RQ(Library):
    name = "rq"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        import rq

        self.metadata = {"format": "rq"}
        self.rq_queue = rq.Queue(queue, connection=self.client)

    def produce(self) -> None:
        before = time.time()
        job = self.rq_queue.enqueue(_noop)
        self.truth.record_enqueue(job.id, before)

    def take(self) -> bool:
        job_id = self.client.lpop(self.rq_queue.key)  # as rq's Queue.pop_job_id, empty-safe
        if job_id is None:
            return False
        self.truth.record_take(job_id.decode())
        return True


class Dramatiq(Library):
    name = "dramatiq"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        import dramatiq
        from dramatiq.brokers.redis import RedisBroker

        self.metadata = {"format": "dramatiq"}
        self.broker: Any = RedisBroker(url=redis_url)  # type: ignore[no-untyped-call]
        self.broker.declare_queue(queue)
        self.message_class: Any = dramatiq.Message
        self.consumer = self.broker.consume(queue, prefetch=1, timeout=50)

    def produce(self) -> None:
        message = self.message_class(
            queue_name=self.queue, actor_name="noop", args=(), kwargs={}, options={}
        )
        before = time.time()
        self.broker.enqueue(message)
        self.truth.record_enqueue(message.message_id, before)

    def take(self) -> bool:
        message = next(self.consumer)
        if message is None:
            return False
        self.truth.record_take(message.message_id)
        self.consumer.ack(message)
        return True

    def stop(self) -> None:
        self.consumer.close()
        self.broker.close()
        super().stop()


class Celery(Library):
    """Tasks sent by a real Celery app over kombu's Redis transport; a kombu consumer takes them."""

    name = "celery"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        from celery import Celery as CeleryApp

        self.metadata = {"format": "celery"}
        self.app = CeleryApp(broker=redis_url)
        self.connection = self.app.connection()
        self.simple_queue = self.connection.SimpleQueue(queue)

    def produce(self) -> None:
        before = time.time()
        result = self.app.send_task("noop", queue=self.queue)
        self.truth.record_enqueue(result.id, before)

    def take(self) -> bool:
        try:
            message = self.simple_queue.get(block=False)
        except self.simple_queue.Empty:
            return False
        self.truth.record_take(message.headers["id"])
        message.ack()
        return True

    def stop(self) -> None:
        self.simple_queue.close()
        self.connection.release()
        super().stop()


class Huey(Library):
    name = "huey"

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        from huey import RedisHuey

        self.metadata = {"format": "huey"}
        self.huey = RedisHuey(queue, url=redis_url, results=False)
        self.task = self.huey.task(name="noop")(_noop)

    def produce(self) -> None:
        task = (
            self.task.s()
        )  # the Task a call would enqueue (with results off, a call returns None)
        before = time.time()
        self.huey.enqueue(task)
        self.truth.record_enqueue(task.id, before)

    def take(self) -> bool:
        task = self.huey.dequeue()
        if task is None:
            return False
        self.truth.record_take(task.id)
        return True

    def stop(self) -> None:
        self.huey.storage.pool.disconnect()
        super().stop()


class _LoopThread:
    """An asyncio loop on its own thread, for the libraries whose clients are async."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class BullMQ(Library):
    """Jobs added by the Python bullmq Queue; a real bullmq Worker (concurrency 1) runs them."""

    name = "bullmq"
    uses_worker = True

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        from bullmq import Queue

        self.metadata = {"format": "bullmq"}
        self.loop = _LoopThread()
        self.bull_queue = Queue(queue, {"connection": redis_url})
        self.worker: Any = None

    def produce(self) -> None:
        before = time.time()
        job = self.loop.run(self.bull_queue.add("noop", {}))
        self.truth.record_enqueue(str(job.id), before)

    def start_worker(self, rate: float) -> None:
        from bullmq import Worker

        async def process(job: Any, token: str) -> None:
            self.truth.record_take(str(job.id))
            await asyncio.sleep(1 / rate)

        async def start() -> Any:
            return Worker(self.queue, process, {"connection": self.redis_url, "concurrency": 1})

        self.worker = self.loop.run(start())

    def stop(self) -> None:
        if self.worker is not None:
            self.loop.run(self.worker.close(force=True))
        self.loop.run(self.bull_queue.close())
        self.loop.close()
        super().stop()


class Arq(Library):
    """Jobs enqueued by arq's pool; a real arq Worker (max_jobs=1) runs them."""

    name = "arq"
    uses_worker = True

    def __init__(self, redis_url: str, queue: str, truth: Truth) -> None:
        super().__init__(redis_url, queue, truth)
        from arq.connections import RedisSettings, create_pool

        self.metadata = {"format": "arq"}
        self.loop = _LoopThread()
        self.pool = self.loop.run(create_pool(RedisSettings.from_dsn(redis_url)))
        self.worker_task: Any = None
        self.worker: Any = None

    def produce(self) -> None:
        before = time.time()
        job = self.loop.run(self.pool.enqueue_job("noop", _queue_name=self.queue))
        self.truth.record_enqueue(job.job_id, before)

    def start_worker(self, rate: float) -> None:
        from arq.worker import Worker, func

        async def noop(ctx: dict[str, Any]) -> None:
            self.truth.record_take(ctx["job_id"])
            await asyncio.sleep(1 / rate)

        async def start() -> Any:
            worker = Worker(
                functions=[func(noop, name="noop")],
                redis_pool=self.pool,
                queue_name=self.queue,
                max_jobs=1,
                poll_delay=0.02,
                handle_signals=False,
                keep_result=0,
            )
            return worker, asyncio.ensure_future(worker.async_run())

        self.worker, self.worker_task = self.loop.run(start())

    def stop(self) -> None:
        if self.worker is not None:

            async def halt() -> None:
                self.worker_task.cancel()
                await asyncio.gather(self.worker_task, return_exceptions=True)
                await self.worker.close()

            self.loop.run(halt())
        else:
            self.loop.run(self.pool.aclose())
        self.loop.close()
        super().stop()


LIBRARIES: dict[str, Callable[[str, str, Truth], Library]] = {
    cls.name: cls
    for cls in (Sidekiq, RQ, Dramatiq, BullMQ, Arq, Celery, Resque, Huey, Stream, PlainList)
}
