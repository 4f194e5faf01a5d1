"""How long estimated ages take to be estimates again after the scaler restarts, with and
without the arrival-history checkpoint (``serve --history-checkpoint``).

``python -m benchmarks.restart_history [--ages 10,30,60] [--rate 20]``

A private redis-server holds a plain list whose jobs carry no enqueue time the trigger reads (its
age can only be estimated from the arrival history). A producer pushes ``--rate`` jobs a second
(each with its true time, which only the benchmark reads); a consumer starts taking as many once
the oldest job is ``age`` seconds old, so the queue holds about that age from then on. The
scaler's own sampler (1 s) samples it; after ``age`` + 20 s the sampler is stopped and a new one
started 1 s later (a restart: new adapters, whose list markers count from 0), with the checkpoint
directory or without. Every second after the restart the age the scaler reports is compared with
the true one. Printed: the seconds until the age is an estimate again (a lower bound until then,
the span of the new history: far below the truth), and the error of the first estimate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

import redis.asyncio as aioredis

from benchmarks.processes import progress
from benchmarks.sidekiq_redis import private_redis
from brokers.base import Precision
from brokers.registry import open_adapter
from scaler.history_checkpoint import Checkpoints
from scaler.metrics import Metrics
from scaler.sampler import SamplerRegistry
from scaler.signals import oldest_age
from scaler.spec import parse_metadata


async def traffic(client: aioredis.Redis, key: str, rate: float, age: float) -> None:
    """Push ``rate`` jobs a second; once the oldest is ``age`` old, take as many."""
    started = time.time()
    while True:
        now = time.time()
        await client.lpush(key, json.dumps({"t": now}))
        if now - started >= age:
            await client.rpop(key)
        await asyncio.sleep(1.0 / rate)


async def true_age(client: aioredis.Redis, key: str) -> float | None:
    oldest = await client.lindex(key, -1)
    return None if oldest is None else time.time() - json.loads(oldest)["t"]


async def measure(url: str, age: float, rate: float, checkpoint: bool) -> tuple[float, float]:
    client = aioredis.Redis.from_url(url)
    key = f"qas-restart-{uuid.uuid4().hex[:8]}"
    metadata = {"url": url, "queue": key, "format": "list", "workerThroughput": "1"}
    spec = parse_metadata(metadata)
    producer = asyncio.create_task(traffic(client, key, rate, age))
    with tempfile.TemporaryDirectory(prefix="qas-checkpoint-") as folder:
        checkpoints = Checkpoints(Path(folder), name="a") if checkpoint else None
        before = SamplerRegistry(open_adapter, Metrics(), checkpoints=checkpoints)
        deadline = time.monotonic() + age + 20.0
        while time.monotonic() < deadline:
            before.get(spec)
            await asyncio.sleep(1.0)
        await before.aclose()
        await asyncio.sleep(1.0)
        after = SamplerRegistry(
            open_adapter,
            Metrics(),
            checkpoints=Checkpoints(Path(folder), name="b") if checkpoint else None,
        )
        restarted = time.monotonic()
        recovered, error = float("nan"), float("nan")
        try:
            while time.monotonic() - restarted < age + 30.0:
                sampler = after.get(spec)
                history = await sampler.history(first_timeout=2.0)
                figure = oldest_age(history[-1], sampler.arrivals)
                truth = await true_age(client, key)
                if figure.precision is Precision.ESTIMATE and figure.value is not None:
                    recovered = time.monotonic() - restarted
                    error = figure.value - (truth or 0.0)
                    break
                await asyncio.sleep(1.0)
        finally:
            await after.aclose()
    producer.cancel()
    await client.delete(key)
    await client.aclose()
    return recovered, error


async def main_async(ages: list[float], rate: float) -> None:
    rows = []
    async with private_redis() as url:
        for age in ages:
            for checkpoint in (False, True):
                progress(f"queue age {age:g}s, checkpoint {checkpoint}")
                recovered, error = await measure(url, age, rate, checkpoint)
                rows.append((age, checkpoint, recovered, error))
                progress(f"  estimate again after {recovered:.1f}s, error {error:+.2f}s")
    print("| queue's age at the restart | checkpoint | estimate again after | its error |")
    print("|---|---|---|---|")
    for age, checkpoint, recovered, error in rows:
        print(
            f"| {age:g} s | {'yes' if checkpoint else 'no'} | {recovered:.1f} s | {error:+.2f} s |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ages", default="10,30,60", help="the queue's age at the restart, s")
    parser.add_argument("--rate", type=float, default=20.0, help="jobs per second in and out")
    args = parser.parse_args()
    asyncio.run(main_async([float(a) for a in args.ages.split(",")], args.rate))


if __name__ == "__main__":
    main()
