"""KEDA's polling pattern against three ExternalScaler servers, each in its own process.

Sets up Sidekiq-layout queues on Redis (``LPUSH queue:<name>`` of JSON jobs with ``enqueued_at``
in the past, under a unique key prefix, deleted afterwards) and ScaledObjects over them. Then, for
each server in turn (started, checked ready, warmed up, driven, stopped):

- ``bare``: benchmarks/bare_server.py, constant answers (the cost of grpc.aio alone);
- ``ours``: ``queue-age-scaler serve``, answering from its background samplers' cache;
- ``keda``: benchmarks/bare_server.py ``--keda-redis``, one EVAL (TYPE, then LLEN) on every
  GetMetrics and IsActive, the pattern of KEDA's built-in Redis scaler;

concurrent asyncio clients, spread over one or more load generator processes, loop over their
ScaledObjects as KEDA does: GetMetricSpec, then GetMetrics for the returned name, then IsActive.
Only sequences that start and end inside the measured window count. Redis ``INFO commandstats``
(less the benchmark's own INFO calls) is read at both ends of the window.

Run: ``.venv/bin/python -m benchmarks.keda_poll`` (``--help`` for the options). It talks to
127.0.0.1 only, and stops by itself: every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

if __package__ in (None, ""):  # run as a path: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import redis.asyncio as aioredis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("bare", "ours", "keda")
#: the Redis used when there is no redis-server binary to start a private one
SHARED_REDIS = "redis://127.0.0.1:6379/0"
SCALER_SERVICE = "externalscaler.ExternalScaler"
NAMESPACE = "bench"
#: KEDA's defaults: pollingInterval 30 s; the HPA asks for metrics every 15 s (no useCachedMetrics)
KEDA_POLLING_INTERVAL = 30.0
HPA_SYNC_PERIOD = 15.0
#: time to start a server, see it ready and warm it up
READY_TIMEOUT = 30.0
WARMUP_TIMEOUT = 30.0
#: a load generator that has not reported this long after the window closed is killed
WORKER_GRACE = 60.0
STOP_TIMEOUT = 10.0


# -- Redis: the queues and the command counts -------------------------------------------------


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


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) a process has used, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def machine_busy() -> float:
    """CPU seconds all CPUs of the machine have been busy (not idle, not waiting on I/O)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


# -- ScaledObjects ---------------------------------------------------------------------------


def scaled_objects(
    prefix: str, queues: Sequence[str], per_queue: int, url: str
) -> list[dict[str, Any]]:
    """``per_queue`` ScaledObjects per queue, interleaved so neighbours name different queues."""
    objects = []
    for k in range(per_queue):
        for q, queue in enumerate(queues):
            metadata = {
                "url": url,
                "queue": queue,
                "format": "sidekiq",
                "workerThroughput": "1",
                "targetAge": f"{30 + 15 * k}s",
            }
            objects.append({"name": f"{prefix}-so-q{q:02d}-{k}", "metadata": metadata})
    return objects


def refs_for(objects: Sequence[dict[str, Any]], address: str) -> list[pb.ScaledObjectRef]:
    """As KEDA sends them: every trigger metadata key, ``scalerAddress`` included."""
    return [
        pb.ScaledObjectRef(
            name=o["name"],
            namespace=NAMESPACE,
            scalerMetadata={"scalerAddress": address, **o["metadata"]},
        )
        for o in objects
    ]


async def keda_sequence(stub: pb_grpc.ExternalScalerAsyncStub, ref: pb.ScaledObjectRef) -> None:
    """One poll, as KEDA makes it: GetMetricSpec, GetMetrics for the returned name, IsActive."""
    spec = await stub.GetMetricSpec(ref)
    name = spec.metricSpecs[0].metricName
    await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=name))
    await stub.IsActive(ref)


# -- the load generator (a child process: ``--worker``, config on stdin, result on stdout) ------


