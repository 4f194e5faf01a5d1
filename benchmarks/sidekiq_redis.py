"""Redis for the benchmarks: Sidekiq-layout queues (created under a unique prefix, deleted
afterwards), a private redis-server, and its command counts (``INFO commandstats``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import redis.asyncio as aioredis

from benchmarks.processes import STOP_TIMEOUT, free_port, progress


def sidekiq_job(queue: str, stamp_ms: int) -> str:
    """A Sidekiq 8 job as ``Sidekiq::Client`` pushes it (times in epoch milliseconds)."""
    return json.dumps(
        {
            "class": "HardWorker",
            "args": [1],
            "retry": True,
            "queue": queue,
            "jid": uuid.uuid4().hex[:24],
            "created_at": stamp_ms,
            "enqueued_at": stamp_ms,
        }
    )


async def create_queues(client: aioredis.Redis, prefix: str, count: int, jobs: int) -> list[str]:
    """``count`` queues of ``jobs`` jobs each, enqueued 10 to 600 s ago, oldest at the tail."""
    names = [f"{prefix}-q{i:02d}" for i in range(count)]
    now = time.time()
    for index, name in enumerate(names):
        per_queue = jobs + 10 * (index % 5)  # a few hundred each, not all equal
        ages = [600.0 - 590.0 * j / max(1, per_queue - 1) for j in range(per_queue)]
        payloads = [sidekiq_job(name, int((now - age) * 1000)) for age in ages]
        await client.lpush(f"queue:{name}", *payloads)  # oldest first, as Sidekiq pushed them
    return names


async def delete_queues(client: aioredis.Redis, prefix: str) -> int:
    keys = [key async for key in client.scan_iter(match=f"*{prefix}*", count=1000)]
    if keys:
        await client.delete(*keys)
    return len(keys)


@dataclass(frozen=True)
class RedisReading:
    """What Redis had counted at one moment: calls per command, and its CPU seconds."""

    calls: dict[str, int]
    cpu: float

    def minus(self, before: RedisReading) -> tuple[dict[str, int], float]:
        calls = {
            name: n - before.calls.get(name, 0)
            for name, n in self.calls.items()
            if n - before.calls.get(name, 0) > 0
        }
        return calls, self.cpu - before.cpu


async def read_redis(client: aioredis.Redis) -> RedisReading:
    """``INFO commandstats`` less the INFO calls (the benchmark's own), and Redis's CPU time."""
    stats = await client.info("commandstats")
    cpu = await client.info("cpu")
    calls = {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name != "cmdstat_info"
    }
    return RedisReading(calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]))


async def measure_idle(info: aioredis.Redis, seconds: float) -> tuple[dict[str, int], float]:
    """Redis commands over ``seconds`` with no RPCs: a server's fixed cost (or other clients')."""
    before = await read_redis(info)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    after = await read_redis(info)
    calls, _ = after.minus(before)
    return calls, time.monotonic() - started


@contextlib.asynccontextmanager
async def private_redis() -> AsyncIterator[str]:
    """A redis-server of the benchmark's own on 127.0.0.1, so INFO counts nobody else's commands."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("a private Redis needs redis-server on the PATH; or pass --redis-url")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="qas-bench-redis-") as folder:
        proc = await asyncio.create_subprocess_exec(
            binary,
            *("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
            *("--dir", folder, "--daemonize", "no", "--loglevel", "warning"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        try:
            client = aioredis.Redis.from_url(url)
            try:
                deadline = time.monotonic() + 10.0
                while True:
                    try:
                        await client.ping()
                        break
                    except aioredis.ConnectionError:
                        if time.monotonic() > deadline or proc.returncode is not None:
                            raise
                        await asyncio.sleep(0.1)
            finally:
                await client.aclose()
            progress(f"private redis-server on 127.0.0.1:{port}")
            yield url
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
