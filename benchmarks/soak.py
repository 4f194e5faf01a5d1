"""A soak: many ScaledObjects over many Redis queues of mixed formats, polled as KEDA polls them
for a long while, with StreamIsActive streams open throughout.

    .venv/bin/python -m benchmarks.soak                     # 1,000 queues, 10 minutes
    .venv/bin/python -m benchmarks.soak --minutes 2 --queues 200 --streams 20

Each of ``--queues`` queues (Sidekiq, RQ, a JSON list and a Redis Stream with a consumer group, in
turn) holds a few jobs, and a producer adds and a consumer takes jobs now and then, so the figures
move. One ScaledObject per queue runs KEDA's sequence (GetMetricSpec, GetMetrics, IsActive) every
``--poll`` seconds (10: KEDA's 30 s polling plus the HPA's 15 s metrics requests); ``--streams`` of
them also hold a StreamIsActive stream open. The server is the real command as a child process,
on a private redis-server.

Printed every minute: calls, errors (stale-sample errors apart), p50/p99 latency, the server's
RSS and CPU, Redis commands per second; at the end the whole run's figures, and whether RSS held
flat (the last minute within 10 % of the second).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from benchmarks.hostile import percentile, rss_kib
from benchmarks.processes import ROOT, free_port, process_cpu
from benchmarks.sidekiq_redis import delete_queues, private_redis
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

FORMATS = ("sidekiq", "rq", "list", "stream")


@dataclass
class Minute:
    calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)


async def add_job(
    client: aioredis.Redis | Pipeline, fmt: str, queue: str, stamp: float | None = None
) -> None:
    """One job enqueued at ``stamp`` (now by default), as the format's library lays it out; on a
    pipeline, queued for its next round trip."""
    now = time.time() if stamp is None else stamp
    if fmt == "sidekiq":
        job = {"class": "W", "args": [], "jid": uuid.uuid4().hex, "enqueued_at": now}
        await client.lpush(f"queue:{queue}", json.dumps(job))
    elif fmt == "rq":
        job_id = uuid.uuid4().hex
        whole = int(now)
        micros = int((now - whole) * 1e6)
        stamp_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"
        await client.hset(f"rq:job:{job_id}", mapping={"enqueued_at": stamp_text})
        await client.rpush(f"rq:queue:{queue}", job_id)
    elif fmt == "list":
        await client.lpush(queue, json.dumps({"enqueued_at": now}))
    else:  # the entry's id carries its time, as XADD * makes it
        await client.xadd(queue, {"job": "1"}, id="*" if stamp is None else f"{int(now * 1000)}-*")


async def take_job(client: aioredis.Redis, fmt: str, queue: str) -> None:
    if fmt == "sidekiq":
        await client.rpop(f"queue:{queue}")
    elif fmt == "rq":
        job_id = await client.lpop(f"rq:queue:{queue}")
        if isinstance(job_id, bytes):
            await client.delete(f"rq:job:{job_id.decode()}")
    elif fmt == "list":
        await client.rpop(queue)
    else:
        await client.xreadgroup("workers", "c1", {queue: ">"}, count=1)


def metadata(fmt: str, queue: str, url: str) -> dict[str, str]:
    values = {"scalerAddress": "scaler:6000", "url": url, "queue": queue, "format": fmt}
    values["workerThroughput"] = "1"
    if fmt == "list":
        values["timestampField"] = "enqueued_at"
    if fmt == "stream":
        values["consumerGroup"] = "workers"
    return values


async def setup(client: aioredis.Redis, prefix: str, count: int) -> list[tuple[str, str]]:
    queues = [(FORMATS[i % len(FORMATS)], f"{prefix}-{i:05d}") for i in range(count)]
    for fmt, queue in queues:
        if fmt == "stream":
            await client.xgroup_create(queue, "workers", id="0", mkstream=True)
        for _ in range(3):
            await add_job(client, fmt, queue)
    return queues


async def traffic(client: aioredis.Redis, queues: Sequence[tuple[str, str]]) -> None:
    """A job in and a job out on a random queue, about 20 times a second."""
    rng = random.Random(7)
    while True:
        fmt, queue = rng.choice(queues)
        await add_job(client, fmt, queue)
        fmt, queue = rng.choice(queues)
        await take_job(client, fmt, queue)
        await asyncio.sleep(0.05)


async def poll(
    stub: pb_grpc.ExternalScalerAsyncStub,
    so: pb.ScaledObjectRef,
    minute: list[Minute],
    every: float,
) -> None:
    await asyncio.sleep(random.random() * every)  # KEDA's polls are spread
    while True:
        started = time.monotonic()
        try:
            spec = await stub.GetMetricSpec(so, timeout=5)
            name = spec.metricSpecs[0].metricName
            await stub.GetMetrics(
                pb.GetMetricsRequest(scaledObjectRef=so, metricName=name), timeout=5
            )
            await stub.IsActive(so, timeout=5)
        except grpc.aio.AioRpcError as error:
            details = error.details() or ""
            kind = "stale" if "newest sample" in details or "no sample" in details else "other"
            minute[0].errors[f"{error.code().name} ({kind})"] += 1
        minute[0].calls += 3
        minute[0].latencies.append((time.monotonic() - started) * 1000 / 3)
        await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))


async def watch(
    stub: pb_grpc.ExternalScalerAsyncStub, so: pb.ScaledObjectRef, minute: list[Minute]
) -> None:
    stream = stub.StreamIsActive(so)
    try:
        while True:
            await stream.read()
    except grpc.aio.AioRpcError as error:
        minute[0].errors[f"StreamIsActive {error.code().name}"] += 1


async def redis_commands(client: aioredis.Redis) -> int:
    stats = await client.info("stats")
    return int(stats["total_commands_processed"])


async def run(options: argparse.Namespace) -> int:
    async with private_redis() as url:
        client = aioredis.Redis.from_url(url)
        prefix = f"qas-soak-{uuid.uuid4().hex[:6]}"
        queues = await setup(client, prefix, options.queues)
        port = free_port()
        entry = ROOT / ".venv" / "bin" / "queue-age-scaler"
        log_path = Path(f"/tmp/qas-soak-{port}.log")
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                str(entry), "--log-level", "WARNING", "serve", "--host", "127.0.0.1",
                "--port", str(port), "--no-metrics",
                stdout=log, stderr=asyncio.subprocess.STDOUT, cwd=ROOT,
            )  # fmt: skip
        try:
            await asyncio.sleep(2.0)
            return await soak(options, proc.pid, port, client, url, queues)
        finally:
            proc.terminate()
            await proc.wait()
            await delete_queues(client, prefix)
            await client.aclose()
            print(f"server log: {log_path.stat().st_size} bytes ({log_path})")


async def soak(
    options: argparse.Namespace,
    pid: int,
    port: int,
    client: aioredis.Redis,
    url: str,
    queues: list[tuple[str, str]],
) -> int:
    refs = [
        pb.ScaledObjectRef(name=f"so-{i}", namespace="soak", scalerMetadata=metadata(f, q, url))
        for i, (f, q) in enumerate(queues)
    ]
    minute = [Minute()]
    rows: list[tuple[int, float, float]] = []  # (minute, rss MB, cpu s)
    total = Minute()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        tasks = [asyncio.create_task(poll(stub, so, minute, options.poll)) for so in refs]
        tasks += [asyncio.create_task(watch(stub, so, minute)) for so in refs[: options.streams]]
        tasks.append(asyncio.create_task(traffic(client, queues)))
        cpu0 = process_cpu(pid)
        print("minute  calls  errors  p50 ms  p99 ms  RSS MB  CPU %  redis cmd/s")
        for index in range(1, int(options.minutes) + 1):
            commands0, cpu_start = await redis_commands(client), process_cpu(pid)
            await asyncio.sleep(60.0)
            commands = (await redis_commands(client) - commands0) / 60.0
            done, minute[0] = minute[0], Minute()
            total.calls += done.calls
            total.errors.update(done.errors)
            total.latencies += done.latencies
            rss = rss_kib(pid) / 1024
            cpu = process_cpu(pid) - cpu_start
            rows.append((index, rss, cpu))
            print(
                f"{index:>6}  {done.calls:>5}  {sum(done.errors.values()):>6}  "
                f"{statistics.median(done.latencies) if done.latencies else float('nan'):>6.1f}  "
                f"{percentile(done.latencies, 0.99):>6.1f}  {rss:>6.0f}  {cpu / 60 * 100:>5.0f}  "
                f"{commands:>11.0f}",
                flush=True,
            )
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(f"total: {total.calls} calls, errors {dict(total.errors) or 0}, p50 "
          f"{statistics.median(total.latencies):.1f} ms, p99 {percentile(total.latencies, 0.99):.1f} ms, "
          f"server CPU {process_cpu(pid) - cpu0:.0f} s")  # fmt: skip
    if len(rows) >= 3:
        second, last = rows[1][1], rows[-1][1]
        print(f"RSS flat: last minute {last:.0f} MB vs second {second:.0f} MB "
              f"({(last / second - 1) * 100:+.1f} %; goal within 10 %)")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--poll", type=float, default=10.0, help="seconds between sequences")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