async def client_loop(
    stub: pb_grpc.ExternalScalerAsyncStub,
    refs: Sequence[pb.ScaledObjectRef],
    start_at: float,
    end_at: float,
    latencies: list[float],
    errors: Counter[str],
) -> None:
    """KEDA's pattern for one client's ScaledObjects, until the window closes.

    GetMetricsRequest is rebuilt only when the metric name changes: KEDA builds it every time,
    but here the client's CPU is the server's CPU (2 cores), so the client does as little as it can.
    """
    requests: dict[int, tuple[str, pb.GetMetricsRequest]] = {}
    i = 0
    while True:
        started = time.monotonic()
        if started >= end_at:
            return
        index = i % len(refs)
        ref = refs[index]
        i += 1
        try:
            spec = await stub.GetMetricSpec(ref)
            name = spec.metricSpecs[0].metricName
            cached = requests.get(index)
            if cached is None or cached[0] != name:
                cached = requests[index] = (
                    name,
                    pb.GetMetricsRequest(scaledObjectRef=ref, metricName=name),
                )
            await stub.GetMetrics(cached[1])
            await stub.IsActive(ref)
        except grpc.aio.AioRpcError as error:
            if started >= start_at:
                errors[f"{error.code().name}: {(error.details() or '')[:120]}"] += 1
            continue
        ended = time.monotonic()
        if started >= start_at and ended <= end_at:
            latencies.append((ended - started) * 1000.0)


async def worker(config: dict[str, Any]) -> dict[str, Any]:
    start_at, end_at = float(config["start_at"]), float(config["end_at"])
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    async with grpc.aio.insecure_channel(config["target"]) as channel:
        await asyncio.wait_for(channel.channel_ready(), max(1.0, start_at - time.monotonic()))
        stub = pb_grpc.ExternalScalerStub(channel)
        clients = [refs_for(objects, config["address"]) for objects in config["clients"]]
        loaded_at = time.monotonic()
        tasks = [
            asyncio.create_task(client_loop(stub, refs, start_at, end_at, latencies, errors))
            for refs in clients
            if refs
        ]
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu_start = time.process_time()
        await asyncio.sleep(max(0.0, end_at - time.monotonic()))
        cpu_end = time.process_time()
        await asyncio.wait_for(asyncio.gather(*tasks), WORKER_GRACE / 2)
    return {
        "latencies_ms": latencies,
        "errors": dict(errors),
        "cpu_s": cpu_end - cpu_start,
        "late": loaded_at > start_at,
    }


def worker_main(stdin: TextIO, stdout: TextIO) -> int:
    config = json.load(stdin)
    result = asyncio.run(worker(config))
    json.dump(result, stdout)
    stdout.flush()
    return 0


# -- one server: start, ready, warm up, drive, stop -------------------------------------------


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_command(kind: str, port: int, redis_url: str) -> list[str]:
    if kind == "ours":
        entry = ROOT / ".venv" / "bin" / "queue-age-scaler"
        # ``python -m scaler`` is the same main() when the entry point is not installed;
        # --log-level belongs to the main parser, so it goes before ``serve``
        base = [str(entry)] if entry.exists() else [sys.executable, "-m", "scaler"]
        serve = ["serve", "--host", "127.0.0.1", "--port", str(port), "--no-metrics"]
        return [*base, "--log-level", "WARNING", *serve]
    command = [sys.executable, "-m", "benchmarks.bare_server", str(port)]
    return [*command, "--keda-redis", redis_url] if kind == "keda" else command


@contextlib.asynccontextmanager
async def started_server(
    kind: str, redis_url: str, pin: list[str]
) -> AsyncIterator[tuple[int, int, Path]]:
    """The server as a child process: (pid, port, log file); stopped, then killed, on exit."""
    port = free_port()
    log_path = Path(f"/tmp/qas-bench-{kind}-{os.getpid()}.log")
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            *pin,
            *server_command(kind, port, redis_url),
            cwd=ROOT,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        yield proc.pid, port, log_path
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        log_path.unlink(missing_ok=True)  # any error raised above already quotes its tail


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


async def wait_ready(kind: str, port: int, log_path: Path) -> None:
    """``ours``: grpc.health.v1 says SERVING for the scaler service; others: channel ready."""
    deadline = time.monotonic() + READY_TIMEOUT
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await asyncio.wait_for(channel.channel_ready(), 2.0)
                if kind != "ours":
                    return
                health = health_pb2_grpc.HealthStub(channel)
                reply = await health.Check(
                    health_pb2.HealthCheckRequest(service=SCALER_SERVICE), timeout=2.0
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
        except (TimeoutError, grpc.aio.AioRpcError) as error:
            last = error
        await asyncio.sleep(0.2)
    raise RuntimeError(
        f"{kind} server not ready on port {port} within {READY_TIMEOUT:g}s ({last!r}); "
        f"its log:\n{log_tail(log_path)}"
    )


async def warm_up(port: int, refs: Sequence[pb.ScaledObjectRef], log_path: Path) -> None:
    """One sequence per ScaledObject (so every queue has been asked for once), until all pass."""
    deadline = time.monotonic() + WARMUP_TIMEOUT
    pending = list(refs)
    limit = asyncio.Semaphore(20)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)

        async def one(ref: pb.ScaledObjectRef) -> str | None:
            async with limit:
                try:
                    await keda_sequence(stub, ref)
                    return None
                except grpc.aio.AioRpcError as error:
                    return f"{error.code().name}: {error.details()}"

        while pending:
            failures = await asyncio.gather(*(one(ref) for ref in pending))
            pending = [ref for ref, failed in zip(pending, failures, strict=True) if failed]
            if not pending:
                return
            if time.monotonic() > deadline:
                first = next(f for f in failures if f)
                raise RuntimeError(
                    f"warm-up: {len(pending)} ScaledObjects still fail after {WARMUP_TIMEOUT:g}s, "
                    f"e.g. {first}; server log:\n{log_tail(log_path)}"
                )
            await asyncio.sleep(0.5)


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


