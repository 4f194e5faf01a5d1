"""The RabbitMQ management API, read once per vhost per sampling round for every queue in it.

``GET /api/queues/<vhost>?columns=...`` lists every queue of the vhost with only the figures
the adapter uses (:data:`COLUMNS`; nested ``message_stats.*`` names work in ``columns`` on
3.10; ``disable_stats=true`` would drop ``message_stats`` altogether, so it is not used). One
:class:`VhostStats` per management endpoint and vhost is shared by every adapter on that vhost:
an adapter asks for a reply newer than the one it used last, and gets the newest reply, or
joins the request in flight, or starts one. So however many queues are sampled, each round costs
one request per vhost.

A failed request is a reply too (``error`` set), shared in the same way, so a management API
that is down is asked once per round, not once per queue.

The broker refreshes these figures every ``collect_statistics_interval`` (5 s by default), all
of a node's at once, and repeats them in between. :class:`RefreshClock` works out when each
queue's figures were refreshed, so that totals are placed at that time rather than at the
request: a queue whose figures differ from the previous reply's was refreshed in between (taken
as halfway); refreshes come once per period, so two refreshes of a queue bound the period (they
are a whole number of periods apart; ``reductions``, which a quorum queue's process adds to on
every refresh, makes them frequent), and figures unchanged for longer than that bound were
refreshed, unchanged, within it. Until a bound is seen the broker default (+1 s) is assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from brokers.rabbitmq_url import ManagementEndpoint

#: the figures read per queue (``arguments`` shows ``x-max-priority``)
COLUMNS = (
    "name",
    "type",
    "arguments",
    "messages_ready",
    "messages_unacknowledged",
    "consumers",
    "consumer_capacity",
    "head_message_timestamp",
    "message_stats.publish",
    "message_stats.ack",
    "message_stats.deliver_no_ack",
    "message_stats.get_no_ack",
    "reductions",
)
#: a request slower than this counts as the API being down for the round
TIMEOUT = 1.5
#: the longest the figures are taken to go unrefreshed until replies show a shorter bound
DEFAULT_REFRESH_BOUND = 6.0
#: warning kinds: the API did not answer (or answered an error), or refused the credentials
UNAVAILABLE = "management_unavailable"
DENIED = "management_denied"


@dataclass(frozen=True, slots=True)
class VhostReply:
    """One request's outcome: the queues of the vhost by name, or why there are none."""

    started: float
    finished: float
    queues: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: when each queue's figures were refreshed by the broker
    refreshed_at: Mapping[str, float] = field(default_factory=dict)
    #: None, or (warning kind, detail without secrets)
    error: tuple[str, str] | None = None

    @property
    def at(self) -> float:
        """When the broker read its figures, as well as can be told: mid-request."""
        return (self.started + self.finished) / 2


class RefreshClock:
    """When the broker last refreshed each queue's figures, told from successive replies.

    A refresh is not one instant: each statistics table has its own collector (``reductions``
    changes some 50 ms after ``publish``), so a refresh can show as changes in two replies in a
    row. Such a run is one refresh: it bounds the period from its first window, and within it
    only a change of the totals moves their time.
    """

    def __init__(self) -> None:
        self._figures: dict[str, Mapping[str, Any]] = {}
        self._refreshed: dict[str, float] = {}
        #: the lower end of the window in which each queue's latest refresh began
        self._refresh_after: dict[str, float] = {}
        #: queues whose figures changed in the latest reply
        self._changed: set[str] = set()
        self._previous_at: float | None = None
        #: the shortest span seen to hold two refreshes of one queue: the period is below it
        self.learned_bound = math.inf

    @property
    def bound(self) -> float:
        return self.learned_bound if math.isfinite(self.learned_bound) else DEFAULT_REFRESH_BOUND

    def observe(self, queues: Mapping[str, Mapping[str, Any]], at: float) -> dict[str, float]:
        """The refresh time of each queue's totals in a reply read at ``at``."""
        refreshed: dict[str, float] = {}
        changed: set[str] = set()
        bound, previous_at = self.bound, self._previous_at
        for name, entry in queues.items():
            before = self._figures.get(name)
            if before is None or previous_at is None:
                refreshed[name] = at  # first sight: no earlier reply to tell the refresh from
                continue
            last = self._refreshed[name]
            if entry == before:  # refreshed, unchanged, within the bound
                refreshed[name] = max(last, at - bound)
                continue
            changed.add(name)
            after = max(previous_at, at - bound)
            new_refresh = name not in self._changed
            if new_refresh:
                began = self._refresh_after.get(name)
                if began is not None:
                    self.learned_bound = min(self.learned_bound, at - began)
                self._refresh_after[name] = after
            moved = entry.get("message_stats") != before.get("message_stats")
            refreshed[name] = max(last, (after + at) / 2) if new_refresh or moved else last
        self._figures, self._refreshed = dict(queues), refreshed
        self._changed, self._previous_at = changed, at
        return refreshed


