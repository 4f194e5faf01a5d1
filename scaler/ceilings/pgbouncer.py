"""PgBouncer headroom: the server connections the workers' pool may use now.

The profile's URL is ``pgbouncer://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?pool_user=NAME]``: the
probe logs in to PgBouncer's admin console (the virtual database ``pgbouncer``) as ``USER``,
who must be in ``stats_users`` (or ``admin_users``), and reads the pool of ``DATABASE`` that
``pool_user`` (default ``USER``: the workers' own login) uses:

- ``SHOW DATABASES``: the database's ``pool_size`` (PgBouncer shows ``default_pool_size`` where
  none is set) and ``max_connections`` (its ``max_db_connections``; 0: the global one);
- ``SHOW CONFIG``: ``default_pool_size`` and ``max_db_connections`` for a database PgBouncer has
  not listed yet (one served by the ``*`` entry, before its first client), and
  ``max_user_connections``;
- ``SHOW POOLS``: the server connections each pool of the database keeps busy (active, being
  tested or logging in; PgBouncer closes idle ones of another pool to make room), and the clients
  waiting for one (``cl_waiting``).

What the workers may use in all is the smallest of the pool's size, ``max_db_connections`` less
the busy server connections of the database's *other* pools, and ``max_user_connections``: clients
past it wait in PgBouncer rather than run. ``free`` is that less the pool's active server
connections and its waiting clients (waiting clients mean the pool is full).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import psycopg

from scaler.ceilings.headroom import Headroom, ProbeFailed, probe_failed

DEFAULT_PORT = 6432
#: the ``SHOW POOLS`` columns of server connections a pool keeps from others: linked to a client,
#: being tested or logging in (idle ones, ``sv_idle`` and ``sv_used``, PgBouncer closes to make
#: room for another pool of the database when ``max_db_connections`` is reached)
_TAKEN_COLUMNS = ("sv_active", "sv_tested", "sv_login")


@dataclass(frozen=True, slots=True)
class Pool:
    """One row of ``SHOW POOLS``: a (database, user) pair's connections."""

    user: str
    #: server connections it keeps from other pools (see ``_TAKEN_COLUMNS``)
    taken: int
    #: server connections linked to a client now
    active: int
    waiting: int


@dataclass(frozen=True, slots=True)
class Target:
    """What a ``pgbouncer://`` URL names: the admin console to log in to, and the pool."""

    console_url: str
    database: str
    pool_user: str


def target(url: str) -> Target:
    """The admin console's ``postgresql://`` URL, the database and the pool's user of ``url``."""
    parts = urlsplit(url)
    database = unquote(parts.path.lstrip("/"))
    if not database:
        raise ProbeFailed(
            "pgbouncer: the URL names no database; give the pool's, as in "
            "pgbouncer://stats@pgbouncer:6432/orders"
        )
    query = parse_qsl(parts.query)
    pool_user = next((value for key, value in query if key == "pool_user"), None)
    login = unquote(parts.username or "")
    if not (pool_user or login):
        raise ProbeFailed("pgbouncer: the URL names no user; give the admin console's login")
    netloc = parts.netloc if parts.port else f"{parts.netloc}:{DEFAULT_PORT}"
    rest = urlencode([(key, value) for key, value in query if key != "pool_user"])
    console = urlunsplit(("postgresql", netloc, "/pgbouncer", rest, ""))
    return Target(console, database, pool_user or login)


async def read(url: str, timeout: float) -> Headroom:
    """Read the headroom of the pool that ``url`` names from PgBouncer's admin console."""
    where = target(url)
    try:
        async with await psycopg.AsyncConnection.connect(
            where.console_url, autocommit=True, connect_timeout=max(1, round(timeout))
        ) as connection:  # the console speaks the simple query protocol: no parameters
            databases = await _rows(connection, "SHOW DATABASES")
            config = {str(row["key"]): str(row["value"]) for row in await _rows(connection, "SHOW CONFIG")}  # fmt: skip
            pools = await _rows(connection, "SHOW POOLS")
    except psycopg.Error as error:
        text = str(error).strip().splitlines()
        raise probe_failed("pgbouncer", text[0] if text else type(error).__name__, url) from None
    try:
        return headroom_of(where, databases, config, pools)
    except (KeyError, ValueError) as error:
        raise ProbeFailed(f"pgbouncer: unexpected admin console answer ({error!r})") from None


async def _rows(connection: psycopg.AsyncConnection[Any], command: str) -> list[dict[str, Any]]:
    cursor = await connection.execute(command)
    names = [column.name for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in await cursor.fetchall()]


def headroom_of(
    where: Target,
    databases: list[dict[str, Any]],
    config: dict[str, str],
    pools: list[dict[str, Any]],
) -> Headroom:
    """The three answers of one reading made into the pool's figures."""
    row = next((r for r in databases if r["name"] == where.database), None)
    pool_size = int(row["pool_size"]) if row is not None else int(config["default_pool_size"])
    max_db = int(row["max_connections"]) if row is not None else 0
    if max_db <= 0:
        max_db = int(config.get("max_db_connections", "0"))
    of_database = [
        Pool(str(p["user"]), sum(int(p[c]) for c in _TAKEN_COLUMNS), int(p["sv_active"]),
             int(p["cl_waiting"]))
        for p in pools if p["database"] == where.database
    ]  # fmt: skip
    return headroom(
        where.database,
        where.pool_user,
        pool_size,
        max_db,
        int(config.get("max_user_connections", "0")),
        of_database,
    )


def headroom(
    database: str,
    pool_user: str,
    pool_size: int,
    max_db_connections: int,
    max_user_connections: int,
    pools: list[Pool],
) -> Headroom:
    """The pool's figures from PgBouncer's settings and the database's pools (0: no limit)."""
    own = [p for p in pools if p.user == pool_user]
    others = sum(p.taken for p in pools if p.user != pool_user)
    limits = [pool_size]
    detail = f"pool {database}/{pool_user}: pool_size {pool_size}"
    if max_db_connections > 0:
        limits.append(max_db_connections - others)
        detail += (
            f"; max_db_connections {max_db_connections} - {others} busy server connections "
            f"of other users = {max_db_connections - others}"
        )
    if max_user_connections > 0:
        limits.append(max_user_connections)
        detail += f"; max_user_connections {max_user_connections}"
    usable = max(0, min(limits))
    active = sum(p.active for p in own)
    waiting = sum(p.waiting for p in own)
    detail += f"; {active} active, {waiting} clients waiting"
    return Headroom(free=max(0, usable - active - waiting), usable=usable, detail=detail)