async def run_worker(config: dict[str, Any], pin: list[str]) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        *pin,
        sys.executable,
        "-m",
        "benchmarks.keda_poll",
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


async def measure_idle(info: aioredis.Redis, seconds: float) -> tuple[dict[str, int], float]:
    """Redis commands over ``seconds`` with no RPCs: a server's fixed cost (or other clients')."""
    before = await read_redis(info)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    after = await read_redis(info)
    calls, _ = after.minus(before)
    return calls, time.monotonic() - started


async def run_server(
    kind: str, objects: Sequence[dict[str, Any]], options: Options, info: aioredis.Redis
) -> Run:
    progress(f"{kind}: starting")
    async with started_server(kind, options.redis_url, pinning(options)[0]) as (
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


def progress(message: str) -> None:
    print(f"[keda_poll] {message}", file=sys.stderr, flush=True)


# -- the whole benchmark ----------------------------------------------------------------------


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def figures(
    rounds: Sequence[dict[str, Run]], options: Options, background: float
) -> dict[str, Any]:
    runs = {kind: merge([r[kind] for r in rounds]) for kind in rounds[0]}
    objects = options.queues * options.per_queue
    real_rate = objects * (1.0 / KEDA_POLLING_INTERVAL + 1.0 / HPA_SYNC_PERIOD)
    result: dict[str, Any] = {
        "setup": {
            "duration_s": options.duration,
            "rounds": len(rounds),
            "pinned": options.pin,
            "redis": "private" if options.private_redis else options.redis_url,
            "clients": options.clients,
            "load_generator_processes": options.procs,
            "queues": options.queues,
            "jobs_per_queue": f"{options.jobs}..{options.jobs + 40}",
            "scaled_objects": objects,
            "cpus": os.cpu_count(),
            "redis_background_cmds_per_s": round(background, 1),
        },
        "servers": {kind: run.summary() for kind, run in runs.items()},
    }
    ours, bare, keda = runs.get("ours"), runs.get("bare"), runs.get("keda")
    if ours and bare:
        result["throughput_ratio_ours_over_bare"] = ratio(ours.per_second, bare.per_second)
        result["throughput_ratio_per_round"] = [
            round(r["ours"].per_second / r["bare"].per_second, 3)
            for r in rounds
            if r["bare"].per_second > 0
        ]
    if ours and keda and keda.sequences:
        per_seq = keda.redis_per_sequence
        fixed = ours.idle_redis_per_second or ours.redis_per_second
        # KEDA's built-in scaler itself runs one EVAL per poll (GetMetricsAndActivity): the
        # commands of one EVAL, where an external scaler runs one on GetMetrics and on IsActive
        evals = keda.redis_calls.get("eval", 0) / keda.sequences
        per_poll = per_seq / evals if evals else per_seq
        result["redis"] = {
            "keda_cmds_per_sequence": round(per_seq, 3),
            "ours_cmds_per_s": round(ours.redis_per_second, 1),
            "ours_idle_cmds_per_s": None if ours.idle_redis_per_second is None else round(fixed, 1),
            "ratio_at_same_rate": ratio(ours.redis_per_second, per_seq * ours.per_second),
            "keda_evals_per_sequence": round(evals, 3),
            "ratio_at_same_rate_vs_one_eval_per_poll": ratio(
                ours.redis_per_second, per_poll * ours.per_second
            ),
            "keda_default_load_sequences_per_s": round(real_rate, 2),
            "ratio_at_keda_default_load": ratio(fixed, per_seq * real_rate),
            "ratio_at_keda_default_load_vs_one_eval_per_poll": ratio(fixed, per_poll * real_rate),
            "break_even_sequences_per_s": ratio(fixed, per_seq),
        }
    return result


def render(result: dict[str, Any]) -> str:
    setup = result["setup"]
    placement = "server pinned to CPU 0, load on the rest" if setup["pinned"] else "unpinned"
    lines = [
        f"{setup['scaled_objects']} ScaledObjects over {setup['queues']} Sidekiq queues "
        f"({setup['jobs_per_queue']} jobs each); {setup['clients']} clients in "
        f"{setup['load_generator_processes']} load generator process(es); "
        f"{setup['duration_s']:g}s per server x {setup['rounds']} round(s); "
        f"{setup['cpus']} CPUs, {placement}; Redis: {setup['redis']}",
        f"Redis commands from other clients before the runs: "
        f"{setup['redis_background_cmds_per_s']:g}/s"
        + (
            " -- the Redis figures below include them; leave out --redis-url for a private Redis"
            if setup["redis_background_cmds_per_s"] > 0
            else ""
        ),
        "",
        f"{'server':<6} {'seq/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} "
        f"{'srv CPU':>8} {'gen CPU':>8} {'other':>6} {'redis cmd/s':>12} {'cmd/seq':>8} "
        f"{'redis CPU':>9}",
    ]
    for kind, s in result["servers"].items():
        lines.append(
            f"{kind:<6} {s['sequences_per_s']:>8.1f} {s['p50_ms']:>8.2f} {s['p99_ms']:>8.2f} "
            f"{sum(s['errors'].values()):>7} {s['server_cpu_pct']:>7.0f}% "
            f"{s['loadgen_cpu_pct']:>7.0f}% {s['other_cpu_pct']:>5.0f}% "
            f"{s['redis_cmds_per_s']:>12.1f} {s['redis_cmds_per_sequence']:>8.3f} "
            f"{s['redis_cpu_pct']:>8.1f}%"
        )
    lines.append(
        "(CPU in % of one core over the window; 'other' is busy CPU no process of the benchmark "
        "used: other work on the machine, and kernel time for loopback traffic)"
    )
    for kind, s in result["servers"].items():
        by_command = ", ".join(f"{k} {v:g}" for k, v in s["redis_cmds_per_s_by_command"].items())
        lines.append(f"  {kind} Redis commands/s: {by_command or 'none'}")
        for error, count in s["errors"].items():
            lines.append(f"  {kind} error x{count}: {error}")
        if s["late_load_generators"]:
            lines.append(f"  {kind}: {s['late_load_generators']} load generator(s) started late")
    lines.append("")
    share = result.get("throughput_ratio_ours_over_bare")
    if share is not None:
        verdict = "meets" if share >= 0.7 else "BELOW"
        per_round = ", ".join(f"{x:.2f}" for x in result["throughput_ratio_per_round"])
        lines.append(
            f"throughput ours/bare: {share:.3f} ({verdict} the goal of >= 0.7); "
            f"per round: {per_round}"
        )
    redis = result.get("redis")
    if redis:
        ours = result["servers"]["ours"]
        same = redis["ratio_at_same_rate"]
        verdict = "meets" if same is not None and same <= 0.1 else "MISSES"
        keda_load = redis["keda_cmds_per_sequence"] * redis["keda_default_load_sequences_per_s"]
        lines += [
            f"Redis, ours vs KEDA's pattern at ours' rate ({ours['sequences_per_s']:.0f} seq/s): "
            f"{redis['ours_cmds_per_s']:g} / ({redis['keda_cmds_per_sequence']:g} x "
            f"{ours['sequences_per_s']:.0f}) = {same:.4f} ({verdict} the goal of <= 0.1); "
            f"vs one EVAL per poll, as KEDA's built-in scaler runs: "
            f"{redis['ratio_at_same_rate_vs_one_eval_per_poll']:.4f}",
            f"Redis at KEDA's default load for {setup['scaled_objects']} ScaledObjects "
            f"({redis['keda_default_load_sequences_per_s']:g} seq/s: pollingInterval 30 s + HPA "
            f"every 15 s): ours {redis['ours_idle_cmds_per_s']} cmds/s, fixed (the samplers; "
            f"measured with no RPCs) vs KEDA's pattern {keda_load:g} cmds/s => ratio "
            f"{redis['ratio_at_keda_default_load']:.2f}; vs one EVAL per poll: "
            f"{redis['ratio_at_keda_default_load_vs_one_eval_per_poll']:.2f}. Ours issues "
            f"fewer commands only above {redis['break_even_sequences_per_s']:.0f} seq/s",
        ]
    return "\n".join(lines)


async def benchmark(options: Options) -> dict[str, Any]:
    if options.private_redis:
        async with private_redis() as url:
            options.redis_url = url
            return await benchmark_on(options)
    return await benchmark_on(options)


async def benchmark_on(options: Options) -> dict[str, Any]:
    host = urlsplit(options.redis_url).hostname
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"keda_poll talks to 127.0.0.1 only; got Redis host {host!r}")
    prefix = f"qas-bench-{uuid.uuid4().hex[:8]}"
    info = aioredis.Redis.from_url(options.redis_url, single_connection_client=True)
    data = aioredis.Redis.from_url(options.redis_url)
    rounds: list[dict[str, Run]] = []
    try:
        await info.ping()
        background_calls, background_seconds = await measure_idle(info, 2.0)
        background = sum(background_calls.values()) / background_seconds
        progress(f"creating {options.queues} queues under {prefix}")
        queues = await create_queues(data, prefix, options.queues, options.jobs)
        objects = scaled_objects(prefix, queues, options.per_queue, options.redis_url)
        for number in range(options.rounds):
            if options.rounds > 1:
                progress(f"round {number + 1} of {options.rounds}")
            runs: dict[str, Run] = {}
            for kind in options.servers:
                runs[kind] = await run_server(kind, objects, options, info)
            rounds.append(runs)
    finally:
        with contextlib.suppress(aioredis.RedisError):
            deleted = await delete_queues(data, prefix)
            progress(f"deleted {deleted} keys under {prefix}")
        await data.aclose()
        await info.aclose()
    return figures(rounds, options, background)


