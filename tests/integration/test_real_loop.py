"""The real scaling loop: a real Redis queue, worker processes whose jobs hold connections to a
real PostgreSQL (through a role whose CONNECTION LIMIT is the dependency's limit), the real
server, and KEDA and the HPA emulated with the simulator's own KEDA and HPA maths, calling the
server over gRPC as KEDA does (GetMetricSpec, GetMetrics, IsActive every polling interval) and
starting and stopping worker processes (SIGTERM, then the worker drains): scaler/demo/keda_loop.py,
the emulator scripts/demo runs too.

A backlog of 360 jobs, then 6 jobs/s: the scaler would like about 5 workers to drain it within
``targetDrainTime``, but PostgreSQL allows 6 connections to the role and each worker holds 2,
so 3 is the ceiling.

Asserts: every job starts within the target age; never more worker processes than the
ceiling; PostgreSQL never refused a connection; every job ran exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
import redis.asyncio as aioredis

from scaler.demo.keda_loop import EmulatedKeda
from scaler.demo.processes import ProcessGroup, WorkerFleet
from scaler.generated import externalscaler_pb2_grpc as pb_grpc
from scaler.server import ServerConfig, running_server
from scaler.simulate.scenario import Hpa, Keda

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECTION_LIMIT = 6
PER_WORKER = 2
CEILING = CONNECTION_LIMIT // PER_WORKER
JOB_SECONDS = 0.4
BACKLOG = 360
RATE = 6.0
FEED_SECONDS = 40.0
TARGET_AGE = 45.0
KEDA = Keda(polling_interval=2.0, cooldown_period=10.0, min_replica_count=0, max_replica_count=10)
HPA = Hpa(sync_period=3.0, scale_down_stabilization=15.0)


@pytest.fixture(scope="module")
def postgres_role() -> Iterator[str]:
    """A throwaway role with CONNECTION LIMIT; yields its DSN. Fails, never skips, without
    PostgreSQL (scripts/services starts it)."""
    admin_url = os.environ.get("POSTGRES_URL", DEFAULT_POSTGRES_URL)
    role = f"qas_loop_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        pytest.fail(
            f"PostgreSQL is not reachable at POSTGRES_URL ({error}). Start it (scripts/services "
            "does) or point POSTGRES_URL at one; integration tests never skip.",
            pytrace=False,
        )
    with admin:
        admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {CONNECTION_LIMIT}")
        try:
            base = admin_url.rsplit("@", 1)[1]
            yield f"postgresql://{role}@{base}"
        finally:
            admin.execute(f"DROP ROLE {role}")


async def _produce(client: aioredis.Redis, queue: str) -> int:
    """The backlog at once, then a steady rate; returns how many jobs were enqueued."""

    def job(number: int) -> str:
        return json.dumps({"id": number, "enqueued_at": time.time(), "seconds": JOB_SECONDS})

    await client.lpush(queue, *[job(n) for n in range(BACKLOG)])
    sent = BACKLOG
    started = time.monotonic()
    while time.monotonic() - started < FEED_SECONDS:
        due = BACKLOG + int((time.monotonic() - started) * RATE)
        if due > sent:
            await client.lpush(queue, *[job(n) for n in range(sent, due)])
            sent = due
        await asyncio.sleep(0.05)
    return sent


@pytest.mark.timeout(150)
async def test_real_scaling_loop_against_postgres(redis_url: str, postgres_role: str) -> None:
    queue = f"loop-{uuid.uuid4().hex[:8]}"
    metadata = {
        "scalerAddress": "queue-age-scaler:6000",
        "url": redis_url,
        "queue": queue,
        "format": "list",
        "timestampField": "enqueued_at",
        "targetAge": f"{TARGET_AGE:g}s",
        "targetDrainTime": "20s",
        "jobDuration": f"{JOB_SECONDS}s",
        "workerConcurrency": str(PER_WORKER),
        "dependencies": f"postgres={CONNECTION_LIMIT}/{PER_WORKER}",
        "maxWorkers": str(KEDA.max_replica_count),
        "sampleInterval": "500ms",
        "rateWindow": "10s",
    }
    client = aioredis.Redis.from_url(redis_url)
    worker = [sys.executable, "-m", "tests.integration.loop_worker", redis_url, queue,
              postgres_role, str(PER_WORKER)]  # fmt: skip
    group = ProcessGroup()
    fleet = WorkerFleet(worker, group, cwd=ROOT)
    config = ServerConfig(host="127.0.0.1", port=0, metrics_port=None, grace=2.0)
    done = asyncio.Event()
    try:
        async with (
            running_server(config) as server,
            grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
        ):
            keda = EmulatedKeda(pb_grpc.ExternalScalerStub(channel), metadata, fleet, KEDA, HPA,
                                namespace="loop")  # fmt: skip
            emulating = asyncio.create_task(keda.run(done))
            sent = await _produce(client, queue)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and await client.hlen(f"{queue}:runs") < sent:
                await asyncio.sleep(0.5)
            # quiet: KEDA takes the fleet to zero after the cooldown, each worker drains first
            while time.monotonic() < deadline + 25 and fleet.alive:
                await asyncio.sleep(0.5)
            done.set()
            await emulating
        log = keda.log
        runs = {int(k): int(v) for k, v in (await client.hgetall(f"{queue}:runs")).items()}
        waits = [float(v) for v in (await client.hgetall(f"{queue}:waits")).values()]
        refused = [str(r) for r in await client.lrange(f"{queue}:refused", 0, -1)]
    finally:
        fleet.stop()
        group.kill()
        await client.delete(queue, f"{queue}:runs", f"{queue}:waits", f"{queue}:refused")
        await client.aclose()

    assert keda.errors == [], keda.errors
    assert refused == [], f"PostgreSQL refused connections: {refused[:3]}"
    assert fleet.most_alive <= CEILING, log
    assert fleet.most_alive == CEILING, (
        f"the backlog should have taken the fleet to the ceiling: {log}"
    )
    lost = [n for n in range(sent) if n not in runs]
    twice = {n: c for n, c in runs.items() if c != 1}
    assert not lost and not twice, f"lost {lost[:10]}, ran more than once {twice}"
    assert len(runs) == sent
    assert max(waits) <= TARGET_AGE, f"the oldest job waited {max(waits):.1f} s: {log}"
    assert fleet.alive == 0, f"KEDA should have scaled to zero after the cooldown: {log}"
