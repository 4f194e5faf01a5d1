"""Test-side RabbitMQ helpers: a producer that records what it sent, queues made and removed
under unique names, and sampling until the signals say what a test waits for."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pika

from brokers.base import QueueSnapshot
from brokers.registry import open_adapter
from scaler.metrics import Metrics
from scaler.profiles import Profile
from scaler.sampler import Sampler, SamplerRegistry
from scaler.signals import QueueSignals, compute_signals
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec


def unique(kind: str) -> str:
    return f"qas-test-{kind}-{uuid.uuid4().hex[:8]}"


@dataclass
class Rabbit:
    """A blocking pika connection for setting queues up; it records each publish time."""

    url: str
    published: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.connection = pika.BlockingConnection(pika.URLParameters(self.url))
        self.channel = self.connection.channel()
        self.queues: list[str] = []

    def declare(
        self, name: str, *, quorum: bool = False, arguments: dict[str, Any] | None = None
    ) -> str:
        arguments = {**(arguments or {}), **({"x-queue-type": "quorum"} if quorum else {})}
        self.channel.queue_declare(name, durable=quorum, arguments=arguments or None)
        self.queues.append(name)
        return name

    def publish(
        self, name: str, count: int = 1, *, timestamp: int | None = None, priority: int = 0
    ) -> None:
        properties = pika.BasicProperties(timestamp=timestamp, priority=priority or None)
        for _ in range(count):
            self.channel.basic_publish("", name, b"{}", properties)
            self.published.setdefault(name, []).append(time.time())

    def close(self) -> None:
        """Delete every queue this helper declared, then disconnect."""
        if not self.channel.is_open:
            self.channel = self.connection.channel()
        for name in self.queues:
            self.channel.queue_delete(name)
        self.connection.close()


@contextmanager
def rabbit(url: str) -> Iterator[Rabbit]:
    helper = Rabbit(url)
    try:
        yield helper
    finally:
        helper.close()


def spec_for(url: str, queue: str, **extra: str) -> TriggerSpec:
    metadata = {"url": url, "queue": queue, "sampleInterval": "1s", "rateWindow": "10s", **extra}
    return parse_metadata(metadata)


def spec_for_profile(url: str, queue: str, management_url: str | None = None) -> TriggerSpec:
    """A trigger naming a connection profile of ``url``: TLS files come only from a profile."""
    metadata = {"connection": "test", "queue": queue, "sampleInterval": "1s", "rateWindow": "10s"}
    return parse_metadata(metadata, {"test": Profile("test", url, management_url)})


@dataclass
class Watch:
    """One queue sampled as the server samples it, and the signals it computes."""

    spec: TriggerSpec
    sampler: Sampler
    metrics: Metrics

    async def latest(self) -> tuple[QueueSnapshot, QueueSignals]:
        history = await self.sampler.history(first_timeout=3.0)
        signals = compute_signals(history, self.spec.rate_window, self.sampler.arrivals)
        return history[-1], signals

    async def until(
        self, wanted: Callable[[QueueSnapshot, QueueSignals], bool], timeout: float, what: str
    ) -> tuple[QueueSnapshot, QueueSignals]:
        """The first sample for which ``wanted`` holds; fails with the last one after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            snapshot, signals = await self.latest()
            if wanted(snapshot, signals):
                return snapshot, signals
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not seen in {timeout:g}s; last: {snapshot} {signals}")
            await self.sampler.wait_for_sample(2.0)


@asynccontextmanager
async def watching(spec: TriggerSpec) -> AsyncIterator[Watch]:
    metrics = Metrics()
    samplers = SamplerRegistry(open_adapter, metrics)
    try:
        yield Watch(spec, samplers.get(spec), metrics)
    finally:
        await samplers.aclose()


async def spread(rabbit: Rabbit, queue: str, count: int, seconds: float) -> None:
    """Publish ``count`` messages evenly over ``seconds``, letting the samplers run between."""
    for _ in range(count):
        rabbit.publish(queue)
        await asyncio.sleep(seconds / count)
