"""One replica's limits: many queues of mixed formats on one Redis, one ScaledObject per queue,
polled at KEDA's default rate, against the scaler and against KEDA's own pattern in one run.

    .venv/bin/python -m benchmarks.scale                          # 1,000 queues, 2 minutes each
    .venv/bin/python -m benchmarks.scale --queues 10000 --window 60 --procs 2
    .venv/bin/python -m benchmarks.scale --servers ours --json

On a private redis-server, ``--queues`` queues (Sidekiq, RQ, a JSON list and a Redis Stream with
a consumer group, in turn) each hold 3 jobs, the oldest enqueued 100 to 400 s before the run
(known to the millisecond, and never taken). ``--hot`` of them (0.1) get a new job every 5 s
throughout and a ``targetAge`` under their oldest job's age (their age is over the target); the
others stay as they are, with a ``targetAge`` of an hour (idle, steady, far from it).

One ScaledObject per queue (``metric: age``) is polled as KEDA polls at its defaults
(benchmarks/scale_load.py): every 15 s GetMetricSpec then GetMetrics, every 30 s IsActive, each
object on its own clock. Each server in turn, on the same queues:

- ``ours``: ``queue-age-scaler serve`` (metrics on, to count its samples);
- ``keda``: benchmarks/bare_server.py ``--keda-redis``, one EVAL (TYPE, then the length) on every
  GetMetrics and IsActive, as KEDA's built-in Redis scaler does; its metadata names each key;
- ``bare`` (not by default): benchmarks/bare_server.py answering constants, what the machine can
  serve at all at this polling.

Per server: warm up (one call sequence per object), poll for ``--settle`` seconds unmeasured,
then ``--window`` seconds measured. Printed: calls and errors, GetMetrics and IsActive p50/p99
(in all, and apart for the hot queues, read when KEDA asks, and the idle ones),
the server's CPU and RSS (at the end and the peak), samples per second (from the scaler's
``queue_age_scaler_samples_total``) and per core, Redis commands per second (``INFO
commandstats``, less the benchmark's own writes and INFO) and Redis CPU (``INFO cpu``), and, for
``ours``, the sample age at answer time (p50/p99) for hot and idle queues: the answer is the
oldest job's age as of the sample, so ``(now - enqueued) - answer`` is that sample's age.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a path: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis

from benchmarks.bench_servers import started_server, wait_ready, warm_up
from benchmarks.hostile import percentile, rss_kib
from benchmarks.keda_poll_run import run_worker
from benchmarks.processes import free_port, machine_busy, process_cpu, progress
from benchmarks.scale_load import POLLING_INTERVAL, worker_main
from benchmarks.sidekiq_redis import delete_queues, private_redis, read_redis
from benchmarks.soak import FORMATS, add_job
from benchmarks.soak import metadata as ours_metadata
from scaler.generated import externalscaler_pb2 as pb

NAMESPACE = "scale"
#: the benchmark scrapes /metrics this long before the window opens and after it closes
SCRAPE_APART = 2.0
#: a hot queue gets a job this often
HOT_EVERY = 5.0
#: the benchmark's own commands (the hot queues' jobs, its INFO calls): not a server's
OWN_COMMANDS = frozenset({"lpush", "rpush", "hset", "xadd", "info", "ping"})
#: the key each format keeps its waiting jobs in, which KEDA's scaler is pointed at
KEDA_KEYS = {"sidekiq": "queue:{}", "rq": "rq:queue:{}", "list": "{}", "stream": "{}"}


@dataclass(frozen=True)
class Queue:
    fmt: str
    name: str
    hot: bool
    #: the oldest job's enqueue time (epoch s, whole milliseconds)
    oldest: float


async def create(client: aioredis.Redis, prefix: str, count: int, hot: float) -> list[Queue]:
    rng = random.Random(11)
    now_ms = int(time.time() * 1000)
    queues = []
    for i in range(count):
        fmt = FORMATS[i % len(FORMATS)]
        oldest = (now_ms - rng.randrange(100_000, 400_000)) / 1000
        queues.append(Queue(fmt, f"{prefix}-{i:05d}", rng.random() < hot, oldest))
    for start in range(0, count, 500):
        async with client.pipeline(transaction=False) as pipe:
            for queue in queues[start : start + 500]:
                if queue.fmt == "stream":
                    pipe.xgroup_create(queue.name, "workers", id="0", mkstream=True)
                for k in range(3):  # the oldest first, 10 s apart
                    await add_job(pipe, queue.fmt, queue.name, queue.oldest + 10 * k)
            await pipe.execute()
    return queues


async def hot_traffic(client: aioredis.Redis, queues: list[Queue]) -> None:
    """A job on each hot queue every HOT_EVERY seconds, spread over ticks of a second."""
    hot = [q for q in queues if q.hot]
    tick = 0
    while hot:
        share = hot[tick % int(HOT_EVERY) :: int(HOT_EVERY)]
        async with client.pipeline(transaction=False) as pipe:
            for queue in share:
                await add_job(pipe, queue.fmt, queue.name)
            await pipe.execute()
        tick += 1
        await asyncio.sleep(1.0)


def objects_for(kind: str, queues: list[Queue], url: str) -> list[dict[str, Any]]:
    objects = []
    for i, queue in enumerate(queues):
        if kind == "ours":
            metadata = ours_metadata(queue.fmt, queue.name, url)
            metadata["metric"] = "age"
            metadata["targetAge"] = "60s" if queue.hot else "1h"
        else:
            metadata = {"scalerAddress": "scaler:6000", "address": url, "listLength": "5"}
            metadata["listName"] = KEDA_KEYS[queue.fmt].format(queue.name)
        known = {"class": "hot" if queue.hot else "idle"}
        if kind == "ours":
            known["oldest"] = queue.oldest  # type: ignore[assignment]
        objects.append(
            {"name": f"so-{i:05d}", "namespace": NAMESPACE, "metadata": metadata, **known}
        )
    return objects


#: the two families scraped (``name[]``: the server's /metrics renders only those); a scrape of
#: everything renders every queue's and trigger's series, which at 1,000 queues held the
#: server's event loop (the GIL) for seconds and showed in the calls' p99
SAMPLE_FAMILIES = (
    "name[]=queue_age_scaler_samples_total&name[]=queue_age_scaler_sample_errors_total"
)


def samples_total(metrics_port: int) -> tuple[float, float]:
    """The scaler's samples and sample errors so far, summed over its queues."""
    url = f"http://127.0.0.1:{metrics_port}/metrics?{SAMPLE_FAMILIES}"
    with urllib.request.urlopen(url, timeout=60) as reply:
        text = reply.read().decode()
    samples = errors = 0.0
    for line in text.splitlines():
        if line.startswith("queue_age_scaler_samples_total{"):
            samples += float(line.rsplit(" ", 1)[1])
        elif line.startswith("queue_age_scaler_sample_errors_total{"):
            errors += float(line.rsplit(" ", 1)[1])
    return samples, errors


