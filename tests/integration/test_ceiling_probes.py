"""The dependency probes against real servers: PostgreSQL and MariaDB accounts whose sessions
come and go, a private Redis, and a local HTTP API sending rate-limit headers. Each live ceiling
follows the dependency within one probe interval, both ways."""

from __future__ import annotations

import asyncio
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scaler.ceilings.headroom import FigureSource
from scaler.ceilings.limit import dependency_ceiling
from scaler.ceilings.registry import PROBE_TIMEOUT, ProbeRegistry
from scaler.metrics import Metrics
from scaler.spec import parse_metadata
from scaler.trigger_spec import TriggerSpec
from tests.conftest import free_port
from tests.integration.conftest import RedisProcess
from tests.integration.dependencies import (
    MARIADB_PORT,
    MariadbAccounts,
    PostgresAccounts,
    mariadb_accounts,
    postgres_accounts,
    private_mariadb,
    reading_after,
)

pytestmark = pytest.mark.integration

__all__ = ["postgres_accounts"]  # a fixture, used by name

INTERVAL = 0.5
#: a reading asked for after a change comes within one interval, plus the reading's own time
WITHIN = INTERVAL + PROBE_TIMEOUT


def probed(profile_url: str, dependency: str = "db=probe:dep/1") -> TriggerSpec:
    metadata = {
        "url": "redis://127.0.0.1:6379/0",
        "queue": "q",
        "format": "rq",
        "dependencies": dependency,
    }
    return parse_metadata(metadata, {"dep": profile_url})


async def live_ceiling(
    registry: ProbeRegistry, spec: TriggerSpec, moment: float, workers_now: int | None = None
) -> tuple[int | None, str | None, float | None, float | None]:
    """The ceiling from the first reading asked for after ``moment``: workers, note, usable,
    free."""
    figure, _ = await reading_after(registry, spec, "dep", moment, WITHIN)
    ceiling = dependency_ceiling(spec.dependencies[0], figure, workers_now)
    assert ceiling.source is FigureSource.LIVE, ceiling
    assert figure.reading is not None
    return ceiling.workers, ceiling.note, figure.reading.usable, figure.reading.free


async def test_postgres_ceiling_follows_other_roles_sessions(
    postgres_accounts: PostgresAccounts,
) -> None:
    accounts = postgres_accounts
    registry = ProbeRegistry(Metrics(), interval=INTERVAL)
    spec = probed(accounts.url(accounts.workers))
    try:
        # the role's CONNECTION LIMIT 10 is the smallest: database 12, server ~100
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (10, 10, 10)
        assert note == "live: 10 slots, 10 free"

        # the workers' own sessions are theirs to keep: the ceiling stays, fewer are free
        accounts.open(accounts.workers, 3)
        workers, _, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (10, 10, 7)

        # another role takes 5 of the database's 12: 7 left for the workers' role
        others = accounts.open(accounts.other, 5)
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (7, 7, 4)
        assert note == "live: 7 slots, 4 free"

        accounts.close(others)
        workers, _, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (10, 10, 7)
    finally:
        await registry.aclose()


async def test_postgres_ceiling_per_worker_and_fallback_when_the_server_refuses(
    postgres_accounts: PostgresAccounts,
) -> None:
    accounts = postgres_accounts
    registry = ProbeRegistry(Metrics(), interval=INTERVAL)
    spec = probed(accounts.url(accounts.workers), "db=probe:dep|4/3")
    try:
        workers, _, _, _ = await live_ceiling(registry, spec, time.monotonic())
        assert workers == 3  # floor(10 slots / 3 per worker)
        accounts.admin.execute(f"ALTER ROLE {accounts.workers} NOLOGIN")
        moment = time.monotonic()
        while True:  # the next attempt fails: the last good reading stands, and says so
            figure = (await registry.figures(spec))["dep"]
            if figure.error is not None:
                break
            assert time.monotonic() - moment < WITHIN
            await asyncio.sleep(0.05)
        assert "not permitted to log in" in figure.error
        ceiling = dependency_ceiling(spec.dependencies[0], figure, 2)
        assert (ceiling.workers, ceiling.source) == (3, FigureSource.LAST_GOOD)
        assert ceiling.note is not None and "probe failing" in ceiling.note
    finally:
        await registry.aclose()


@pytest.fixture
def mariadb() -> Iterator[MariadbAccounts]:
    yield from mariadb_accounts(MARIADB_PORT, user_limit=6)


async def test_mariadb_ceiling_follows_the_users_limit_and_sessions(
    mariadb: MariadbAccounts,
) -> None:
    registry = ProbeRegistry(Metrics(), interval=INTERVAL)
    spec = probed(mariadb.url(mariadb.workers), "db=probe:dep/2")
    try:
        # the account's MAX_USER_CONNECTIONS 6, read without any privilege
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (3, 6, 6)

        own = mariadb.open(mariadb.workers, 2)
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (3, 6, 4)
        assert note == "live: 6 slots, 4 free"

        # another user's sessions do not count against this user's limit
        mariadb.open(mariadb.other, 3)
        workers, _, usable, _ = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable) == (3, 6)

        mariadb.close(own)
        workers, _, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (3, 6, 6)
    finally:
        await registry.aclose()


