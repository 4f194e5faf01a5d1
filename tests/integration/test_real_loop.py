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

Then two pools, two ScaledObjects whose workers hold connections through ONE role with a
CONNECTION LIMIT, each trigger naming the whole limit (``postgres=8/2``): a bulk queue whose
backlog asks for every worker the role allows, and a mail queue whose traffic starts while that
backlog drains. The server splits the shared budget between them: PostgreSQL never refuses a
connection, the mail pool gets workers while the bulk pool still has a backlog, and every job of
both queues starts within its target age.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
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
    """A throwaway role with CONNECTION LIMIT; yields its DSN."""
    with _role(CONNECTION_LIMIT) as (dsn, _):
        yield dsn


@contextlib.contextmanager
def _role(limit: int) -> Iterator[tuple[str, str]]:
    """A throwaway role with CONNECTION LIMIT ``limit``: its DSN and its name. Fails, never
    skips, without PostgreSQL (scripts/services starts it)."""
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
        admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT {limit}")
        try:
            base = admin_url.rsplit("@", 1)[1]
            yield f"postgresql://{role}@{base}", role
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
    # sampleInterval 500ms: below serve's default floor
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=None, grace=2.0, min_sample_interval=0.1
    )
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


# -- two pools, one role ----------------------------------------------------------------------

SHARED_LIMIT = 8  # connections the role may hold: 4 workers of 2 in all
BULK_BACKLOG = 450  # more than 20 s of all 4 workers: the bulk pool alone asks for them all
BULK_RATE = 2.0
MAIL_RATE = 2.0  # one worker (5 jobs/s) keeps up: the mail pool needs 1
MAIL_FROM = 10.0  # seconds after the backlog: while it drains
FEED_UNTIL = 45.0
SHARED_TARGET_AGE = 60.0
#: the HPAs keep a recommendation 6 s: a pool that shrinks gives its slots back soon
SHARED_HPA = Hpa(sync_period=3.0, scale_down_stabilization=6.0)


@dataclass
class _Pool:
    queue: str
    fleet: WorkerFleet
    keda: EmulatedKeda
    #: enqueue time of each job by id
    enqueued: dict[int, float]


def _pool_metadata(redis_url: str, queue: str) -> dict[str, str]:
    return {
        "scalerAddress": "queue-age-scaler:6000",
        "url": redis_url,
        "queue": queue,
        "format": "list",
        "timestampField": "enqueued_at",
        "targetAge": f"{SHARED_TARGET_AGE:g}s",
        "targetDrainTime": "20s",
        "jobDuration": f"{JOB_SECONDS}s",
        "workerConcurrency": str(PER_WORKER),
        # each ScaledObject names the whole limit; the scaler shares it between them
        "dependencies": f"postgres={SHARED_LIMIT}/{PER_WORKER}",
        "sampleInterval": "500ms",
        "rateWindow": "10s",
    }


async def _feed(client: aioredis.Redis, pool: _Pool, backlog: int, rate: float, start: float,
                began: float) -> None:  # fmt: skip
    """``backlog`` jobs at ``start`` seconds after ``began``, then ``rate`` a second until
    FEED_UNTIL."""

    def job(number: int) -> str:
        pool.enqueued[number] = now = time.time()
        return json.dumps({"id": number, "enqueued_at": now, "seconds": JOB_SECONDS})

    await asyncio.sleep(max(0.0, began + start - time.monotonic()))
    if backlog:
        await client.lpush(pool.queue, *[job(n) for n in range(backlog)])
    sent, fed_from = backlog, time.monotonic()
    while time.monotonic() - began < FEED_UNTIL:
        due = backlog + int((time.monotonic() - fed_from) * rate)
        if due > sent:
            await client.lpush(pool.queue, *[job(n) for n in range(sent, due)])
            sent = due
        await asyncio.sleep(0.05)


