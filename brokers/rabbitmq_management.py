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
refreshed, unchanged, within it. While that bound agrees with the broker default (5 s) the
default is taken as the period; until a bound is seen, the default + 1 s.
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

from brokers.connections import Connections
from brokers.rabbitmq_options import STATISTICS_INTERVAL
from brokers.rabbitmq_url import ManagementEndpoint, Tls
from brokers.shared import SharedByKey

#: the figures read per queue (``arguments`` shows ``x-max-priority``)
COLUMNS = (
    "name",
    "type",
    "arguments",
    "messages_ready",
    "messages_unacknowledged",
    "consumers",
    "consumer_capacity",
    "leader",
    "online",
    "head_message_timestamp",
    "message_stats.publish",
    "message_stats.ack",
    "message_stats.deliver_no_ack",
    "message_stats.get_no_ack",
    "reductions",
)
#: a request slower than this counts as the API being down for the round
TIMEOUT = 1.5
#: the figure whose refresh times the totals
ARRIVALS = "message_stats.publish"
#: RabbitMQ's default ``collect_statistics_interval``, taken as the period while the replies
#: agree with it
DEFAULT_PERIOD = STATISTICS_INTERVAL
#: the learned bound agrees with the default period when it exceeds it by at most the spacing
#: of the replies and this (the collector's own work)
AGREEMENT_SLACK = 0.1
#: the longest the figures are taken to go unrefreshed until two refreshes have been seen
DEFAULT_REFRESH_BOUND = DEFAULT_PERIOD + 1.0
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
    """When the broker last refreshed each queue's arrivals total, told from successive replies.

    Each statistics table has its own collector, on its own phase: ``publish``, ``ack`` and
    ``reductions`` change up to a second or more apart. So each figure is followed on its own:
    a figure changes only when its collector refreshes it, once per period, and two changes of
    one figure bound the period. The totals are placed at the refresh of ``publish`` (the
    arrivals, which the age estimate needs to the second); completions refresh within a second or
    so of it.
    """

    def __init__(self) -> None:
        self._figures: dict[str, dict[str, Any]] = {}
        self._refreshed: dict[str, float] = {}
        #: (queue, figure) -> the lower end of the window in which the figure last changed
        self._changed_after: dict[tuple[str, str], float] = {}
        #: (queue, figure) that changed in the latest reply
        self._changed: set[tuple[str, str]] = set()
        self._previous_at: float | None = None
        #: the longest gap seen between two replies: how wide a refresh's window can be
        self._spacing = 0.0
        #: the shortest span seen to hold two refreshes of one figure: the period is below it
        self.learned_bound = math.inf

    @property
    def bound(self) -> float:
        """The longest a figure goes unrefreshed: the learned bound, or the default period
        where the learned bound agrees with it (replies a second apart cannot tell better)."""
        if not math.isfinite(self.learned_bound):
            return DEFAULT_REFRESH_BOUND
        if self.learned_bound <= DEFAULT_PERIOD + self._spacing + AGREEMENT_SLACK:
            return min(self.learned_bound, DEFAULT_PERIOD)
        return self.learned_bound

    def observe(self, queues: Mapping[str, Mapping[str, Any]], at: float) -> dict[str, float]:
        """The refresh time of each queue's arrivals total in a reply read at ``at``."""
        refreshed: dict[str, float] = {}
        figures_now = {name: _flatten(entry) for name, entry in queues.items()}
        changed: set[tuple[str, str]] = set()
        changed_after: dict[tuple[str, str], float] = {}
        bound, previous_at = self.bound, self._previous_at
        for name, figures in figures_now.items():
            before = self._figures.get(name)
            if before is None or previous_at is None:
                refreshed[name] = at  # first sight: no earlier reply to tell the refresh from
                continue
            self._spacing = max(self._spacing, at - previous_at)
            after = max(previous_at, at - bound)
            for key in ((name, figure) for figure in figures.keys() | before.keys()):
                began = self._changed_after.get(key)
                if figures.get(key[1]) != before.get(key[1]) and key not in self._changed:
                    if began is not None:
                        self.learned_bound = min(self.learned_bound, at - began)
                    began = after
                    changed.add(key)
                if began is not None:
                    changed_after[key] = began
            last = self._refreshed[name]
            if figures.get(ARRIVALS) != before.get(ARRIVALS):
                refreshed[name] = max(last, (after + at) / 2)
            else:  # refreshed, unchanged, within the bound
                refreshed[name] = max(last, at - bound)
        self._figures, self._refreshed, self._previous_at = figures_now, refreshed, at
        self._changed, self._changed_after = changed, changed_after
        return refreshed