@pytest.fixture
def small_mariadb(tmp_path: Path) -> Iterator[MariadbAccounts]:
    """A private MariaDB with max_connections 12, and users whose own limit (20) is higher."""
    for port in private_mariadb(tmp_path, free_port(), max_connections=12):
        yield from mariadb_accounts(port, user_limit=20)


async def test_mariadb_ceiling_follows_other_users_threads(
    small_mariadb: MariadbAccounts,
) -> None:
    accounts = small_mariadb
    registry = ProbeRegistry(Metrics(), interval=INTERVAL)
    spec = probed(accounts.url(accounts.workers), "db=probe:dep/1")
    try:
        # 12 - the test's own root connection: 11 for the workers' user
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (11, 11, 11)
        assert note == "live: 11 slots, 11 free"

        accounts.open(accounts.workers, 2)
        others = accounts.open(accounts.other, 4)
        workers, _, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (7, 7, 5)

        accounts.close(others)
        workers, _, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (11, 11, 9)
    finally:
        await registry.aclose()


async def test_redis_ceiling_counts_free_clients_and_the_workers_that_run(
    own_redis: RedisProcess,
) -> None:
    admin = redis.Redis(port=own_redis.port)
    admin.config_set("maxclients", 20)
    registry = ProbeRegistry(Metrics(), interval=INTERVAL)
    spec = probed(own_redis.url, "cache=probe:dep/2")
    try:
        # 20 - the admin connection = 19 free; 4 workers that hold their 8 keep them
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic(), 4)
        assert (usable, free) == (None, 19)
        assert workers == 4 + 9
        assert note == "live: 19 free slots"

        clients = [redis.Redis(port=own_redis.port) for _ in range(6)]
        for client in clients:
            client.ping()
        workers, _, _, free = await live_ceiling(registry, spec, time.monotonic(), 4)
        assert (workers, free) == (4 + 6, 13)

        for client in clients:
            client.close()
        workers, _, _, free = await live_ceiling(registry, spec, time.monotonic(), 4)
        assert (workers, free) == (4 + 9, 19)
    finally:
        await registry.aclose()
        admin.close()


class RateLimitedApi:
    """A local HTTP endpoint answering with whatever rate-limit headers the test sets."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.status = 200
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(api.status)
                for name, value in api.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/quota"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api() -> Iterator[RateLimitedApi]:
    server = RateLimitedApi()
    yield server
    server.stop()


async def test_http_ceiling_follows_the_ratelimit_fields(api: RateLimitedApi) -> None:
    registry = ProbeRegistry(Metrics(), interval=INTERVAL)
    spec = probed(api.url, "payments=probe:dep/0.5")
    try:
        # 100 requests per 60 s: 1.67/s at most, whatever is left
        api.headers = {
            "RateLimit-Policy": '"default";q=100;w=60',
            "RateLimit": '"default";r=90;t=30',
        }
        workers, note, usable, _ = await live_ceiling(registry, spec, time.monotonic())
        assert usable == pytest.approx(100 / 60)
        assert workers == 3  # floor(1.67 / 0.5)
        assert note == "live: 1.67 requests/s"

        # another client spent most of the window's quota: 6 left for 20 s
        api.headers = {
            "RateLimit-Policy": '"default";q=100;w=60',
            "RateLimit": '"default";r=6;t=20',
        }
        workers, _, usable, _ = await live_ceiling(registry, spec, time.monotonic())
        assert workers == 0
        assert usable == pytest.approx(0.3)

        # X-RateLimit-* with a Unix-time reset, as GitHub sends it
        reset = int(time.time()) + 20
        api.headers = {
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "40",
            "X-RateLimit-Reset": str(reset),
        }
        workers, _, usable, _ = await live_ceiling(registry, spec, time.monotonic())
        assert usable is not None and 40 / 20 <= usable <= 40 / (20 - 1 - WITHIN)
        assert workers == int(usable / 0.5)

        # no header: the probe fails and says so; the last good reading stands meanwhile
        api.headers = {}
        moment = time.monotonic()
        while (figure := (await registry.figures(spec))["dep"]).error is None:
            assert time.monotonic() - moment < WITHIN
            await asyncio.sleep(0.05)
        assert figure.error is not None and "no rate-limit header" in figure.error
        ceiling = dependency_ceiling(spec.dependencies[0], figure, 5)
        assert (ceiling.source, ceiling.workers) == (FigureSource.LAST_GOOD, workers)
    finally:
        await registry.aclose()
