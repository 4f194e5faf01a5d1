"""A hostile cluster: KEDA's call pattern for healthy ScaledObjects on a real Redis throughout,
while a flood of random and malformed metadata maps arrives at the same server.

    .venv/bin/python -m benchmarks.hostile                    # 20,000 maps, 60 s after
    .venv/bin/python -m benchmarks.hostile --maps 2000 --after 10

The fuzzed maps carry known keys with broken values, unknown keys, unicode, NUL bytes, 1 MB values,
10,000-entry maps, and URLs to local ports that are no broker (PostgreSQL, an HTTP server, a closed
port) and to a port that accepts and never replies; ``--plausible`` of them (7 %) are valid
triggers, each on a queue of its own, that start samplers. Every address is on 127.0.0.1. The
flood comes from a process of its own, so that the healthy calls' figures are not the
benchmark's own event loop busy building maps.

Printed: the codes answered per RPC to the flood, the healthy calls' p50/p99 latency and errors
during and after the flood, the server's RSS (peak, and at the end), the log bytes it wrote,
/metrics' size and series count, and its CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import string
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import redis.asyncio as aioredis

from benchmarks.bench_servers import wait_ready
from benchmarks.processes import ROOT, free_port, process_cpu
from benchmarks.sidekiq_redis import create_queues, delete_queues, private_redis
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.metadata_reader import KEDA_KEYS, value_keys

KEYS = sorted(value_keys() | KEDA_KEYS | {key + "FromEnv" for key in value_keys()})
RPCS = ("GetMetricSpec", "GetMetrics", "IsActive", "StreamIsActive")
REDIS_FORMATS = ("sidekiq", "rq", "bullmq", "dramatiq", "resque", "huey", "list", "celery", "arq")
#: optional keys of a plausible trigger, with valid values
OPTIONAL = {
    "targetAge": ("30s", "2m"),
    "sampleInterval": ("1s", "2s", "5s"),
    "maxWorkers": ("10", "50"),
    "rateWindow": ("60s", "5m"),
    "activationDepth": ("1", "5"),
}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Fuzz:
    """Random metadata maps, broken and hostile; every URL points at 127.0.0.1."""

    def __init__(self, seed: int, ports: Sequence[int], plausible_share: float) -> None:
        self.rng = random.Random(seed)
        self.ports = list(ports)
        #: the share of maps that are valid triggers (the rest rarely parse)
        self.plausible_share = plausible_share

    def text(self, size: int = 20) -> str:
        alphabet = string.printable + "äßçπ漢字\u202e\x00"
        return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(0, size)))

    def url(self) -> str:
        r = self.rng
        scheme = r.choice(["redis", "rediss", "unix", "amqp", "amqps", "http", "postgres", ""])
        user = r.choice(["", ":pw@", "user:pw@", "u@"])
        port = r.choice([*map(str, self.ports), "", "0", "65536", "x"])
        host = r.choice(["127.0.0.1", "localhost", "[::1]", ""])
        path = r.choice(["", "/0", "/abc", "/%2F", "/tmp/x.sock"])
        query = r.choice(["", "?db=2", "?foo=1", "?ssl_ca_certs=/nonexistent", "?verify=x"])
        return f"{scheme}://{user}{host}:{port}{path}{query}"

    def value(self) -> str:
        r = self.rng
        kind = r.random()
        if kind < 0.3:
            return self.url()
        if kind < 0.5:
            return r.choice(["1", "0", "-1", "500ms", "1000000h", "nan", "1e309", "5m", "x"])
        if kind < 0.6:
            return r.choice(["sidekiq", "rq", "stream", "amqp", "list", "celery", "age"])
        if kind < 0.61:
            return "v" * 1_000_000
        return self.text()

    def plausible(self) -> dict[str, str]:
        """A trigger as a tenant would write it, with valid values: it parses and starts a
        sampler of a queue of its own (on a real Redis, or on a port that is no broker)."""
        r = self.rng
        port = r.choice(self.ports)
        if r.random() < 0.8:
            url, form = f"redis://127.0.0.1:{port}/0", r.choice(REDIS_FORMATS)
        else:
            url, form = f"amqp://guest:guest@127.0.0.1:{port}/%2F", "amqp"
        values = {"url": url, "queue": f"fuzz-{r.getrandbits(48):012x}", "format": form}
        values["workerThroughput"] = r.choice(["1", "0.5", "20"])
        for key in r.sample(sorted(OPTIONAL), r.randint(0, 2)):
            values[key] = r.choice(OPTIONAL[key])
        return values

    def metadata(self) -> dict[str, str]:
        r = self.rng
        if r.random() < self.plausible_share:
            return self.plausible()
        if r.random() < 0.005:
            return {f"k{i}": "v" for i in range(10_000)}
        values = {"queue": f"fuzz-{self.text(8)}", "url": self.url()}
        for _ in range(r.randint(0, 8)):
            key = r.choice(KEYS) if r.random() < 0.8 else self.text()
            values[key] = self.value()
        return values


@dataclass
class Healthy:
    """Latencies (ms) and errors of the healthy calls, by phase."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)

    def add(self, phase: str, ms: float) -> None:
        self.latencies.setdefault(phase, []).append(ms)