async def measure(
    kind: str, queues: list[Queue], url: str, options: argparse.Namespace, info: aioredis.Redis
) -> dict[str, Any]:
    objects = objects_for(kind, queues, url)
    metrics_port = free_port()
    # as an operator with this many queues on one Redis sets it (the default is 2,000)
    per_broker = max(len(queues), 2000)
    serve = ["--metrics-port", str(metrics_port), "--max-queues-per-broker", str(per_broker)]
    serve += options.server_arg
    progress(f"{kind}: starting")
    async with started_server(kind, url, [], serve) as (pid, port, log_path):
        await wait_ready(kind, port, log_path)
        refs = [
            pb.ScaledObjectRef(name=o["name"], namespace=NAMESPACE, scalerMetadata=o["metadata"])
            for o in objects
        ]
        progress(f"{kind}: warming up {len(refs)} ScaledObjects")
        # KEDA asks about every ScaledObject at once when it starts: 200 at a time here
        await warm_up(port, refs, log_path, timeout=max(30.0, len(refs) / 10), concurrency=200)
        load_from = time.monotonic() + 1.0
        start_at = load_from + max(options.settle, POLLING_INTERVAL)
        end_at = start_at + options.window
        configs = [
            {"target": f"127.0.0.1:{port}", "objects": objects[p :: options.procs], "seed": p,
             "load_from": load_from, "start_at": start_at, "end_at": end_at}
            for p in range(options.procs)
        ]  # fmt: skip
        loads = asyncio.gather(*(run_worker(c, [], "benchmarks.scale") for c in configs))
        progress(
            f"{kind}: {start_at - time.monotonic():.0f}s settling, then {options.window:g}s measured"
        )
        try:
            await asyncio.sleep(max(0.0, start_at - SCRAPE_APART - time.monotonic()))
            scraped = await scrape_samples(kind, metrics_port)
            await asyncio.sleep(max(0.0, start_at - time.monotonic()))
            before = await edge(pid, info)
            before["samples"], before["samples_t"] = scraped
            peak = rss_kib(pid)
            while time.monotonic() < end_at:
                await asyncio.sleep(min(5.0, max(0.0, end_at - time.monotonic())))
                peak = max(peak, rss_kib(pid))
            after = await edge(pid, info)
            await asyncio.sleep(SCRAPE_APART)  # the calls of the window have ended
            after["samples"], after["samples_t"] = await scrape_samples(kind, metrics_port)
            results = await loads
        except BaseException:
            loads.cancel()
            with contextlib.suppress(BaseException):
                await loads
            raise
        log_bytes = log_path.stat().st_size
        kept = Path(f"/tmp/qas-scale-{kind}-{os.getpid()}.log")
        shutil.copyfile(log_path, kept)
        progress(f"{kind}: server log kept in {kept}")
    return figures(kind, before, after, results, peak, log_bytes, len(objects))