class VhostStats:
    """The queues of one vhost, fetched at most once per round however many adapters ask."""

    def __init__(self, client: httpx.AsyncClient, vhost: str) -> None:
        self._client = client
        self._path = f"/api/queues/{quote(vhost, safe='')}"
        self._latest: VhostReply | None = None
        self._pending: asyncio.Task[VhostReply] | None = None
        self.clock = RefreshClock()
        #: HTTP requests made, for benchmarks and tests
        self.requests = 0

    async def reply_after(self, used: float) -> VhostReply:
        """A reply whose request started after ``used`` (the start of the reply last used)."""
        if self._latest is not None and self._latest.started > used:
            return self._latest
        if self._pending is None:
            self._pending = asyncio.create_task(self._fetch())
            self._pending.add_done_callback(self._done)
        return await asyncio.shield(self._pending)

    def _done(self, task: asyncio.Task[VhostReply]) -> None:
        self._pending = None
        if not task.cancelled():
            self._latest = task.result()

    async def _fetch(self) -> VhostReply:
        started = time.time()
        self.requests += 1
        try:
            response = await self._client.get(self._path, params={"columns": ",".join(COLUMNS)})
        except httpx.HTTPError as exc:
            return VhostReply(started, time.time(), error=(UNAVAILABLE, _describe(exc)))
        finished = time.time()
        if response.status_code in (401, 403):
            detail = (
                f"HTTP {response.status_code}: the user is refused (it needs the monitoring tag)"
            )
            return VhostReply(started, finished, error=(DENIED, detail))
        if response.status_code != 200:
            return VhostReply(
                started, finished, error=(UNAVAILABLE, f"HTTP {response.status_code}")
            )
        try:
            queues = {entry["name"]: entry for entry in response.json()}
        except (ValueError, TypeError, KeyError) as exc:
            return VhostReply(started, finished, error=(UNAVAILABLE, f"unreadable reply ({exc})"))
        reply = VhostReply(started, finished, queues)
        return VhostReply(started, finished, queues, self.clock.observe(queues, reply.at))

    async def aclose(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending


def _describe(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


@dataclass(slots=True)
class _Shared:
    client: httpx.AsyncClient
    vhosts: dict[str, VhostStats]
    users: int = 0


#: one HTTP client per management endpoint, shared by every adapter that uses it
_SHARED: dict[ManagementEndpoint, _Shared] = {}


def acquire(endpoint: ManagementEndpoint, vhost: str) -> VhostStats:
    """The shared :class:`VhostStats` of ``vhost`` on ``endpoint``; release it with :func:`release`.

    Raises OSError or ssl.SSLError when a TLS file cannot be loaded."""
    shared = _SHARED.get(endpoint)
    if shared is None:
        verify = endpoint.tls.context() if endpoint.tls is not None else True
        client = httpx.AsyncClient(
            base_url=endpoint.base_url,
            auth=httpx.BasicAuth(endpoint.username, endpoint.password),
            verify=verify,
            timeout=TIMEOUT,
        )
        shared = _SHARED[endpoint] = _Shared(client, {})
    shared.users += 1
    stats = shared.vhosts.get(vhost)
    if stats is None:
        stats = shared.vhosts[vhost] = VhostStats(shared.client, vhost)
    return stats


async def release(endpoint: ManagementEndpoint) -> None:
    """One user fewer; the last one closes the client."""
    shared = _SHARED[endpoint]
    shared.users -= 1
    if shared.users == 0:
        del _SHARED[endpoint]
        for stats in shared.vhosts.values():
            await stats.aclose()
        await shared.client.aclose()