async def keda_poll(
    stub: pb_grpc.ExternalScalerAsyncStub,
    so: pb.ScaledObjectRef,
    healthy: Healthy,
    phase: list[str],
    interval: float,
) -> None:
    """KEDA's sequence for one ScaledObject, every ``interval`` seconds, until cancelled; the
    first at a random point of the interval, as KEDA's polls of its ScaledObjects are spread."""
    await asyncio.sleep(random.random() * interval)
    while True:
        started = time.monotonic()
        for name in ("GetMetricSpec", "GetMetrics", "IsActive"):
            t0 = time.monotonic()
            try:
                if name == "GetMetricSpec":
                    spec = await stub.GetMetricSpec(so, timeout=5)
                elif name == "GetMetrics":
                    request = pb.GetMetricsRequest(
                        scaledObjectRef=so, metricName=spec.metricSpecs[0].metricName
                    )
                    await stub.GetMetrics(request, timeout=5)
                else:
                    await stub.IsActive(so, timeout=5)
            except grpc.aio.AioRpcError as error:
                healthy.errors[f"{phase[0]} {name} {error.code().name}"] += 1
                break
            finally:
                healthy.add(phase[0], (time.monotonic() - t0) * 1000)
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


async def hostile_call(
    stub: pb_grpc.ExternalScalerAsyncStub, fuzz: Fuzz, codes: dict[str, Counter[str]]
) -> None:
    so = pb.ScaledObjectRef(name="fuzz", namespace=fuzz.text(10), scalerMetadata=fuzz.metadata())
    rpc = fuzz.rng.choice(RPCS)
    try:
        if rpc == "GetMetricSpec":
            await stub.GetMetricSpec(so, timeout=5)
        elif rpc == "GetMetrics":
            await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=so), timeout=5)
        elif rpc == "IsActive":
            await stub.IsActive(so, timeout=5)
        else:
            stream = stub.StreamIsActive(so, timeout=5)
            try:
                await stream.read()  # the first answer; a stream then goes on
            finally:
                stream.cancel()
        codes[rpc]["OK"] += 1
    except grpc.aio.AioRpcError as error:
        codes[rpc][error.code().name] += 1


