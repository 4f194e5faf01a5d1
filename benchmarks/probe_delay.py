"""How soon a probed ceiling follows its dependency, and what one probe reading costs.

Part 1, through the real gRPC server with its default probe interval (15 s): a Sidekiq queue
with more work than the dependency allows, a trigger ``dependencies: postgres=probe:pg/1`` whose
profile logs in as a throwaway role (CONNECTION LIMIT 10) to a throwaway database (CONNECTION
LIMIT 12). Each round another role opens 5 sessions in that database (the ceiling must drop
from 10 to 7) and later closes them (back to 10), at random moments; GetMetrics is polled every
0.1 s, and the delay from each change to the first answer that shows it is printed.

Part 2: the time of one reading of each probe kind (PostgreSQL, MariaDB, Redis, a local HTTP
endpoint with RateLimit headers), over ``--readings`` readings each.

    .venv/bin/python -m benchmarks.probe_delay              # about 3 minutes
    .venv/bin/python -m benchmarks.probe_delay --rounds 2 --readings 20

Needs PostgreSQL on POSTGRES_URL (default postgres@127.0.0.1:5432, trust), MariaDB on
127.0.0.1:3306 (root, no password) and Redis on REDIS_URL (default 127.0.0.1:6379), as
scripts/services starts them. Makes and drops its own role, database and keys.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import random
import statistics
import threading
import time
import uuid
from collections.abc import Awaitable, Callable

import grpc
import psycopg
import redis.asyncio as aioredis

from scaler.ceilings import http as http_probe
from scaler.ceilings import mysql, postgres
from scaler.ceilings import redis as redis_probe
from scaler.ceilings.headroom import Headroom
from scaler.ceilings.registry import REFRESH_INTERVAL
from scaler.generated import externalscaler_pb2 as pb
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import ServerConfig, running_server

POSTGRES_URL = os.environ.get("POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
MARIADB_URL = "mysql://root@127.0.0.1:3306/"
POLL = 0.1


async def answers(stub: pb_grpc.ExternalScalerAsyncStub, ref: pb.ScaledObjectRef) -> float:
    reply = await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref))
    return reply.metricValues[0].metricValueFloat


async def delay_until(
    stub: pb_grpc.ExternalScalerAsyncStub, ref: pb.ScaledObjectRef, expected: float
) -> float:
    started = time.monotonic()
    while await answers(stub, ref) != expected:
        await asyncio.sleep(POLL)
    return time.monotonic() - started


async def follow(rounds: int) -> list[float]:
    """Part 1: the delays from each change at the database to the answer that shows it."""
    token = uuid.uuid4().hex[:8]
    workers, other, database = f"qas_bw_{token}", f"qas_bo_{token}", f"qas_bdb_{token}"
    host = POSTGRES_URL.rsplit("@", 1)[1].split("/", 1)[0]
    queue = f"qas-bench-ceiling-{token}"
    client = aioredis.Redis.from_url(REDIS_URL)
    now_ms = int(time.time() * 1000) - 120_000
    jobs = [json.dumps({"class": "W", "jid": str(n), "enqueued_at": now_ms}) for n in range(1200)]
    await client.lpush(f"queue:{queue}", *jobs)
    delays: list[float] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {workers} LOGIN CONNECTION LIMIT 10")
        admin.execute(f"CREATE ROLE {other} LOGIN")
        admin.execute(f"CREATE DATABASE {database} CONNECTION LIMIT 12")
        profiles = {"pg": f"postgresql://{workers}@{host}/{database}"}
        config = ServerConfig(host="127.0.0.1", port=0, metrics_port=None, profiles=profiles)
        metadata = {"url": REDIS_URL, "queue": queue, "format": "sidekiq",
                    "workerThroughput": "1", "dependencies": "postgres=probe:pg/1"}  # fmt: skip
        ref = pb.ScaledObjectRef(name="bench", namespace="bench", scalerMetadata=metadata)
        try:
            async with running_server(config) as server:
                channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
                stub = pb_grpc.ExternalScalerStub(channel)
                await delay_until(stub, ref, 10.0)
                for _ in range(rounds):
                    await asyncio.sleep(random.uniform(0, REFRESH_INTERVAL))
                    sessions = [
                        psycopg.connect(f"postgresql://{other}@{host}/{database}") for _ in range(5)
                    ]
                    delays.append(await delay_until(stub, ref, 7.0))
                    await asyncio.sleep(random.uniform(0, REFRESH_INTERVAL))
                    for session in sessions:
                        session.close()
                    delays.append(await delay_until(stub, ref, 10.0))
                await channel.close(None)
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {workers}")
            admin.execute(f"DROP ROLE IF EXISTS {other}")
            await client.delete(f"queue:{queue}")
            await client.aclose()
    return delays


def rate_limited_api() -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("RateLimit-Policy", '"default";q=100;w=60')
            self.send_header("RateLimit", '"default";r=50;t=30')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def reading_times(readings: int) -> dict[str, list[float]]:
    """Part 2: seconds per reading, by probe kind."""
    api = rate_limited_api()
    readers: dict[str, Callable[[], Awaitable[Headroom]]] = {
        "postgres": lambda: postgres.read(POSTGRES_URL, 5.0),
        "mysql": lambda: mysql.read(MARIADB_URL, 5.0),
        "redis": lambda: redis_probe.read(REDIS_URL, 5.0),
        "http": lambda: http_probe.read(f"http://127.0.0.1:{api.server_port}/", 5.0),
    }
    times: dict[str, list[float]] = {}
    try:
        for kind, read in readers.items():
            times[kind] = []
            for _ in range(readings):
                started = time.perf_counter()
                await read()
                times[kind].append(time.perf_counter() - started)
    finally:
        api.shutdown()
        api.server_close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="drops and rises (default 5)")
    parser.add_argument("--readings", type=int, default=50, help="readings per probe kind")
    options = parser.parse_args(argv)
    delays = asyncio.run(follow(options.rounds))
    print(
        f"ceiling follows the database (probe interval {REFRESH_INTERVAL:g}s, GetMetrics every "
        f"{POLL:g}s): {len(delays)} changes, delay median {statistics.median(delays):.1f}s, "
        f"max {max(delays):.1f}s"
    )
    for kind, seconds in asyncio.run(reading_times(options.readings)).items():
        ms = sorted(s * 1000 for s in seconds)
        print(
            f"one {kind} reading: median {statistics.median(ms):.1f} ms, "
            f"p90 {ms[int(0.9 * (len(ms) - 1))]:.1f} ms, max {ms[-1]:.1f} ms ({len(ms)} readings)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
