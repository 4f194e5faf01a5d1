"""One server's run in benchmarks/keda_poll.py: the options, the load from the generator
processes, and what the server, Redis and the machine did in the measured window."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from benchmarks.bench_servers import started_server, wait_ready, warm_up
from benchmarks.keda_load import WORKER_GRACE, refs_for
from benchmarks.processes import ROOT, machine_busy, process_cpu, progress
from benchmarks.sidekiq_redis import measure_idle, read_redis


@dataclass
class Options:
    duration: float
    clients: int
    procs: int
    ramp: float
    queues: int
    jobs: int
    per_queue: int
    redis_url: str
    servers: tuple[str, ...]
    idle: float
    private_redis: bool = False
    pin: bool = False
    rounds: int = 1
    #: more options for ours' ``serve`` (``--event-loop asyncio``, say)
    serve_options: tuple[str, ...] = ()


@dataclass
class Run:
    """What one server did in its window."""

    server: str
    duration: float
    latencies_ms: list[float] = field(repr=False)
    errors: dict[str, int]
    server_cpu_s: float
    loadgen_cpu_s: float
    redis_calls: dict[str, int]
    redis_cpu_s: float
    machine_cpu_s: float
    late_workers: int
    idle_redis_calls: dict[str, int] | None = None
    idle_seconds: float = 0.0

    @property
    def sequences(self) -> int:
        return len(self.latencies_ms)

    @property
    def per_second(self) -> float:
        return self.sequences / self.duration

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100.0 * len(ordered)))]

    @property
    def redis_per_second(self) -> float:
        return sum(self.redis_calls.values()) / self.duration

    @property
    def redis_per_sequence(self) -> float:
        return sum(self.redis_calls.values()) / self.sequences if self.sequences else float("nan")

    @property
    def idle_redis_per_second(self) -> float | None:
        if self.idle_redis_calls is None or self.idle_seconds <= 0:
            return None
        return sum(self.idle_redis_calls.values()) / self.idle_seconds

    def summary(self) -> dict[str, Any]:
        return {
            "sequences": self.sequences,
            "sequences_per_s": round(self.per_second, 1),
            "p50_ms": round(self.percentile(50), 3),
            "p99_ms": round(self.percentile(99), 3),
            "errors": self.errors,
            "server_cpu_pct": round(100 * self.server_cpu_s / self.duration, 1),
            "loadgen_cpu_pct": round(100 * self.loadgen_cpu_s / self.duration, 1),
            "redis_cmds_per_s": round(self.redis_per_second, 1),
            "redis_cmds_per_sequence": round(self.redis_per_sequence, 4),
            "redis_cmds_per_s_by_command": {
                k: round(v / self.duration, 1) for k, v in sorted(self.redis_calls.items())
            },
            "redis_cpu_pct": round(100 * self.redis_cpu_s / self.duration, 1),
            "machine_cpu_pct": round(100 * self.machine_cpu_s / self.duration, 1),
            # busy CPU not used by the server, the load generators or Redis: other processes
            # (and this coordinator, which sleeps); above a few % the figures are disturbed
            "other_cpu_pct": round(
                100
                * (self.machine_cpu_s - self.server_cpu_s - self.loadgen_cpu_s - self.redis_cpu_s)
                / self.duration,
                1,
            ),
            "idle_redis_cmds_per_s": None
            if self.idle_redis_per_second is None
            else round(self.idle_redis_per_second, 1),
            "late_load_generators": self.late_workers,
        }


def merge(runs: Sequence[Run]) -> Run:
    """Rounds of one server pooled: sums of time, sequences, CPU and commands."""

    def total(calls: Sequence[dict[str, int] | None]) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for c in calls:
            counts.update(c or {})
        return dict(counts)

    errors: Counter[str] = Counter()
    for run in runs:
        errors.update(run.errors)
    idle = [run for run in runs if run.idle_redis_calls is not None]
    return Run(
        server=runs[0].server,
        duration=sum(r.duration for r in runs),
        latencies_ms=[x for r in runs for x in r.latencies_ms],
        errors=dict(errors),
        server_cpu_s=sum(r.server_cpu_s for r in runs),
        loadgen_cpu_s=sum(r.loadgen_cpu_s for r in runs),
        redis_calls=total([r.redis_calls for r in runs]),
        redis_cpu_s=sum(r.redis_cpu_s for r in runs),
        machine_cpu_s=sum(r.machine_cpu_s for r in runs),
        late_workers=sum(r.late_workers for r in runs),
        idle_redis_calls=total([r.idle_redis_calls for r in idle]) if idle else None,
        idle_seconds=sum(r.idle_seconds for r in idle),
    )


def split_clients(
    objects: Sequence[dict[str, Any]], clients: int, procs: int
) -> list[list[list[dict[str, Any]]]]:
    """Client k takes objects k, k+clients, ...; process p runs clients p, p+procs, ..."""
    per_client = [list(objects[k::clients]) for k in range(clients)]
    return [per_client[p::procs] for p in range(procs)]


def pinning(options: Options) -> tuple[list[str], list[str]]:
    """``taskset`` prefixes: the server on CPU 0, load generators on the others (``--pin``)."""
    cpus = sorted(os.sched_getaffinity(0))
    if not options.pin or len(cpus) < 2:
        return [], []
    rest = ",".join(str(c) for c in cpus[1:])
    return ["taskset", "-c", str(cpus[0])], ["taskset", "-c", rest]


async def run_worker(
    config: dict[str, Any], pin: list[str], module: str = "benchmarks.keda_poll"
) -> dict[str, Any]:
    """A load generator (``python -m module --worker``): config on stdin, result on stdout."""
    proc = await asyncio.create_subprocess_exec(
        *pin,
        sys.executable,
        "-m",
        module,
        "--worker",
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    budget = float(config["end_at"]) - time.monotonic() + WORKER_GRACE
    try:
        out, err = await asyncio.wait_for(proc.communicate(json.dumps(config).encode()), budget)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed ({proc.returncode}): {err.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(out)
    return result


async def drive(
    kind: str,
    pid: int,
    port: int,
    objects: Sequence[dict[str, Any]],
    options: Options,
    info: aioredis.Redis,
) -> Run:
    """Load from ``options.procs`` processes; Redis and CPU read at both ends of the window."""
    start_at = time.monotonic() + options.ramp
    end_at = start_at + options.duration
    base = {"target": f"127.0.0.1:{port}", "address": f"127.0.0.1:{port}"}
    configs = [
        {**base, "clients": clients, "start_at": start_at, "end_at": end_at}
        for clients in split_clients(objects, options.clients, options.procs)
    ]
    workers = asyncio.gather(*(run_worker(config, pinning(options)[1]) for config in configs))
    try:
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        redis_before, cpu_before = await read_redis(info), process_cpu(pid)
        machine_before, window_start = machine_busy(), time.monotonic()
        await asyncio.sleep(max(0.0, end_at - time.monotonic()))
        redis_after, cpu_after = await read_redis(info), process_cpu(pid)
        machine_after, window = machine_busy(), time.monotonic() - window_start
        results = await workers
    except BaseException:
        workers.cancel()
        with contextlib.suppress(BaseException):
            await workers
        raise
    calls, redis_cpu = redis_after.minus(redis_before)
    errors: Counter[str] = Counter()
    for result in results:
        errors.update(result["errors"])
    return Run(
        server=kind,
        duration=options.duration,
        latencies_ms=[x for result in results for x in result["latencies_ms"]],
        errors=dict(errors),
        server_cpu_s=(cpu_after - cpu_before) * options.duration / window,
        loadgen_cpu_s=sum(float(r["cpu_s"]) for r in results),
        redis_calls=calls,
        redis_cpu_s=redis_cpu,
        machine_cpu_s=(machine_after - machine_before) * options.duration / window,
        late_workers=sum(bool(r["late"]) for r in results),
    )


async def run_server(
    kind: str, objects: Sequence[dict[str, Any]], options: Options, info: aioredis.Redis
) -> Run:
    progress(f"{kind}: starting")
    serve_options = ("--no-metrics", *options.serve_options)
    async with started_server(kind, options.redis_url, pinning(options)[0], serve_options) as (
        pid,
        port,
        log_path,
    ):
        await wait_ready(kind, port, log_path)
        await warm_up(port, refs_for(objects, f"127.0.0.1:{port}"), log_path)
        idle: tuple[dict[str, int], float] | None = None
        if kind == "ours" and options.idle > 0:
            progress(f"{kind}: {options.idle:g}s without RPCs (the samplers' fixed cost)")
            idle = await measure_idle(info, options.idle)
        progress(f"{kind}: {options.duration:g}s of load from {options.procs} process(es)")
        run = await drive(kind, pid, port, objects, options, info)
        if idle is not None:
            run.idle_redis_calls, run.idle_seconds = idle
        return run
