"""What a queue format is, as its broker module describes it, without importing a broker client.

A :class:`FormatInfo` says what the format shows (workers, jobs in flight), which trigger keys
it reads and how (``options``: its own parser, given a :class:`SourceContext`), the adapter to
import when one of its queues is first sampled, and how it shows a simulated queue
(``snapshot_model``). Its :class:`BrokerInfo` says which URL schemes are the broker's and how a
URL is checked. The metadata parser, the adapters and the simulator all read these, so they
cannot disagree; :mod:`brokers.registry` finds them (the built-in table and plugins).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import SplitResult

from brokers.base import End, NoOptions, QueueSource
from brokers.errors import InvalidMetadata

PERCENT_ENCODE = (
    "the URL has an '@' after its host: a '/', '?' or '#' in the user name or password ends the "
    "host early, so percent-encode them (%2F, %3F, %23; '@' as %40). Parts not shown, they may "
    "hold the password"
)


def misplaced_at(url: str) -> bool:
    """Whether an ``@`` follows the host part: a password with an unencoded ``/``, ``?`` or
    ``#`` then spills into the port, path, query or fragment, which must not be shown."""
    rest = url.partition("://")[2]
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    return "@" in rest[min(ends, default=len(rest)) :]


class OptionReader(Protocol):
    """Typed access to a trigger's metadata values; every failure an :class:`InvalidMetadata`
    naming the key, the value (never a URL's) and what was expected."""

    @property
    def values(self) -> Mapping[str, str]:
        """The values as given (``xxxFromEnv`` resolved), unstripped."""
        ...

    def get(self, key: str) -> str | None:
        """The value, stripped; None where the key is not set."""
        ...

    def fail(self, key: str, expected: str) -> InvalidMetadata:
        """The error for a bad value of ``key``."""
        ...

    def choice(self, key: str, choices: list[str], default: str) -> str:
        """The value, one of ``choices`` (``default`` where unset)."""
        ...


class UrlGate(Protocol):
    """What the scaler's operator allows a trigger's own URLs (a format's second URL, say)."""

    def refuse_local(self, key: str, url: str) -> None:
        """Refuse a URL that names a file or socket on the scaler's machine."""
        ...

    def check(self, key: str, url: str) -> None:
        """Refuse a URL the operator's rules do not allow (nothing is connected to)."""
        ...


@dataclass(frozen=True, slots=True)
class UrlOrigin:
    """Where a trigger's URL comes from, for messages: ``url`` (or ``urlFromEnv``), or a
    connection profile (the key is then ``connection``) and the profile's other URLs."""

    key: str = "url"
    #: the connection profile's name, where the URL is a profile's
    profile: str | None = None
    #: the profile's ``managementUrl``, where it has one
    management_url: str | None = field(default=None, repr=False)

    def error(self, message: str) -> InvalidMetadata:
        if self.profile is None:
            return InvalidMetadata(self.key, message)
        return InvalidMetadata(
            self.key, f"the URL of connection profile {self.profile!r}: {message}"
        )


@dataclass(frozen=True, slots=True)
class SourceContext:
    """What a format's option parser is given: the trigger's values, its URL and where it came
    from, the format, and the operator's rules for any other URL the trigger gives."""

    reader: OptionReader
    url: str = field(repr=False)
    origin: UrlOrigin
    format: FormatInfo
    urls: UrlGate


@dataclass(frozen=True, slots=True)
class SnapshotModel:
    """How a format shows a queue in the simulator (what its adapter would read)."""

    #: the counts' source: ``list-marker`` (kept by the adapter) or the broker's own counters
    counts_source: str
    #: where the oldest job's enqueue time comes from; ``""``: the format does not show it
    oldest_source: str
    #: the end where jobs are added (the list marker watches it)
    push_end: End
    #: the broker's counters are kept by the library's workers (RQ's): while none is
    #: registered, now or at the previous sample, the list marker's counts stand
    counters_need_workers: bool = False
    #: seconds between the heartbeats at which the library writes its workers' jobs (Sidekiq's
    #: 5 s): in flight is as of the last one; 0: read live
    heartbeat: float = 0.0
    #: whether a worker that takes no more jobs but finishes its own (draining: a quiet Sidekiq
    #: process) still counts among the consumers
    draining_counts: bool = True
    #: whether the library records the consumers' job slots (their concurrency)
    reports_slots: bool = False
    #: seconds between the broker's refreshes of its counters and in-flight count (RabbitMQ's
    #: management statistics, 5 s): the snapshot holds them as of the last refresh, placed at
    #: it (``counts_observed_at``); 0: read live
    refresh: float = 0.0

    @property
    def broker_counters(self) -> bool:
        return self.counts_source != "list-marker"


#: how a format makes its :class:`SnapshotModel` for a queue
SnapshotModelFactory = Callable[["FormatInfo", QueueSource], SnapshotModel]


def no_options(context: SourceContext) -> Hashable:
    """The option parser of a format without options of its own."""
    return NoOptions()


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker: its name in ``broker`` and metrics, the URL schemes that are its, and its URL
    check (``check_url`` raises ValueError with the message for the trigger)."""

    name: str
    #: the broker's name in messages (``Redis``)
    title: str
    schemes: tuple[str, ...]
    #: the format of a trigger that names none
    default_format: str
    #: stands in for a URL that only run time knows, in ``check`` (offline)
    offline_url: str
    #: the URL's form, for a URL that cannot be parsed
    url_form: str = ""
    #: the keys a connection profile may hold beside ``url`` for this broker
    profile_keys: frozenset[str] = frozenset()
    check_url: Callable[[str, SplitResult], None] | None = None


@dataclass(frozen=True, slots=True)
class FormatInfo:
    """One job library's layout on its broker."""

    name: str
    broker: BrokerInfo
    #: the library's key namespace; ``""`` where it has none
    key_prefix: str
    #: the end of the waiting list that holds the oldest job
    oldest_end: End
    #: whether the format shows how many workers are attached (needed to learn throughput,
    #: and to hold the ceiling in ``age`` and ``drainTime`` mode)
    reports_consumers: bool
    #: whether the format shows jobs picked up and not yet finished
    reports_in_flight: bool
    #: layout keys a user may set for this format, each read by ``options``
    layout_keys: tuple[str, ...]
    #: "module:callable" that opens an adapter for a queue of this format
    #: (a :data:`brokers.base.AdapterFactory`), imported when one is first sampled
    adapter: str
    #: parses the format's layout keys into ``QueueSource.options`` (frozen, hashable)
    options: Callable[[SourceContext], Hashable] = no_options
    #: how the format shows a simulated queue; None: the simulator cannot run it
    snapshot_model: SnapshotModelFactory | None = None
    #: one line for listings (``queue-age-scaler formats``)
    summary: str = ""
    #: "module:callable" that lists the broker's queues of this format (a
    #: :data:`brokers.base.QueueLister`), for a pool's globs; ``""``: it cannot list them
    queue_lister: str = ""