def parse_args(argv: list[str] | None) -> tuple[Options, bool]:
    parser = argparse.ArgumentParser(prog="keda_poll", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per server (15)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (32)")
    parser.add_argument(
        "--procs", type=int, default=2, help="load generator processes sharing the clients (2)"
    )
    parser.add_argument(
        "--ramp", type=float, default=3.0, help="seconds of unmeasured load before the window (3)"
    )
    parser.add_argument("--queues", type=int, default=20, help="Sidekiq queues (20)")
    parser.add_argument("--jobs", type=int, default=300, help="jobs per queue, about (300)")
    parser.add_argument("--per-queue", type=int, default=10, help="ScaledObjects per queue (10)")
    parser.add_argument(
        "--redis-url",
        help="use this Redis on 127.0.0.1 (e.g. redis://127.0.0.1:6379/0) instead of a private "
        "redis-server; its INFO then also counts every other client's commands",
    )
    parser.add_argument(
        "--servers",
        default=",".join(SERVERS),
        help=f"comma-separated, in order, from {', '.join(SERVERS)} (all)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=5.0,
        help="seconds to count ours' Redis commands with no RPCs (5; 0 skips)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the servers in turn this many times and pool the figures (1)",
    )
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="let the scheduler place the server and the load generators (default: the server "
        "on the first CPU, the load generators on the others, with taskset)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    servers = tuple(s.strip() for s in args.servers.split(",") if s.strip())
    unknown = [s for s in servers if s not in SERVERS]
    if unknown or not servers:
        parser.error(f"--servers: unknown {unknown}; choose from {', '.join(SERVERS)}")
    if args.duration <= 0 or args.clients < 1 or args.procs < 1 or args.ramp < 1.5:
        parser.error("need --duration > 0, --clients >= 1, --procs >= 1 and --ramp >= 1.5")
    options = Options(
        duration=args.duration,
        clients=args.clients,
        procs=min(args.procs, args.clients),
        ramp=args.ramp,
        queues=args.queues,
        jobs=args.jobs,
        per_queue=args.per_queue,
        redis_url=args.redis_url or SHARED_REDIS,
        servers=servers,
        idle=args.idle,
        private_redis=args.redis_url is None and shutil.which("redis-server") is not None,
        pin=args.pin and shutil.which("taskset") is not None,
        rounds=max(1, args.rounds),
    )
    return options, args.json


async def main_async(options: Options) -> dict[str, Any]:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    per_server = READY_TIMEOUT + WARMUP_TIMEOUT + options.idle + options.ramp
    per_round = len(options.servers) * (per_server + options.duration + WORKER_GRACE)
    budget = 30.0 + options.rounds * per_round
    return await asyncio.wait_for(benchmark(options), budget)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--worker"]:
        return worker_main(sys.stdin, sys.stdout)
    options, as_json = parse_args(argv)
    try:
        result = asyncio.run(main_async(options))
    except (asyncio.CancelledError, KeyboardInterrupt):
        progress("interrupted: servers stopped, queues deleted")
        return 130
    except TimeoutError:
        progress("gave up: the whole run took longer than its time budget")
        return 1
    print(json.dumps(result) if as_json else render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
