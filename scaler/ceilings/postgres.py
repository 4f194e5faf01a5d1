"""PostgreSQL headroom: the connections the workers' role may hold now.

The probe logs in as the profile's role (the workers' role) and reads, in one query:
``max_connections`` less the reserved slots (``superuser_reserved_connections``, and
``reserved_connections`` on 16+) less the client sessions of *other* roles; the role's own
``CONNECTION LIMIT`` (``rolconnlimit``); the database's (``datconnlimit``) less the sessions other
roles hold in it. The smallest is what the role may hold in all (``usable``); less the role's own
sessions (the probe's left out), what is ``free``.

``pg_stat_activity`` shows every session's role and database to every role, but the kind of
process (``backend_type``) of other roles' only to members of ``pg_read_all_stats`` (or
``pg_monitor``). Without it, other roles' processes of unknown kind are counted as sessions: a
parallel query's workers or a replication connection then lower the ceiling a little (never
raise it). Grant ``pg_read_all_stats`` to the role for exact counts; nothing more is needed.
"""

from __future__ import annotations

import psycopg

from scaler.ceilings.headroom import Headroom, ProbeFailed, probe_failed

QUERY = """
SELECT current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int,
       coalesce(current_setting('reserved_connections', true)::int, 0),
       (SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user),
       (SELECT datconnlimit FROM pg_database WHERE datname = current_database()),
       count(*) FILTER (WHERE usename IS DISTINCT FROM current_user),
       count(*) FILTER (WHERE usename = current_user AND pid <> pg_backend_pid()),
       count(*) FILTER (WHERE usename IS DISTINCT FROM current_user
                          AND datname = current_database()),
       current_user
FROM pg_stat_activity
WHERE usename IS NOT NULL AND coalesce(backend_type, 'client backend') = 'client backend'
"""


async def read(url: str, timeout: float) -> Headroom:
    """Read the headroom of the PostgreSQL server ``url`` names, as its role sees it."""
    try:
        async with await psycopg.AsyncConnection.connect(
            url,
            autocommit=True,
            connect_timeout=max(1, round(timeout)),
            application_name="queue-age-scaler probe",
        ) as connection:
            row = await (await connection.execute(QUERY)).fetchone()
    except psycopg.Error as error:
        raise probe_failed("postgres", _first_line(error), url) from None
    if row is None:  # an aggregate always gives a row
        raise ProbeFailed("postgres: pg_stat_activity gave no row")
    return headroom(*row)


def headroom(
    max_connections: int,
    superuser_reserved: int,
    reserved: int,
    role_limit: int | None,
    database_limit: int | None,
    other_roles: int,
    own: int,
    other_roles_in_database: int,
    role: str,
) -> Headroom:
    """The figures of one reading, as :func:`read` gets them, made into a :class:`Headroom`."""
    server = max_connections - superuser_reserved - reserved - other_roles
    limits = [server]
    detail = (
        f"max_connections {max_connections} - {superuser_reserved + reserved} reserved - "
        f"{other_roles} sessions of other roles = {server}"
    )
    if role_limit is not None and role_limit >= 0:
        limits.append(role_limit)
        detail += f"; role {role} CONNECTION LIMIT {role_limit}"
    if database_limit is not None and database_limit >= 0:
        in_database = database_limit - other_roles_in_database
        limits.append(in_database)
        detail += (
            f"; database CONNECTION LIMIT {database_limit} - {other_roles_in_database} "
            f"sessions of other roles = {in_database}"
        )
    usable = max(0, min(limits))
    detail += f"; role {role} holds {own}"
    return Headroom(free=max(0, usable - own), usable=usable, detail=detail)


def _first_line(error: Exception) -> str:
    """A driver's message without its URL (psycopg does not repeat the password) or hints."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
