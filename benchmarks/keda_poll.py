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
import shutil
import signal
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

if __package__ in (None, ""):  # run as a path: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as aioredis

from benchmarks.bench_servers import READY_TIMEOUT, WARMUP_TIMEOUT
from benchmarks.keda_load import WORKER_GRACE, scaled_objects, worker_main
from benchmarks.keda_poll_report import figures, render
from benchmarks.keda_poll_run import Options, Run, run_server
from benchmarks.processes import progress
from benchmarks.sidekiq_redis import create_queues, delete_queues, measure_idle, private_redis

SERVERS = ("bare", "ours", "keda")
#: the Redis used when there is no redis-server binary to start a private one
SHARED_REDIS = "redis://127.0.0.1:6379/0"


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
        "--serve-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="one more option for ours' serve, repeatable (--serve-option=--event-loop=asyncio)",
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
        serve_options=tuple(args.serve_option),
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
