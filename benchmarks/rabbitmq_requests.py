"""RabbitMQ: what one sample costs, and how close the signals come to the truth.

1. Management requests and AMQP round trips per sample, for 1 queue and for 500 queues in one
   vhost, each sampled every second on its own schedule as the server does (counted by the
   shared connections), and how long a sample takes.
2. A producer (steady pace) and a slower consumer (prefetch 1, acks each job) on a real queue
   for ``--seconds``: each publish and each delivery is recorded, so the oldest waiting job's
   age and the arrival and completion rates are known exactly, and compared every sample with
   what the scaler reports. Run for a quorum queue (age from the arrival history), a classic
   queue whose messages carry the AMQP timestamp, and the same without a consumer (age from
   head_message_timestamp).

    .venv/bin/python -m benchmarks.rabbitmq_requests [--url amqp://guest:guest@127.0.0.1/%2F]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import pika

from brokers.rabbitmq import RabbitQueueAdapter
from brokers.registry import open_adapter
from scaler.evaluation import Evaluator
from scaler.metric_rows import PREFIX
from scaler.metrics import Metrics
from scaler.sampler import SamplerRegistry
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec

WINDOW = 30.0


def spec_for(url: str, queue: str) -> TriggerSpec:
    metadata = {"url": url, "queue": queue, "sampleInterval": "1s", "rateWindow": f"{WINDOW:g}s"}
    return parse_metadata(metadata)


def declare(url: str, names: Sequence[str], **arguments: object) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as connection:
        channel = connection.channel()
        for name in names:
            channel.queue_declare(name, durable=bool(arguments), arguments=arguments or None)


def delete(url: str, names: Sequence[str]) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as connection:
        channel = connection.channel()
        for name in names:
            channel.queue_delete(name)


async def cost(url: str, count: int, seconds: float) -> None:
    """``count`` samplers on one vhost, each on its own schedule as in the server."""
    names = [f"qas-bench-{uuid.uuid4().hex[:8]}-{i}" for i in range(count)]
    declare(url, names)
    metrics = Metrics()
    samplers = SamplerRegistry(open_adapter, metrics)
    try:
        started = [samplers.get(spec_for(url, name)) for name in names]
        for sampler in started:
            await sampler.history(first_timeout=10.0)
        adapter = started[0]._adapter
        assert isinstance(adapter, RabbitQueueAdapter)
        requests, trips = adapter.stats.requests, adapter.connection.round_trips
        samples = _samples(metrics)
        await asyncio.sleep(seconds)
        requests = adapter.stats.requests - requests
        trips = adapter.connection.round_trips - trips
        samples = _samples(metrics) - samples
        durations = next(iter(metrics.sample_duration.collect())).samples
        total = next(s.value for s in durations if s.name.endswith("_sum"))
        taken = next(s.value for s in durations if s.name.endswith("_count"))
    finally:
        await samplers.aclose()
        delete(url, names)
    print(
        f"{count:>4} queues, 1 s interval, {seconds:g} s: {samples / seconds:.0f} samples/s, "
        f"{requests / seconds:.2f} management requests/s ({requests / samples:.4f} per sample), "
        f"{trips / samples:.2f} AMQP round trips per sample; "
        f"a sample takes {total / taken * 1000:.0f} ms on average"
    )


def _samples(metrics: Metrics) -> float:
    return sum(
        sample.value
        for family in metrics.registry.collect()
        if family.name == f"{PREFIX}_samples"
        for sample in family.samples
        if sample.name.endswith("_total")
    )


@dataclass
class Ledger:
    """What the producer and the consumer did, by the clock."""

    published: list[float] = field(default_factory=list)
    delivered: list[float] = field(default_factory=list)
    acked: list[float] = field(default_factory=list)

    def oldest_age(self, now: float) -> float:
        waiting = self.published[len([d for d in self.delivered if d <= now]) :]
        waiting = [p for p in waiting if p <= now]
        return now - waiting[0] if waiting else 0.0

    @staticmethod
    def rate(times: list[float], now: float) -> float:
        return sum(1 for t in times if now - WINDOW < t <= now) / WINDOW


def produce(
    url: str, queue: str, pace: float, stop: threading.Event, ledger: Ledger, ts: bool
) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as connection:
        channel = connection.channel()
        while not stop.is_set():
            now = time.time()
            properties = pika.BasicProperties(timestamp=int(now) if ts else None)
            channel.basic_publish("", queue, b"{}", properties)
            ledger.published.append(now)
            connection.sleep(1.0 / pace)


def consume(url: str, queue: str, pace: float, stop: threading.Event, ledger: Ledger) -> None:
    with pika.BlockingConnection(pika.URLParameters(url)) as connection:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=1)
        for method, _, _ in channel.consume(queue, inactivity_timeout=0.2):
            if stop.is_set():
                break
            if method is None:
                continue
            ledger.delivered.append(time.time())
            connection.sleep(1.0 / pace)  # the job
            channel.basic_ack(method.delivery_tag)
            ledger.acked.append(time.time())
        channel.cancel()


async def accuracy(url: str, kind: str, seconds: float) -> None:
    queue = f"qas-bench-{kind}-{uuid.uuid4().hex[:8]}"
    quorum = kind == "quorum"
    consumers = 0 if kind == "classic-idle" else 1
    declare(url, [queue], **({"x-queue-type": "quorum"} if quorum else {}))
    ledger, stop = Ledger(), threading.Event()
    spec = spec_for(url, queue)
    samplers = SamplerRegistry(open_adapter, Metrics())
    age_errors: list[float] = []
    arrival_errors: list[float] = []
    completion_errors: list[float] = []
    sources: set[str] = set()
    evaluator = Evaluator()
    try:
        sampler = samplers.get(spec)
        await sampler.history(first_timeout=5.0)
        threads = [
            threading.Thread(target=produce, args=(url, queue, 20.0, stop, ledger, not quorum))
        ] + [
            threading.Thread(target=consume, args=(url, queue, 15.0, stop, ledger))
            for _ in range(consumers)
        ]
        for thread in threads:
            thread.start()
        started = time.time()
        while time.time() - started < seconds:
            await sampler.wait_for_sample(2.0)
            history = await sampler.history(first_timeout=1.0)
            signals = evaluator.evaluate(history, spec, sampler.arrivals).signals
            now = history[-1].observed_at
            if now - started < WINDOW:  # let the rate window and the history fill
                continue
            if signals.oldest_age.value is not None:
                age_errors.append(signals.oldest_age.value - ledger.oldest_age(now))
                sources.add(f"{signals.oldest_age.source} ({signals.oldest_age.precision})")
            counted = history[-1].counted_at
            for figure, times, errors in (
                (signals.arrival_rate, ledger.published, arrival_errors),
                (signals.completion_rate, ledger.acked, completion_errors),
            ):
                truth = Ledger.rate(times, counted)
                if figure.value is not None and truth:
                    errors.append(figure.value / truth - 1)
    finally:
        stop.set()
        await samplers.aclose()
        for thread in threads:
            await asyncio.to_thread(thread.join)
        delete(url, [queue])
    absolute = sorted(abs(e) for e in age_errors)
    print(
        f"{kind:>16}: age from {', '.join(sorted(sources))}: error median {statistics.median(absolute):.2f} s, "
        f"p90 {absolute[int(0.9 * len(absolute))]:.2f} s, max {absolute[-1]:.2f} s "
        f"(mean signed {statistics.mean(age_errors):+.2f} s, true age up to {ledger.oldest_age(time.time()):.0f} s); "
        f"arrival rate error {statistics.mean(map(abs, arrival_errors)) * 100:.1f}% mean"
        + (
            f", completion rate {statistics.mean(map(abs, completion_errors)) * 100:.1f}% mean"
            if completion_errors
            else ", no consumer"
        )
        + f" ({len(age_errors)} samples)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    parser.add_argument("--seconds", type=float, default=90.0, help="accuracy run length")
    parser.add_argument("--cost-seconds", type=float, default=10.0)
    args = parser.parse_args()
    for count in (1, 500):
        await cost(args.url, count, args.cost_seconds)
    for kind in ("quorum", "classic-timestamp", "classic-idle"):
        await accuracy(args.url, kind, args.seconds)


if __name__ == "__main__":
    asyncio.run(main())