def _flatten(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``{"message_stats": {"publish": 3}}`` -> ``{"message_stats.publish": 3}``."""
    flat: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "message_stats" and isinstance(value, Mapping):
            flat.update({f"{key}.{inner}": number for inner, number in value.items()})
        else:
            flat[key] = value
    return flat


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
        except (ValueError, TypeError, KeyError, RecursionError) as exc:  # not the API's JSON
            return VhostReply(started, finished, error=(UNAVAILABLE, f"unreadable reply ({exc!r})"))
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


def totals(entry: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """Arrivals and completions so far. The broker leaves out ``message_stats`` (and each of its
    figures) until it has one to show: with no messages in the queue that is 0 so far, but a
    queue that holds messages has had publishes its statistics do not show yet (a new queue, for
    a statistics interval or two; or after a node restart, until the next publish), so its
    totals are unknown, not 0: a 0 there would place those publishes in the arrival history
    later than they came, and the age too young."""
    stats: Mapping[str, Any] | None = entry.get("message_stats")
    if not stats or "publish" not in stats:
        held = _count(entry.get("messages_ready")) + _count(entry.get("messages_unacknowledged"))
        if held:
            return None, None
        stats = stats or {}
    arrivals = _count(stats.get("publish"))
    completions = sum(_count(stats.get(k)) for k in ("ack", "deliver_no_ack", "get_no_ack"))
    return arrivals, completions


def _count(value: object) -> int:
    """A figure of the reply as a count; left out (or not a number) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(slots=True)
class _Client:
    """One management endpoint's HTTP client, and the figures of each vhost read through it."""

    http: httpx.AsyncClient
    vhosts: dict[str, VhostStats] = field(default_factory=dict)

    def stats(self, vhost: str) -> VhostStats:
        stats = self.vhosts.get(vhost)
        if stats is None:
            stats = self.vhosts[vhost] = VhostStats(self.http, vhost)
        return stats


def _open(endpoint: ManagementEndpoint, max_connections: int) -> _Client:
    """A client of at most ``max_connections`` (the server's bound per broker).

    Raises OSError or ssl.SSLError when a TLS file cannot be loaded."""
    # plain http has no use for a context, but httpx builds one (from certifi's CAs) unless
    # given one: the shared one costs nothing
    verify = (endpoint.tls or Tls()).context("http")
    return _Client(
        httpx.AsyncClient(
            base_url=endpoint.base_url,
            auth=httpx.BasicAuth(endpoint.username, endpoint.password),
            verify=verify,
            timeout=TIMEOUT,
            limits=httpx.Limits(max_connections=max_connections),
        )
    )


async def _close(client: _Client) -> None:
    for stats in client.vhosts.values():
        await stats.aclose()
    await client.http.aclose()


def clients(connections: Connections) -> SharedByKey[ManagementEndpoint, _Client]:
    """The server's HTTP clients, one per management endpoint, shared by every adapter that
    uses it."""
    bound = connections.max_per_broker
    return connections.kind("rabbitmq-management", lambda e: _open(e, bound), _close)


def acquire(connections: Connections, endpoint: ManagementEndpoint, vhost: str) -> VhostStats:
    """The shared :class:`VhostStats` of ``vhost`` on ``endpoint``; release it with
    ``clients(connections).release(endpoint)``.

    Raises OSError or ssl.SSLError when a TLS file cannot be loaded."""
    return clients(connections).acquire(endpoint).stats(vhost)
