"""What sampling many queues on one Redis costs it, and how fresh the samples are.

``python -m benchmarks.sampling_cost [--queues 1000,10000] [--seconds 60] [--modes ...]``

For each queue count, a private redis-server holds that many Sidekiq queues: a share of them
*hot* (a backlog whose oldest job is 40 s old, against a 60 s ``targetAge``: near the target),
a share *busy* (a producer pushes a job onto each every few seconds and a consumer takes it a
second later: kept up with, so steady by the schedule's rules, unless a sample catches the job),
the rest *idle* (empty). The scaler's own samplers (``SamplerRegistry``, the real
Sidekiq adapter, one server's connections) sample them, in each mode:

- ``fixed-unbatched``: every queue at its ``sampleInterval`` (1 s), each round trip on its own
  (the sampling before issue 16);
- ``fixed``: the same, the round trips of one tick pipelined (``brokers/redis_batch.py``);
- ``adaptive``: pipelined, and each queue's interval adapting up to ``--slow-sample-interval``;
- ``budget``: adaptive, with ``--broker-command-budget`` set to KEDA's built-in scaler's load.

After a warm-up (the intervals settle), it measures over ``--seconds``: samples per second,
Redis commands per second (``INFO commandstats``, which counts the commands scripts run, as the
issue's figures do) and Redis's CPU, the round trips the scaler made (its own count), the
scaler's CPU, the failed samples, and the sample age (now minus the newest sample's time, read
four times a second for every queue) per kind of queue: p50 and p99.

KEDA's built-in Redis scaler, for one ScaledObject per queue at KEDA's default polling (IsActive
every 30 s, the HPA's GetMetrics every 15 s), runs one ``EVAL`` of ``TYPE`` and ``LLEN`` per call:
3 commands x (1/30 + 1/15) = 0.3 commands per queue per second; the table shows our commands
against that. Figures from a shared machine are noisy: run it more than once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from benchmarks.processes import progress
from benchmarks.sidekiq_redis import private_redis, read_redis, sidekiq_job
from brokers.connections import Connections
from brokers.registry import open_adapter
from scaler.limits import MAX_QUEUES_PER_BROKER, Limits
from scaler.metrics import Metrics
from scaler.sample_schedule import SLOW_INTERVAL
from scaler.sampler import Sampler, SamplerRegistry
from scaler.spec import parse_metadata

#: KEDA's built-in Redis scaler per ScaledObject at its default polling, commands per second
KEDA_BUILT_IN_PER_QUEUE = 3 * (1 / 30 + 1 / 15)
MODES = ("fixed-unbatched", "fixed", "adaptive", "budget")
KINDS = ("hot", "busy", "idle")


@dataclass(frozen=True)
class Result:
    queues: int
    mode: str
    seconds: float
    samples: float
    commands: float
    round_trips: float
    redis_cpu: float
    scaler_cpu: float
    errors: int
    error_kinds: dict[str, int]
    ages: dict[str, tuple[float, float]]
    rss_mb: float


def kind_of(index: int, hot: float, busy: float, count: int) -> str:
    if index < hot * count:
        return "hot"
    if index < (hot + busy) * count:
        return "busy"
    return "idle"


async def lay_out(client: aioredis.Redis, prefix: str, kinds: Sequence[str]) -> list[str]:
    names = [f"{prefix}-q{i:05d}" for i in range(len(kinds))]
    now = time.time()
    async with client.pipeline(transaction=False) as pipe:
        for name, kind in zip(names, kinds, strict=True):
            if kind == "hot":
                stamps = [now - 40.0 + j for j in range(20)]
                pipe.lpush(f"queue:{name}", *(sidekiq_job(name, int(t * 1000)) for t in stamps))
        await pipe.execute()
    return names


async def churn(client: aioredis.Redis, names: Sequence[str], stop: asyncio.Event) -> None:
    """Every few seconds a job on each busy queue, taken about a second later."""
    rng = random.Random(7)
    while not stop.is_set():
        picked = rng.sample(list(names), k=max(1, len(names) // 4)) if names else []
        async with client.pipeline(transaction=False) as pipe:
            for name in picked:
                pipe.lpush(f"queue:{name}", sidekiq_job(name, int(time.time() * 1000)))
            await pipe.execute()
        await asyncio.sleep(1.0)
        async with client.pipeline(transaction=False) as pipe:
            for name in picked:
                pipe.rpop(f"queue:{name}")
            await pipe.execute()
        await asyncio.sleep(0.5)


def error_kinds(metrics: Metrics) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for family in metrics.registry.collect():
        if family.name == "queue_age_scaler_sample_errors":
            for s in family.samples:
                if s.name.endswith("_total"):
                    kinds[s.labels["error"]] = kinds.get(s.labels["error"], 0) + int(s.value)
    return kinds


def sample_count(metrics: Metrics, name: str) -> float:
    total = 0.0
    for family in metrics.registry.collect():
        if family.name == name:
            total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return total


async def watch_ages(
    samplers: dict[str, list[Sampler]], stop: asyncio.Event, ages: dict[str, list[float]]
) -> None:
    while not stop.is_set():
        for kind, group in samplers.items():
            for sampler in group:
                try:
                    view = await sampler.history(first_timeout=0.0)
                except Exception:  # a stale queue: counted among the errors
                    continue
                ages[kind].append(time.time() - view[-1].observed_at)
        await asyncio.sleep(0.25)


def percentile(values: Sequence[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(
    count: int, mode: str, seconds: float, warm_up: float, hot: float, busy: float
) -> Result:
    async with private_redis() as url:
        client = aioredis.Redis.from_url(url)
        prefix = f"qas-cost-{uuid.uuid4().hex[:6]}"
        kinds = [kind_of(i, hot, busy, count) for i in range(count)]
        names = await lay_out(client, prefix, kinds)
        metrics = Metrics()
        connections = Connections(batch=mode != "fixed-unbatched")
        adaptive = mode in ("adaptive", "budget")
        samplers = SamplerRegistry(
            open_adapter,
            metrics,
            connections=connections,
            slow_interval=SLOW_INTERVAL if adaptive else None,
            broker_budget=KEDA_BUILT_IN_PER_QUEUE * count if mode == "budget" else None,
            # every queue on one Redis: past serve's default bound of 2,000 per broker
            limits=Limits(max_queues_per_broker=max(count, MAX_QUEUES_PER_BROKER)),
        )
        by_kind: dict[str, list[Sampler]] = {kind: [] for kind in KINDS}
        for name, kind in zip(names, kinds, strict=True):
            metadata = {"url": url, "queue": name, "format": "sidekiq", "workerThroughput": "1"}
            spec = parse_metadata(metadata | {"targetAge": "60s"})
            by_kind[kind].append(samplers.get(spec))
        stop = asyncio.Event()
        busy_names = [n for n, k in zip(names, kinds, strict=True) if k == "busy"]
        producer = asyncio.create_task(churn(client, busy_names, stop))
        progress(f"{count} queues, {mode}: warming up {warm_up:g}s")
        await asyncio.sleep(warm_up)
        ages: dict[str, list[float]] = {kind: [] for kind in KINDS}
        watcher = asyncio.create_task(watch_ages(by_kind, stop, ages))
        before_redis = await read_redis(client)
        before_traffic = connections.traffic(url).round_trips
        before_samples = sample_count(metrics, "queue_age_scaler_samples")
        before_errors = sample_count(metrics, "queue_age_scaler_sample_errors")
        cpu_before, started = time.process_time(), time.monotonic()
        await asyncio.sleep(seconds)
        elapsed = time.monotonic() - started
        scaler_cpu = time.process_time() - cpu_before
        after_redis = await read_redis(client)
        calls, redis_cpu = after_redis.minus(before_redis)
        ours = {k: v for k, v in calls.items() if k not in ("lpush", "rpop", "ping")}
        result = Result(
            queues=count,
            mode=mode,
            seconds=elapsed,
            samples=(sample_count(metrics, "queue_age_scaler_samples") - before_samples) / elapsed,
            commands=sum(ours.values()) / elapsed,
            round_trips=(connections.traffic(url).round_trips - before_traffic) / elapsed,
            redis_cpu=redis_cpu / elapsed,
            scaler_cpu=scaler_cpu / elapsed,
            errors=int(sample_count(metrics, "queue_age_scaler_sample_errors") - before_errors),
            error_kinds=error_kinds(metrics),
            ages={k: (percentile(v, 0.5), percentile(v, 0.99)) for k, v in ages.items()},
            rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        )
        stop.set()
        await asyncio.gather(producer, watcher, return_exceptions=True)
        await samplers.aclose()
        await connections.aclose()
        await client.aclose()
        return result


def render(results: Sequence[Result]) -> str:
    head = (
        "| queues | mode | samples/s | Redis commands/s | x KEDA built-in | commands/queue/s "
        "| round trips/s | round trips/queue/s | Redis CPU | scaler CPU | errors "
        "| age p50/p99 hot | busy | idle |"
    )
    lines = [head, "|" + "---|" * 14]
    for r in results:
        keda = KEDA_BUILT_IN_PER_QUEUE * r.queues
        ages = [f"{r.ages[k][0]:.2f} / {r.ages[k][1]:.2f} s" for k in KINDS]
        lines.append(
            f"| {r.queues} | {r.mode} | {r.samples:.0f} | {r.commands:.0f} | "
            f"{r.commands / keda:.2f} | {r.commands / r.queues:.3f} | {r.round_trips:.1f} | "
            f"{r.round_trips / r.queues:.4f} | {100 * r.redis_cpu:.0f}% | "
            f"{100 * r.scaler_cpu:.0f}% | {r.errors} | {' | '.join(ages)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", default="1000,10000", help="comma-separated queue counts")
    parser.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warm-up", type=float, default=35.0)
    parser.add_argument("--hot", type=float, default=0.02, help="share of hot queues")
    parser.add_argument("--busy", type=float, default=0.03, help="share of busy queues")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.queues.split(",")]
    modes = args.modes.split(",")
    results = []
    for count in counts:
        for mode in modes:
            results.append(
                asyncio.run(run(count, mode, args.seconds, args.warm_up, args.hot, args.busy))
            )
            progress(render(results[-1:]).splitlines()[-1])
    if args.json:
        print(json.dumps([r.__dict__ for r in results], indent=2))
    else:
        print(f"load average {os.getloadavg()[0]:.1f}")
        print(render(results))
        for r in results:
            if r.error_kinds:
                print(f"{r.queues} {r.mode}: errors since the start, by kind: {r.error_kinds}")


if __name__ == "__main__":
    main()
