"""Redis as a dependency: ``maxclients`` less ``connected_clients`` (``INFO clients``).

Redis does not tell one client's connections from another's, so the figure is ``free`` only:
the workers' own connections are among ``connected_clients``, and are counted back from the
workers that run (see ``scaler.ceilings.limit``). ``INFO`` needs the ``@dangerous``-free
``info`` command only; ``CONFIG GET maxclients`` is asked where ``INFO`` does not show it
(before Redis 7).
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from scaler.ceilings.headroom import Headroom, probe_failed


async def read(url: str, timeout: float) -> Headroom:
    """Read the free client slots of the Redis server ``url`` names."""
    try:
        client = aioredis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            single_connection_client=True,
        )
    except ValueError as error:
        raise probe_failed("redis", str(error), url) from None
    try:
        info = await client.info("clients")
        maxclients = info.get("maxclients")
        if maxclients is None:
            maxclients = (await client.config_get("maxclients"))["maxclients"]
        connected = int(info["connected_clients"])
        limit = int(str(maxclients))
    except (RedisError, KeyError) as error:
        raise probe_failed("redis", str(error) or type(error).__name__, url) from None
    finally:
        await client.aclose()
    return headroom(limit, connected)


def headroom(maxclients: int, connected_clients: int) -> Headroom:
    """One reading; the probe's own connection, closed at once, is not counted as taken."""
    taken = max(0, connected_clients - 1)
    return Headroom(
        free=max(0, maxclients - taken),
        usable=None,
        detail=f"maxclients {maxclients} - {taken} connected clients",
    )
