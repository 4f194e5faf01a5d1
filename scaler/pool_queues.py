"""The queues of pool triggers as they stand: the entries that name a queue, and the queues the
broker lists that a glob matches, listed again every :data:`RELIST_EVERY` seconds and held to
the server's cap (--max-pool-queues)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace

from brokers.base import QueueSource
from brokers.connections import Connections
from brokers.registry import list_queues
from scaler.errors import QueueMisconfigured, ResourceExhausted, ScalerError
from scaler.pool_spec import DEFAULT_MAX_POOL_QUEUES, PoolQueue
from scaler.trigger_spec import TriggerSpec

log = logging.getLogger(__name__)

#: a broker's queues are listed again after this many seconds
RELIST_EVERY = 30.0
#: while listing fails, the last good list stands for this long
LAST_GOOD_FOR = 300.0
#: a list nobody asked for this long is forgotten
FORGET_AFTER = 600.0


@dataclass(slots=True)
class _Listed:
    names: tuple[str, ...]
    at: float
    asked: float


class PoolQueues:
    """Resolves pool triggers' queues, listing each broker's (source's) queues at most every
    ``relist_every`` seconds however many pools ask."""

    def __init__(
        self,
        connections: Connections,
        *,
        max_queues: int = DEFAULT_MAX_POOL_QUEUES,
        relist_every: float = RELIST_EVERY,
    ) -> None:
        self._connections = connections
        self._max_queues = max_queues
        self._relist_every = relist_every
        self._lists: dict[QueueSource, _Listed] = {}
        self._pending: dict[QueueSource, asyncio.Task[tuple[str, ...]]] = {}

    async def resolve(self, spec: TriggerSpec) -> tuple[PoolQueue, ...]:
        """``spec``'s pool queues in serving order. Raises the lister's error (UNAVAILABLE and
        the like) where a glob's broker cannot be listed and no list younger than
        :data:`LAST_GOOD_FOR` is kept, ResourceExhausted past the cap and QueueMisconfigured
        where the globs match nothing."""
        pool = spec.pool
        if pool is None:
            raise ValueError("resolve needs a pool trigger's spec (queues)")
        if not pool.has_globs:
            return pool.resolve()
        queues = pool.resolve(await self._listed(spec.source))
        if len(queues) > self._max_queues:
            raise ResourceExhausted(
                f"the queues of pool {pool.text!r} ({spec.source.describe()}) are "
                f"{len(queues)} with the broker's queues its globs match; a pool may have at "
                f"most {self._max_queues} (the scaler's --max-pool-queues): narrow the globs, "
                "or the operator raises the cap"
            )
        if not queues:
            raise QueueMisconfigured(
                f"the globs of pool {pool.text!r} match none of the queues the broker lists "
                f"for {spec.source.describe()}; fix the globs, or name the queues"
            )
        return queues

    async def _listed(self, source: QueueSource) -> tuple[str, ...]:
        key = replace(source, queue="")
        now = time.monotonic()
        self._forget(now)
        listed = self._lists.get(key)
        if listed is not None:
            listed.asked = now
            if now - listed.at < self._relist_every:
                return listed.names
        task = self._pending.get(key)
        if task is None:
            task = self._pending[key] = asyncio.ensure_future(
                list_queues(source, self._connections)
            )
            task.add_done_callback(lambda _: self._pending.pop(key, None))
        try:
            names = await asyncio.shield(task)
        except ScalerError as error:
            if listed is not None and now - listed.at < LAST_GOOD_FOR:
                log.warning("listing the queues of %s failed: %s", source.describe(), error)
                return listed.names
            raise
        self._lists[key] = _Listed(names, time.monotonic(), now)
        return names

    def _forget(self, now: float) -> None:
        for key in [k for k, v in self._lists.items() if now - v.asked > FORGET_AFTER]:
            del self._lists[key]