async def edge(pid: int, info: aioredis.Redis) -> dict[str, Any]:
    """Everything read at one edge of the window but the scrape of /metrics
    (:func:`scrape_samples`, outside it)."""
    reading: dict[str, Any] = {"t": time.monotonic(), "cpu": process_cpu(pid)}
    reading["machine"] = machine_busy()
    reading["redis"] = await read_redis(info)
    reading["rss_kib"] = rss_kib(pid)
    return reading


async def scrape_samples(kind: str, metrics_port: int) -> tuple[Any, float]:
    """Ours' samples and failed samples so far, scraped from /metrics SCRAPE_APART seconds
    outside the window (a scrape of a family with 10,000 series holds the server's GIL for a
    while: the benchmark's own instrument would show in the calls' p99), and when."""
    if kind != "ours":
        return None, time.monotonic()
    samples = await asyncio.to_thread(samples_total, metrics_port)
    return samples, time.monotonic()


def figures(
    kind: str,
    before: dict[str, Any],
    after: dict[str, Any],
    results: list[dict[str, Any]],
    peak_kib: int,
    log_bytes: int,
    objects: int,
) -> dict[str, Any]:
    seconds = after["t"] - before["t"]
    calls, redis_cpu = after["redis"].minus(before["redis"])
    own = {c: n for c, n in calls.items() if c in OWN_COMMANDS}
    served = {c: n for c, n in calls.items() if c not in OWN_COMMANDS}
    latencies: dict[str, list[float]] = {}
    by_class: dict[str, list[float]] = {}
    freshness: dict[str, list[float]] = {"hot": [], "idle": []}
    errors: Counter[str] = Counter()
    load_cpu = 0.0
    for result in results:
        for rpc, values in result["latencies_ms"].items():
            latencies.setdefault(rpc, []).extend(values)
        for key, values in result["latencies_by_class_ms"].items():
            by_class.setdefault(key, []).extend(values)
        for group, values in result["freshness_s"].items():
            freshness[group].extend(values)
        errors.update(result["errors"])
        load_cpu += float(result["cpu_s"])
    cpu = (after["cpu"] - before["cpu"]) / seconds
    out: dict[str, Any] = {
        "server": kind,
        "objects": objects,
        "window_s": round(seconds, 1),
        "calls": {rpc: len(v) for rpc, v in latencies.items()},
        "calls_per_s": round(sum(len(v) for v in latencies.values()) / seconds, 1),
        "errors": dict(errors),
        "latency_ms": {
            rpc: {
                "p50": round(statistics.median(v), 2) if v else None,
                "p99": round(percentile(v, 0.99), 2) if v else None,
            }
            for rpc, v in latencies.items()
        },
        "latency_by_class_ms": {key: _latency(v) for key, v in sorted(by_class.items()) if v},
        "server_cpu_pct": round(100 * cpu, 1),
        "load_cpu_pct": round(100 * load_cpu / seconds, 1),
        "machine_cpu_pct": round(100 * (after["machine"] - before["machine"]) / seconds, 1),
        "rss_mb": round(after["rss_kib"] / 1024, 1),
        "rss_peak_mb": round(max(peak_kib, after["rss_kib"]) / 1024, 1),
        "redis_cmds_per_s": round(sum(served.values()) / seconds, 1),
        "redis_cmds_per_s_by_command": {
            c: round(n / seconds, 1) for c, n in sorted(served.items())
        },
        "benchmark_cmds_per_s": round(sum(own.values()) / seconds, 1),
        "redis_cpu_pct": round(100 * redis_cpu / seconds, 1),
        "server_log_bytes": log_bytes,
    }
    if before["samples"] is not None and after["samples"] is not None:
        span = after["samples_t"] - before["samples_t"]  # the scrapes bracket the window
        samples = (after["samples"][0] - before["samples"][0]) / span
        out["samples_per_s"] = round(samples, 1)
        out["sample_errors_per_s"] = round((after["samples"][1] - before["samples"][1]) / span, 2)
        out["samples_per_core_s"] = round(samples / cpu, 1) if cpu > 0 else None
        out["sample_age_s"] = {
            group: {"answers": len(v), "p50": round(statistics.median(v), 3) if v else None,
                    "p99": round(percentile(v, 0.99), 3) if v else None}
            for group, v in freshness.items()
        }  # fmt: skip
    return out


def _latency(values: list[float]) -> dict[str, Any]:
    return {
        "calls": len(values),
        "p50": round(statistics.median(values), 2),
        "p99": round(percentile(values, 0.99), 2),
    }