async def _watch_connections(role: str, pools: list[_Pool], stop: asyncio.Event,
                             seen: list[tuple[int, int]]) -> None:  # fmt: skip
    """Every 200 ms: the role's sessions as PostgreSQL counts them, and the worker processes
    alive in all the pools."""
    admin_url = os.environ.get("POSTGRES_URL", DEFAULT_POSTGRES_URL)
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        while not stop.is_set():
            row = await (
                await admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (role,)
                )
            ).fetchone()
            seen.append((int(row[0]) if row else 0, sum(p.fleet.alive for p in pools)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)


@pytest.mark.timeout(180)
async def test_two_pools_share_one_postgres_role(redis_url: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    client = aioredis.Redis.from_url(redis_url)
    group = ProcessGroup()
    # the emulated HPA keeps a recommendation 6 s and KEDA's cooldown is 10 s: the server is
    # told so (serve --budget-hold, --budget-cooldown), with a margin for the polls
    config = ServerConfig(
        host="127.0.0.1", port=0, metrics_port=None, grace=2.0, min_sample_interval=0.1,
        budget_hold=SHARED_HPA.scale_down_stabilization + 3,
        budget_cooldown=KEDA.cooldown_period + 3,
    )  # fmt: skip
    stop, done = asyncio.Event(), asyncio.Event()
    seen: list[tuple[int, int]] = []
    pools: list[_Pool] = []
    with _role(SHARED_LIMIT) as (dsn, role):
        try:
            async with (
                running_server(config) as server,
                grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
            ):
                stub = pb_grpc.ExternalScalerStub(channel)
                for name in ("bulk", "mail"):
                    queue = f"loop-{name}-{suffix}"
                    worker = [sys.executable, "-m", "tests.integration.loop_worker", redis_url,
                              queue, dsn, str(PER_WORKER)]  # fmt: skip
                    fleet = WorkerFleet(worker, group, cwd=ROOT)
                    keda = EmulatedKeda(stub, _pool_metadata(redis_url, queue), fleet, KEDA,
                                        SHARED_HPA, name=name, namespace="loop")  # fmt: skip
                    pools.append(_Pool(queue, fleet, keda, {}))
                bulk, mail = pools
                watching = asyncio.create_task(_watch_connections(role, pools, stop, seen))
                emulating = [asyncio.create_task(p.keda.run(done)) for p in pools]
                began = time.monotonic()
                await asyncio.gather(
                    _feed(client, bulk, BULK_BACKLOG, BULK_RATE, 0.0, began),
                    _feed(client, mail, 0, MAIL_RATE, MAIL_FROM, began),
                )
                deadline = time.monotonic() + 60
                for pool in pools:
                    while time.monotonic() < deadline and await client.hlen(
                        f"{pool.queue}:runs"
                    ) < len(pool.enqueued):
                        await asyncio.sleep(0.5)
                done.set()
                await asyncio.gather(*emulating)
                stop.set()
                await watching
            results = {}
            for pool in pools:
                runs = await client.hgetall(f"{pool.queue}:runs")
                waits = {
                    int(k): float(v)
                    for k, v in (await client.hgetall(f"{pool.queue}:waits")).items()
                }
                refused = await client.lrange(f"{pool.queue}:refused", 0, -1)
                results[pool.queue] = (runs, waits, refused)
        finally:
            for pool in pools:
                pool.fleet.stop()
            group.kill()
            keys = [f"{p.queue}{end}" for p in pools for end in ("", ":runs", ":waits", ":refused")]
            if keys:
                await client.delete(*keys)
            await client.aclose()

    logs = {p.queue: p.keda.log for p in pools}
    for pool in pools:
        runs, waits, refused = results[pool.queue]
        assert pool.keda.errors == [], pool.keda.errors
        assert refused == [], f"PostgreSQL refused {pool.queue}'s connections: {refused[:3]}"
        assert len(runs) == len(pool.enqueued), f"{pool.queue}: not every job ran: {logs}"
        worst = max(waits.values())
        assert worst <= SHARED_TARGET_AGE, f"{pool.queue}: a job waited {worst:.1f} s: {logs}"
    # the role's sessions (PostgreSQL's own count) and the workers of both pools together
    assert max(sessions for sessions, _ in seen) <= SHARED_LIMIT, seen
    assert max(workers for _, workers in seen) <= SHARED_LIMIT // PER_WORKER, logs
    # the backlog took the bulk pool to the whole budget, and the mail pool got a worker
    # while the bulk pool still had a backlog: its first job started before the bulk's last
    bulk_waits, mail_waits = results[bulk.queue][1], results[mail.queue][1]
    assert bulk.fleet.most_alive == SHARED_LIMIT // PER_WORKER, logs
    bulk_last = max(bulk.enqueued[n] + w for n, w in bulk_waits.items() if n < BULK_BACKLOG)
    mail_first = min(mail.enqueued[n] + w for n, w in mail_waits.items())
    assert mail_first < bulk_last, f"the mail pool waited for the bulk backlog to drain: {logs}"
