"""MariaDB and MySQL headroom: the connections the workers' user may open now.

The probe logs in as the profile's user (the workers' user) and reads ``max_connections``,
``max_user_connections`` (global), the account's own ``MAX_USER_CONNECTIONS`` (from
``SHOW CREATE USER CURRENT_USER``, which every account may ask of itself; else from
``mysql.user`` where readable; skipped otherwise), ``Threads_connected`` (every
client thread) and the user's own threads in ``information_schema.PROCESSLIST`` (a user without
the ``PROCESS`` privilege sees exactly its own, which is what is counted). Others hold
``Threads_connected`` less the user's threads; ``usable`` is the smallest of ``max_connections``
less those, and the two per-user limits. No privilege is needed. PyMySQL (pure Python) runs in
a thread.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import unquote, urlsplit

import pymysql

from scaler.ceilings.headroom import Headroom, probe_failed

DEFAULT_PORT = 3306
_LIMIT_CLAUSE = re.compile(r"MAX_USER_CONNECTIONS\s+(-?[0-9]+)", re.IGNORECASE)


async def read(url: str, timeout: float) -> Headroom:
    """Read the headroom of the MariaDB/MySQL server ``url`` names, as its user sees it."""
    return await asyncio.to_thread(_read, url, timeout)


def _connect_args(url: str, timeout: float) -> dict[str, Any]:
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or DEFAULT_PORT,
        "user": unquote(parts.username or "root"),
        "password": unquote(parts.password or ""),
        "database": unquote(parts.path.lstrip("/")) or None,
        "connect_timeout": timeout,
        "read_timeout": timeout,
        "write_timeout": timeout,
    }


def _read(url: str, timeout: float) -> Headroom:
    try:
        connection = pymysql.connect(**_connect_args(url, timeout))
    except (pymysql.MySQLError, ValueError) as error:
        raise probe_failed("mysql", _message(error), url) from None
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT @@max_connections, @@max_user_connections, USER(), CURRENT_USER(), "
                "CONNECTION_ID()"
            )
            max_connections, max_user, login, account, me = cursor.fetchone()
            cursor.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
            connected = int(cursor.fetchone()[1])
            user = str(login).rsplit("@", 1)[0]
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s AND ID <> %s",
                (user, me),
            )
            own = int(cursor.fetchone()[0])
            account_limit = _account_limit(cursor, str(account))
    except pymysql.MySQLError as error:
        raise probe_failed("mysql", _message(error), url) from None
    finally:
        connection.close()
    return headroom(int(max_connections), int(max_user), account_limit, connected, own, user)


def _account_limit(cursor: Any, account: str) -> int | None:
    """The account's ``MAX_USER_CONNECTIONS``, or None where the server does not tell it."""
    try:
        cursor.execute("SHOW CREATE USER CURRENT_USER")
        row = cursor.fetchone()
    except pymysql.MySQLError:  # an old server: mysql.user, where readable
        row = None
    if row is not None:
        match = _LIMIT_CLAUSE.search(str(row[0]))
        return int(match[1]) if match else 0
    user, _, host = account.rpartition("@")
    try:
        cursor.execute(
            "SELECT max_user_connections FROM mysql.user WHERE User = %s AND Host = %s",
            (user, host),
        )
    except pymysql.MySQLError:  # no SELECT on mysql.user: the global limits still hold
        return None
    row = cursor.fetchone()
    return None if row is None else int(row[0])


def headroom(
    max_connections: int,
    max_user_connections: int,
    account_limit: int | None,
    threads_connected: int,
    own: int,
    user: str,
) -> Headroom:
    """The figures of one reading made into a :class:`Headroom` (the probe's thread is neither
    the workers' nor another client's, and is left out)."""
    others = max(0, threads_connected - own - 1)
    server = max_connections - others
    limits = [server]
    detail = f"max_connections {max_connections} - {others} threads of other users = {server}"
    if max_user_connections > 0:
        limits.append(max_user_connections)
        detail += f"; max_user_connections {max_user_connections}"
    if account_limit is not None and account_limit > 0:
        limits.append(account_limit)
        detail += f"; user {user} MAX_USER_CONNECTIONS {account_limit}"
    usable = max(0, min(limits))
    detail += f"; user {user} holds {own}"
    return Headroom(free=max(0, usable - own), usable=usable, detail=detail)


def _message(error: Exception) -> str:
    args = error.args
    return str(args[1]) if len(args) > 1 else str(error)