def render(runs: list[dict[str, Any]], options: argparse.Namespace, hot: int) -> str:
    lines = [
        f"{options.queues} queues ({', '.join(FORMATS)} in turn; {hot} hot) on one private Redis, "
        f"one ScaledObject each, KEDA's default polling (GetMetrics every 15 s, IsActive every "
        f"30 s); {options.window:g}s measured after {max(options.settle, POLLING_INTERVAL):g}s "
        f"settling; {os.cpu_count()} CPUs, shared",
        "",
        "server  calls/s  errors  GetMetrics p50/p99 ms  IsActive p50/p99 ms  CPU %  RSS MB (peak)"
        "  samples/s  per core  redis cmd/s  redis CPU %",
    ]
    for run in runs:
        lat = run["latency_ms"]
        gm, ia = lat.get("GetMetrics", {}), lat.get("IsActive", {})
        lines.append(
            f"{run['server']:<6}  {run['calls_per_s']:>7.1f}  {sum(run['errors'].values()):>6}  "
            f"{_ms(gm):>21}  {_ms(ia):>19}  {run['server_cpu_pct']:>5.1f}  "
            f"{run['rss_mb']:>6.0f} ({run['rss_peak_mb']:.0f})  "
            f"{run.get('samples_per_s', '-'):>9}  {run.get('samples_per_core_s', '-'):>8}  "
            f"{run['redis_cmds_per_s']:>11.1f}  {run['redis_cpu_pct']:>11.1f}"
        )
    for run in runs:
        lines.append(f"  {run['server']} Redis commands/s: {run['redis_cmds_per_s_by_command']}")
        if run["errors"]:
            lines.append(f"  {run['server']} errors: {run['errors']}")
        classes = run["latency_by_class_ms"]
        text = ", ".join(
            f"{key} {_ms(figure)} ({figure['calls']})"
            for key, figure in classes.items()
            if not key.startswith("GetMetricSpec")
        )
        lines.append(f"  {run['server']} p50/p99 ms by queue (calls): {text}")
        ages = run.get("sample_age_s")
        if ages:
            text = ", ".join(
                f"{g} p50 {a['p50']} s, p99 {a['p99']} s ({a['answers']} answers)"
                for g, a in ages.items()
            )
            lines.append(f"  {run['server']} sample age at answer time: {text}")
            lines.append(f"  {run['server']} sample errors/s: {run['sample_errors_per_s']}")
        lines.append(
            f"  {run['server']}: load generator CPU {run['load_cpu_pct']}%, machine busy "
            f"{run['machine_cpu_pct']}% (of one core), server log {run['server_log_bytes']} bytes"
        )
    by = {run["server"]: run for run in runs}
    if "ours" in by and "keda" in by and by["keda"]["redis_cmds_per_s"]:
        ratio = by["ours"]["redis_cmds_per_s"] / by["keda"]["redis_cmds_per_s"]
        lines.append(f"Redis commands, ours / KEDA's pattern at the same polling: {ratio:.2f}")
    return "\n".join(lines)


def _ms(figure: dict[str, Any]) -> str:
    if not figure or figure.get("p50") is None:
        return "-"
    return f"{figure['p50']:.1f} / {figure['p99']:.1f}"


async def run(options: argparse.Namespace) -> int:
    async with private_redis() as url:
        client = aioredis.Redis.from_url(url)
        info = aioredis.Redis.from_url(url, single_connection_client=True)
        prefix = f"qas-scale-{uuid.uuid4().hex[:6]}"
        traffic: asyncio.Task[None] | None = None
        try:
            progress(f"creating {options.queues} queues under {prefix}")
            queues = await create(client, prefix, options.queues, options.hot)
            traffic = asyncio.create_task(hot_traffic(client, queues))
            runs = [await measure(kind, queues, url, options, info) for kind in options.servers]
        finally:
            if traffic is not None:
                traffic.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await traffic
            await delete_queues(client, prefix)
            await client.aclose()
            await info.aclose()
    hot = sum(q.hot for q in queues)
    print(json.dumps(runs, indent=1) if options.json else render(runs, options, hot))
    return 0


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:] == ["--worker"]:
        return worker_main(sys.stdin, sys.stdout)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--hot", type=float, default=0.1, help="share of queues that move")
    parser.add_argument("--window", type=float, default=120.0, help="measured seconds per server")
    parser.add_argument("--settle", type=float, default=60.0, help="unmeasured polling first")
    parser.add_argument("--procs", type=int, default=1, help="load generator processes")
    parser.add_argument("--servers", default="ours,keda", type=lambda s: tuple(s.split(",")))
    parser.add_argument(
        "--server-arg", action="append", default=[], help="an extra option for ours' serve"
    )
    parser.add_argument("--json", action="store_true")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