@contextlib.asynccontextmanager
async def silent_port() -> AsyncIterator[int]:
    """A port that accepts connections and never replies."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()


def metrics_size(port: int) -> tuple[int, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        body: bytes = reply.read()
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    return len(body), series


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(options: argparse.Namespace) -> int:
    async with private_redis() as redis_url, silent_port() as silent:
        client = aioredis.Redis.from_url(redis_url)
        prefix = f"qas-hostile-{uuid.uuid4().hex[:8]}"
        queues = await create_queues(client, prefix, options.queues, 50)
        port, metrics_port = free_port(), free_port()
        log_path = Path(f"/tmp/qas-hostile-{port}.log")
        entry = ROOT / ".venv" / "bin" / "queue-age-scaler"
        command = [str(entry), "serve", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--metrics-port", str(metrics_port)]
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=log, stderr=asyncio.subprocess.STDOUT, cwd=ROOT
            )
        try:
            return await measure(options, proc.pid, port, metrics_port, queues, redis_url,
                                 silent, log_path)  # fmt: skip
        finally:
            proc.terminate()
            await proc.wait()
            await delete_queues(client, prefix)
            await client.aclose()
            log_path.unlink(missing_ok=True)


async def measure(
    options: argparse.Namespace,
    pid: int,
    port: int,
    metrics_port: int,
    queues: list[str],
    redis_url: str,
    silent: int,
    log_path: Path,
) -> int:
    await wait_ready("ours", port, log_path)
    closed = free_port()
    # the healthy queues' Redis (a hostile tenant may name it too), PostgreSQL, RabbitMQ's AMQP
    # port (a real broker for amqp://, no Redis), the scaler's own /metrics, silent and closed
    ports = [urlsplit(redis_url).port or 6379, 5432, 5672, metrics_port, silent, closed]
    objects = [
        pb.ScaledObjectRef(
            name=f"healthy-{i}",
            namespace="shop",
            scalerMetadata={
                "scalerAddress": "scaler:6000",
                "url": redis_url,
                "queue": queues[i % len(queues)],
                "format": "sidekiq",
                "workerThroughput": "1",
            },
        )
        for i in range(options.objects)
    ]
    healthy, phase = Healthy(), ["warm-up"]
    peak, cpu0 = 0, process_cpu(pid)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        pollers = [
            asyncio.create_task(keda_poll(stub, so, healthy, phase, options.poll)) for so in objects
        ]
        await asyncio.sleep(options.poll * 2)
        rss_before = rss_kib(pid)
        phase[0] = "during"
        started = time.monotonic()
        flood = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.hostile", "--flood-to", str(port),
            "--fuzz-ports", ",".join(map(str, ports)), "--maps", str(options.maps),
            "--concurrency", str(options.concurrency), "--plausible", str(options.plausible),
            "--seed", str(options.seed), stdout=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        reply = asyncio.ensure_future(flood.communicate())
        while not reply.done():
            peak = max(peak, rss_kib(pid))
            await asyncio.wait({reply}, timeout=0.5)
        out, _ = await reply
        if flood.returncode:
            raise SystemExit(f"the flood's process failed with status {flood.returncode}")
        codes = {rpc: Counter(counts) for rpc, counts in json.loads(out).items()}
        flood_seconds = time.monotonic() - started
        log_during = log_path.stat().st_size
        phase[0] = "after"
        end = time.monotonic() + options.after
        while time.monotonic() < end:
            peak = max(peak, rss_kib(pid))
            await asyncio.sleep(1.0)
        for task in pollers:
            task.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
    size, series = metrics_size(metrics_port)
    rss_after = rss_kib(pid)
    print(f"flood: {options.maps} maps in {flood_seconds:.1f}s, {options.objects} healthy "
          f"ScaledObjects polled every {options.poll:g}s")  # fmt: skip
    for rpc in RPCS:
        print(f"  {rpc:<15} " + ", ".join(f"{c} {n}" for c, n in codes[rpc].most_common()))
    bad = sum(n for c in codes.values() for k, n in c.items() if k in ("UNKNOWN", "INTERNAL"))
    print(f"  UNKNOWN/INTERNAL: {bad}")
    for name in ("during", "after"):
        values = healthy.latencies.get(name, [])
        errors = sum(n for k, n in healthy.errors.items() if k.startswith(name))
        print(f"healthy {name:<6}: {len(values)} calls, p50 "
              f"{statistics.median(values) if values else float('nan'):.1f} ms, p99 "
              f"{percentile(values, 0.99):.1f} ms, {errors} errors")  # fmt: skip
    for key, n in healthy.errors.most_common(5):
        print(f"  {key}: {n}")
    print(f"RSS: before {rss_before / 1024:.0f} MB, peak {peak / 1024:.0f} MB, "
          f"{options.after:g}s after {rss_after / 1024:.0f} MB")  # fmt: skip
    print(f"log: {log_during / 1e6:.2f} MB by the end of the flood, "
          f"{log_path.stat().st_size / 1e6:.2f} MB in all")  # fmt: skip
    print(f"/metrics: {size / 1e6:.2f} MB, {series} series")
    print(f"server CPU: {process_cpu(pid) - cpu0:.1f} s")
    return 0


async def flood(options: argparse.Namespace) -> int:
    """The flood alone, from a process of its own (as KEDA's Go client does not hold one
    ScaledObject's calls behind another's serialization); prints its codes as JSON."""
    ports = [int(port) for port in options.fuzz_ports.split(",")]
    fuzz = Fuzz(options.seed, ports, options.plausible)
    codes: dict[str, Counter[str]] = {rpc: Counter() for rpc in RPCS}
    limit = asyncio.Semaphore(options.concurrency)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{options.flood_to}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)

        async def one() -> None:
            async with limit:
                await hostile_call(stub, fuzz, codes)

        await asyncio.gather(*(one() for _ in range(options.maps)))
    print(json.dumps(codes))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--maps", type=int, default=20_000, help="fuzzed maps (default 20000)")
    parser.add_argument("--objects", type=int, default=100, help="healthy ScaledObjects")
    parser.add_argument("--queues", type=int, default=20, help="healthy queues (Sidekiq)")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between KEDA polls")
    parser.add_argument("--concurrency", type=int, default=50, help="fuzzed calls at once")
    parser.add_argument("--after", type=float, default=60.0, help="seconds measured after")
    parser.add_argument(
        "--plausible", type=float, default=0.07, help="share of valid triggers (default 0.07)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--flood-to", type=int, help=argparse.SUPPRESS)  # the flood's process
    parser.add_argument("--fuzz-ports", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    return asyncio.run(run(options) if options.flood_to is None else flood(options))


if __name__ == "__main__":
    sys.exit(main())
