"""Throwaway PostgreSQL and MariaDB accounts for the dependency probe tests: unique names,
dropped afterwards, the servers' other clients left alone."""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pymysql
import pytest

from scaler.ceilings.headroom import ProbeFigure
from scaler.ceilings.registry import ProbeRegistry
from scaler.trigger_spec import TriggerSpec

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
MARIADB_HOST, MARIADB_PORT = "127.0.0.1", 3306


@dataclass
class PostgresAccounts:
    """A workers' role with CONNECTION LIMIT, another role, and a database with one of its own."""

    admin: psycopg.Connection[tuple[object, ...]]
    host: str
    workers: str
    other: str
    database: str
    sessions: list[psycopg.Connection[tuple[object, ...]]] = field(default_factory=list)

    def url(self, role: str) -> str:
        return f"postgresql://{role}@{self.host}/{self.database}"

    def open(self, role: str, count: int) -> list[psycopg.Connection[tuple[object, ...]]]:
        opened = [psycopg.connect(self.url(role), autocommit=True) for _ in range(count)]
        self.sessions += opened
        return opened

    def close(self, sessions: list[psycopg.Connection[tuple[object, ...]]]) -> None:
        for session in sessions:
            session.close()
            self.sessions.remove(session)


@pytest.fixture
def postgres_accounts() -> Iterator[PostgresAccounts]:
    admin_url = os.environ.get("POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as error:
        pytest.fail(
            f"PostgreSQL is not reachable at POSTGRES_URL ({error}). Start it (scripts/services "
            "does) or point POSTGRES_URL at one; integration tests never skip.",
            pytrace=False,
        )
    token = uuid.uuid4().hex[:8]
    accounts = PostgresAccounts(
        admin,
        admin_url.rsplit("@", 1)[1].split("/", 1)[0],
        f"qas_w_{token}",
        f"qas_o_{token}",
        f"qas_db_{token}",
    )
    with admin:
        # the workers' role has no grant at all: the probe needs none
        admin.execute(f"CREATE ROLE {accounts.workers} LOGIN CONNECTION LIMIT 10")
        admin.execute(f"CREATE ROLE {accounts.other} LOGIN")
        admin.execute(f"CREATE DATABASE {accounts.database} CONNECTION LIMIT 12")
        try:
            yield accounts
        finally:
            accounts.close(list(accounts.sessions))
            admin.execute(f"DROP DATABASE IF EXISTS {accounts.database} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {accounts.workers}")
            admin.execute(f"DROP ROLE IF EXISTS {accounts.other}")


def mariadb_admin(
    port: int = MARIADB_PORT,
) -> pymysql.connections.Connection[pymysql.cursors.Cursor]:
    try:
        return pymysql.connect(host=MARIADB_HOST, port=port, user="root", autocommit=True)
    except pymysql.MySQLError as error:
        pytest.fail(
            f"MariaDB does not answer on {MARIADB_HOST}:{port} as root without a password "
            f"({error}). Start it (scripts/services does); integration tests never skip.",
            pytrace=False,
        )


@dataclass
class MariadbAccounts:
    """A workers' user with MAX_USER_CONNECTIONS and another user, both with password ``pw``."""

    port: int
    workers: str
    other: str
    sessions: list[pymysql.connections.Connection[pymysql.cursors.Cursor]] = field(
        default_factory=list
    )

    def url(self, user: str) -> str:
        return f"mysql://{user}:pw@{MARIADB_HOST}:{self.port}/"

    def open(
        self, user: str, count: int
    ) -> list[pymysql.connections.Connection[pymysql.cursors.Cursor]]:
        opened = [
            pymysql.connect(host=MARIADB_HOST, port=self.port, user=user, password="pw")
            for _ in range(count)
        ]
        self.sessions += opened
        return opened

    def close(self, sessions: list[pymysql.connections.Connection[pymysql.cursors.Cursor]]) -> None:
        for session in sessions:
            session.close()
            self.sessions.remove(session)


def mariadb_accounts(port: int, user_limit: int) -> Iterator[MariadbAccounts]:
    admin = mariadb_admin(port)
    token = uuid.uuid4().hex[:8]
    accounts = MariadbAccounts(port, f"qas_w_{token}", f"qas_o_{token}")
    with admin.cursor() as cursor:
        cursor.execute(
            f"CREATE USER '{accounts.workers}'@'%' IDENTIFIED BY 'pw' "
            f"WITH MAX_USER_CONNECTIONS {user_limit}"
        )
        cursor.execute(f"CREATE USER '{accounts.other}'@'%' IDENTIFIED BY 'pw'")
        try:
            yield accounts
        finally:
            accounts.close(list(accounts.sessions))
            cursor.execute(f"DROP USER IF EXISTS '{accounts.workers}'@'%'")
            cursor.execute(f"DROP USER IF EXISTS '{accounts.other}'@'%'")
    admin.close()


def private_mariadb(workdir: Path, port: int, max_connections: int) -> Iterator[int]:
    """A throwaway mariadbd on ``port`` with a small ``max_connections`` (root without a
    password); yields the port, stops the server and leaves nothing running."""
    path = os.environ.get("PATH", "") + ":/usr/sbin"
    install, server = (
        shutil.which("mariadb-install-db", path=path),
        shutil.which("mariadbd", path=path),
    )
    if install is None or server is None:
        pytest.fail("mariadbd is not installed; scripts/services installs it (mariadb-server)")
    user = getpass.getuser()
    data = workdir / "data"
    subprocess.run(
        [install, "--no-defaults", f"--datadir={data}", f"--user={user}",
         "--auth-root-authentication-method=normal", "--skip-test-db"],
        check=True, capture_output=True,
    )  # fmt: skip
    process = subprocess.Popen(
        [server, "--no-defaults", f"--datadir={data}", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={workdir / 'sock'}", f"--user={user}",
         "--skip-log-bin", f"--max-connections={max_connections}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await_start(
            "mariadbd",
            process,
            lambda: pymysql.connect(host=MARIADB_HOST, port=port, user="root").close(),
            pymysql.MySQLError,
        )
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def await_start(
    name: str,
    process: subprocess.Popen[bytes],
    connect: Callable[[], None],
    refused: type[Exception],
) -> None:
    """Wait up to 30 s until ``connect`` succeeds; fail if the private server exits first."""
    deadline = time.monotonic() + 30
    while True:
        try:
            connect()
            return
        except refused:
            if process.poll() is not None:
                error = process.stderr.read().decode() if process.stderr else ""
                pytest.fail(f"the private {name} exited at start {error}".strip())
            assert time.monotonic() < deadline, f"the private {name} did not start in 30s"
            time.sleep(0.1)


async def reading_after(
    registry: ProbeRegistry, spec: TriggerSpec, probe: str, moment: float, within: float
) -> tuple[ProbeFigure, float]:
    """The first figure of ``probe`` asked for after the monotonic time ``moment`` (so it shows
    what was true then), and how long after ``moment`` it came; fails after ``within`` seconds."""
    while True:
        figure = (await registry.figures(spec))[probe]
        now = time.monotonic()
        if figure.age is not None and now - figure.age > moment:
            return figure, now - moment
        assert now - moment < within, f"no reading of {probe} within {within}s: {figure}"
        await asyncio.sleep(0.05)


def private_pgbouncer(accounts: PostgresAccounts, port: int) -> Iterator[str]:
    """A throwaway PgBouncer on ``port`` in front of the local PostgreSQL, pooling the accounts'
    database (session pooling, pool_size 4, max_db_connections 6), the workers' role a stats
    user of its admin console; yields its URL for the probe and leaves nothing running."""
    binary = shutil.which("pgbouncer", path=os.environ.get("PATH", "") + ":/usr/sbin")
    if binary is None:
        pytest.fail("pgbouncer is not installed; scripts/services installs it (pgbouncer)")
    host, _, pg_port = accounts.host.partition(":")
    with tempfile.TemporaryDirectory(prefix="qas-pgbouncer-") as workdir:
        folder = Path(workdir)
        folder.chmod(0o755)  # read by the unprivileged user PgBouncer runs as under root
        (folder / "users.txt").write_text(
            "".join(f'"{role}" ""\n' for role in (accounts.workers, accounts.other))
        )
        (folder / "pgbouncer.ini").write_text(
            f"[databases]\n{accounts.database} = host={host} port={pg_port or 5432} "
            "pool_size=4 max_db_connections=6\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
            f"stats_users = {accounts.workers}\npool_mode = session\n"
        )
        as_user = ["-u", "postgres"] if os.geteuid() == 0 else []  # it refuses to run as root
        process = subprocess.Popen(
            [binary, *as_user, str(folder / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        url = f"pgbouncer://{accounts.workers}@127.0.0.1:{port}/{accounts.database}"
        try:
            console = f"postgresql://{accounts.workers}@127.0.0.1:{port}/pgbouncer"
            await_start(
                "pgbouncer",
                process,
                lambda: psycopg.connect(console, autocommit=True, connect_timeout=2).close(),
                psycopg.OperationalError,
            )
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)
            if process.stderr is not None:
                process.stderr.close()
