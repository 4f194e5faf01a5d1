"""The PgBouncer probe against a real PgBouncer (a private one on a free port, in front of the
local PostgreSQL): the pool's ceiling follows other users' busy servers and shows waiting
clients, within one probe interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from scaler.ceilings.registry import ProbeRegistry
from scaler.metrics import Metrics
from tests.conftest import free_port
from tests.integration.dependencies import PostgresAccounts, postgres_accounts, private_pgbouncer
from tests.integration.test_ceiling_probes import live_ceiling, probed

pytestmark = pytest.mark.integration

__all__ = ["postgres_accounts"]  # a fixture, used by name


@pytest.fixture
def bouncer(postgres_accounts: PostgresAccounts) -> Iterator[str]:
    yield from private_pgbouncer(postgres_accounts, free_port())


def through(bouncer: str, role: str) -> str:
    """The URL a client of ``role`` connects to the pooled database with."""
    _, _, rest = bouncer.partition("@")
    return f"postgresql://{role}@{rest}"


async def test_pgbouncer_ceiling_follows_the_pool_and_other_users(
    postgres_accounts: PostgresAccounts, bouncer: str
) -> None:
    accounts = postgres_accounts
    registry = ProbeRegistry(Metrics(), interval=0.5)
    spec = probed(bouncer, "db=probe:dep/1")
    clients: list[psycopg.Connection[tuple[object, ...]]] = []

    def connect(role: str, count: int) -> list[psycopg.Connection[tuple[object, ...]]]:
        opened = [psycopg.connect(through(bouncer, role), autocommit=True) for _ in range(count)]
        for client in opened:
            client.execute("SELECT 1")  # session pooling: the client now holds a server
        clients.extend(opened)
        return opened

    try:
        # pool_size 4 is the smallest (max_db_connections 6)
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (4, 4, 4)
        assert note == "live: 4 slots, 4 free"

        connect(accounts.workers, 2)
        workers, _, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (4, 4, 2)

        # another user's pool keeps 3 of the database's 6 server connections busy
        others = connect(accounts.other, 3)
        workers, note, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (3, 3, 1)

        # the pool is full: a fourth client of the workers waits in PgBouncer
        connect(accounts.workers, 1)
        waiting = threading.Thread(target=connect, args=(accounts.workers, 1), daemon=True)
        waiting.start()
        moment = time.monotonic()
        while True:
            workers, note, usable, free = await live_ceiling(registry, spec, moment)
            figure = (await registry.figures(spec))["dep"]
            assert figure.reading is not None
            if "1 clients waiting" in figure.reading.detail:
                break
            assert time.monotonic() - moment < 10, figure
        assert (workers, usable, free) == (3, 3, 0)
        assert "3 active, 1 clients waiting" in figure.reading.detail

        # the other user leaves: its idle servers are PgBouncer's to close for this pool, so the
        # waiting client gets one and the ceiling is the pool's size again
        for client in others:
            client.close()
        waiting.join(timeout=20)
        assert not waiting.is_alive(), "the waiting client was never served"
        workers, _, usable, free = await live_ceiling(registry, spec, time.monotonic())
        assert (workers, usable, free) == (4, 4, 0)
    finally:
        await registry.aclose()
        for client in clients:
            client.close()
