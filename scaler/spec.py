"""Trigger metadata -> a frozen :class:`TriggerSpec`.

Every problem is an :class:`~scaler.errors.InvalidMetadata` whose message names the key, the
value, what was expected and, for an unknown key, the nearest valid one.
"""

from __future__ import annotations

import difflib
import enum
import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit

from brokers.formats import DEFAULT_FORMAT, FORMATS, End
from brokers.kombu_layout import PRIORITY_STEPS, SEP
from brokers.rabbitmq_url import management_endpoint, parse_amqp_url
from brokers.redis_url import PERCENT_ENCODE, check_redis_url, misplaced_at
from scaler.bounds import UNBOUNDED, Bounds
from scaler.ceilings.kinds import probe_kind
from scaler.durations import parse_duration
from scaler.errors import InvalidMetadata, PermissionDenied
from scaler.profiles import Profile, as_profiles, find_profile
from scaler.url_policy import OPEN_URLS, UrlPolicy, refuse_local_resources

#: keys KEDA itself sets on every external trigger; accepted and ignored
KEDA_KEYS = frozenset({"scalerAddress", "enableTLS", "unsafeSsl"})
#: the suffix KEDA resolves from the scale target's environment
FROM_ENV = "FromEnv"

DEFAULT_TARGET_AGE = 60.0
DEFAULT_RATE_WINDOW = 60.0
DEFAULT_SAMPLE_INTERVAL = 1.0
TIMESTAMP_UNITS = ("auto", "s", "ms", "iso")
SCHEMES = {
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "amqp": "rabbitmq",
    "amqps": "rabbitmq",
}
SUPPORTED_BROKERS = ("redis", "rabbitmq")

VALUE_KEYS = frozenset(
    {
        "broker", "connection", "url", "managementUrl", "queue", "format", "consumerGroup",
        "keyPrefix", "timestampField", "timestampUnit", "oldestEnd", "targetAge",
        "targetDrainTime", "workerThroughput", "jobDuration", "workerConcurrency", "minWorkers",
        "maxWorkers", "dependencies", "metric", "activationAge", "activationDepth", "rateWindow",
        "sampleInterval", "prioritySteps", "prioritySeparator",
    }
)  # fmt: skip
_ALL_KEYS = sorted(VALUE_KEYS | KEDA_KEYS | {k + FROM_ENV for k in VALUE_KEYS})
T = TypeVar("T")
_DEPENDENCY = re.compile(
    r"^([A-Za-z0-9_.-]+)=(?:probe:([A-Za-z0-9_.-]+)(?:\|([0-9.]+))?|([0-9.]+))/([0-9.]+)$"
)
_DEPENDENCY_EXPECTED = (
    "NAME=LIMIT/PER_WORKER or NAME=probe:PROFILE[|LIMIT]/PER_WORKER[,...], for example "
    "postgres=100/5,payments-api=20/2 or postgres=probe:orders-pg|100/5"
)
#: one item of ``prioritySteps``: a step, or an inclusive range of steps
_PRIORITY_STEP = re.compile(r"^([0-9]+)(?:\s*-\s*([0-9]+))?$")
#: the most ``prioritySteps``: kombu keeps one list per step, and a sample reads each one
MAX_PRIORITY_STEPS = 256


class Metric(enum.StrEnum):
    WORKERS = "workers"
    AGE = "age"
    DRAIN_TIME = "drainTime"


@dataclass(frozen=True, slots=True)
class QueueSource:
    """Identifies one queue on one broker: one sampler serves every trigger with an equal source."""

    broker: str
    url: str = field(repr=False)
    queue: str
    format: str
    key_prefix: str
    oldest_end: End
    timestamp_field: str | None = None
    timestamp_unit: str = "auto"
    #: the consumer group whose backlog this is (format stream)
    consumer_group: str | None = None
    #: the RabbitMQ management API's URL, where set; derived from ``url`` otherwise
    management_url: str | None = field(default=None, repr=False)
    #: kombu's transport option ``priority_steps``, sorted, each once (format celery)
    priority_steps: tuple[int, ...] = PRIORITY_STEPS
    #: kombu's transport option ``sep``, between a queue name and its step (format celery)
    priority_separator: str = SEP

    def describe(self) -> str:
        """For messages and logs: never includes the URL."""
        return f"{self.broker} queue {self.queue!r} ({self.format})"


@dataclass(frozen=True, slots=True)
class Dependency:
    """A shared dependency: ``limit`` slots in all, ``per_worker`` held by each worker.

    A probed dependency (``probe``: the connection profile it reads) takes its slots from the
    probe's live reading; ``limit`` is then the static fallback, or None without one.
    """

    name: str
    limit: float | None
    per_worker: float
    #: the connection profile the probe reads, as the scaler's configuration names it
    probe: str | None = None
    #: that profile's URL (with credentials: never shown)
    probe_url: str | None = field(default=None, repr=False)
    #: the probe's kind: postgres, mysql, redis or http
    probe_kind: str | None = None

    @property
    def max_workers(self) -> int | None:
        """The workers ``limit`` allows; None for a probe without a static fallback."""
        if self.limit is None:
            return None
        return math.floor(self.limit / self.per_worker + 1e-9)


@dataclass(frozen=True)
class TriggerSpec:
    source: QueueSource
    metric: Metric = Metric.WORKERS
    target_age: float = DEFAULT_TARGET_AGE
    target_drain_time: float = DEFAULT_TARGET_AGE
    #: jobs per second one worker completes; None = learn it from observed workers
    worker_throughput: float | None = None
    worker_concurrency: int | None = None
    min_workers: int = 0
    max_workers: int | None = None
    dependencies: tuple[Dependency, ...] = ()
    activation_age: float = 0.0
    activation_depth: int = 0
    rate_window: float = DEFAULT_RATE_WINDOW
    sample_interval: float = DEFAULT_SAMPLE_INTERVAL

    @property
    def ceiling(self) -> tuple[int | None, str]:
        """The most workers allowed by ``maxWorkers`` and the static dependencies, and what sets
        that limit; probed dependencies are added by the policy from their live readings."""
        best: tuple[int | None, str] = (self.max_workers, "maxWorkers")
        for dep in self.dependencies:
            workers = dep.max_workers
            if dep.probe is None and workers is not None and (best[0] is None or workers < best[0]):
                best = (workers, dep.name)
        return best

    @property
    def has_ceiling(self) -> bool:
        """Whether anything bounds the workers: ``maxWorkers`` or a dependency (static or probed)."""
        return self.max_workers is not None or bool(self.dependencies)

    @functools.cached_property
    def metric_name(self) -> str:
        queue = re.sub(r"[^a-z0-9]+", "-", self.source.queue.lower()).strip("-") or "queue"
        metric = re.sub(r"(?<!^)([A-Z])", r"-\1", self.metric.value).lower()
        return f"queue-age-{metric}-{queue}"[:200]

    @property
    def metric_target(self) -> float:
        if self.metric is Metric.AGE:
            return self.target_age
        if self.metric is Metric.DRAIN_TIME:
            return self.target_drain_time
        return 1.0


def parse_metadata(
    metadata: Mapping[str, str],
    profiles: Mapping[str, Profile | str] | None = None,
    *,
    namespace: str | None = None,
    urls: UrlPolicy = OPEN_URLS,
    bounds: Bounds = UNBOUNDED,
) -> TriggerSpec:
    """Parse KEDA's ``scalerMetadata`` into a spec, or raise :class:`InvalidMetadata` (or
    :class:`~scaler.errors.PermissionDenied`, for what the operator does not allow).

    ``profiles`` are the scaler's connection profiles (a bare URL stands for a profile usable
    from every namespace); ``namespace`` the ScaledObject's, checked against a profile's
    ``namespaces`` (None: not checked). ``urls`` says where a trigger's own URL may point, and
    ``bounds`` what it may ask of the samplers. The server, ``probe``, ``check`` and the
    simulator all parse with this, so they accept and refuse the same triggers with the same
    messages.
    """
    values = _resolve_keys(metadata)
    reader = _Reader(values)
    known = as_profiles(profiles or {})
    source = _parse_source(reader, known, namespace, urls)

    metric = reader.choice("metric", [m.value for m in Metric], Metric.WORKERS.value)
    target_age = reader.duration("targetAge", DEFAULT_TARGET_AGE, positive=True)
    throughput, concurrency = _parse_capacity(reader)
    spec = TriggerSpec(
        source=source,
        metric=Metric(metric),
        target_age=target_age,
        target_drain_time=reader.duration("targetDrainTime", target_age, positive=True),
        worker_throughput=throughput,
        worker_concurrency=concurrency,
        min_workers=reader.integer("minWorkers", 0, minimum=0) or 0,
        max_workers=reader.integer("maxWorkers", None, minimum=1),
        dependencies=_parse_dependencies(reader.get("dependencies"), known, namespace),
        activation_age=reader.duration("activationAge", 0.0),
        activation_depth=reader.integer("activationDepth", 0, minimum=0) or 0,
        rate_window=reader.duration("rateWindow", DEFAULT_RATE_WINDOW, positive=True),
        sample_interval=_parse_sample_interval(reader, bounds),
    )
    _check_consistency(spec, values)
    bounds.check_rate_window(
        values.get("rateWindow", "60s (the default)"), spec.rate_window, spec.sample_interval
    )
    return spec


def _parse_sample_interval(reader: _Reader, bounds: Bounds) -> float:
    seconds = reader.duration("sampleInterval", DEFAULT_SAMPLE_INTERVAL)
    bounds.check_sample_interval(reader.values.get("sampleInterval", ""), seconds)
    return seconds


def _resolve_keys(metadata: Mapping[str, str]) -> dict[str, str]:
    """Reject unknown keys; fold ``xxxFromEnv`` into ``xxx``; drop KEDA's own keys."""
    values: dict[str, str] = {}
    for key, value in metadata.items():
        if key in KEDA_KEYS:
            continue
        base = key.removesuffix(FROM_ENV) if key.endswith(FROM_ENV) else key
        if base not in VALUE_KEYS:
            close = difflib.get_close_matches(key, _ALL_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidMetadata(
                key,
                f"unknown key (value {_shown(key, value)}){hint} Valid keys: {', '.join(sorted(VALUE_KEYS))}",
            )
        if base in values:
            raise InvalidMetadata(
                key, f"both {base!r} and {base + FROM_ENV!r} are set; set only one"
            )
        values[base] = value
    return values


def _shown(key: str, value: str) -> str:
    """A value as it may appear in a message: URLs never do, they may hold a password."""
    if "url" in key.lower() or "://" in value or "@" in value:
        return "<hidden: may hold a password>"
    return repr(value)


class _Reader:
    """Typed access to the metadata values, each failure naming key, value and expectation."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        value = self.values.get(key)
        return value.strip() if value is not None else None

    def fail(self, key: str, expected: str) -> InvalidMetadata:
        return InvalidMetadata(
            key, f"got {_shown(key, self.values.get(key, ''))}; expected {expected}"
        )

    def _convert(self, key: str, convert: Callable[[str], T], expected: str) -> T | None:
        text = self.get(key)
        if text is None:
            return None
        try:
            return convert(text)
        except ValueError:
            raise self.fail(key, expected) from None

    def duration(self, key: str, default: float, *, positive: bool = False) -> float:
        seconds = self._convert(key, parse_duration, "a duration such as 30, 500ms, 90s, 5m or 1h")
        if seconds is None:
            return default
        if positive and seconds <= 0:
            raise self.fail(key, "a duration above zero")
        return seconds

    def integer(self, key: str, default: int | None, *, minimum: int) -> int | None:
        number = self._convert(key, int, f"a whole number, at least {minimum}")
        if number is None:
            return default
        if number < minimum:
            raise self.fail(key, f"a whole number, at least {minimum}")
        return number

    def number(self, key: str) -> float | None:
        number = self._convert(key, float, "a number above zero")
        if number is not None and (not math.isfinite(number) or number <= 0):
            raise self.fail(key, "a number above zero")
        return number

    def choice(self, key: str, choices: list[str], default: str) -> str:
        text = self.get(key)
        if text is None:
            return default
        if text not in choices:
            close = difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.fail(key, f"one of {', '.join(choices)}{hint}")
        return text


@dataclass(frozen=True, slots=True)
class _UrlOrigin:
    """Where a trigger's URL comes from, for messages: ``url`` (or ``urlFromEnv``), or a
    connection profile (the key is then ``connection``)."""

    key: str = "url"
    profile: Profile | None = None

    def error(self, message: str) -> InvalidMetadata:
        if self.profile is None:
            return InvalidMetadata(self.key, message)
        return InvalidMetadata(
            self.key, f"the URL of connection profile {self.profile.name!r}: {message}"
        )


def _parse_source(
    reader: _Reader, profiles: Mapping[str, Profile], namespace: str | None, urls: UrlPolicy
) -> QueueSource:
    url, origin = _connection_url(reader, profiles, namespace, urls)
    broker = _broker(reader, url, origin)
    if origin.profile is None:
        urls.check("url", url)

    queue = reader.get("queue")
    if not queue:
        raise InvalidMetadata(
            "queue", "missing; set queue to the queue name as the job library names it"
        )
    format_name = _parse_format(reader, broker)
    info = FORMATS[format_name]
    for key in (
        "keyPrefix",
        "timestampField",
        "timestampUnit",
        "oldestEnd",
        "consumerGroup",
        "managementUrl",
        "prioritySteps",
        "prioritySeparator",
    ):
        if reader.get(key) is not None and key not in info.layout_keys:
            raise InvalidMetadata(
                key, f"does not apply to format {format_name}; remove it{_applies(key)}"
            )
    oldest_end = End(reader.choice("oldestEnd", [e.value for e in End], info.oldest_end.value))
    key_prefix = reader.get("keyPrefix")
    group = reader.get("consumerGroup") or None
    if "consumerGroup" in info.layout_keys and group is None:
        raise InvalidMetadata(
            "consumerGroup",
            f"missing; format {format_name} needs the consumer group that reads the stream",
        )
    return QueueSource(
        broker=broker,
        url=url,
        queue=queue,
        format=format_name,
        key_prefix=info.key_prefix if key_prefix is None else key_prefix,
        timestamp_field=reader.get("timestampField") or None,
        timestamp_unit=reader.choice("timestampUnit", list(TIMESTAMP_UNITS), "auto"),
        oldest_end=oldest_end,
        consumer_group=group,
        management_url=_management_url(reader, url, origin, urls) if broker == "rabbitmq" else None,
        priority_steps=_parse_priority_steps(reader),
        priority_separator=_parse_priority_separator(reader),
    )


def _broker(reader: _Reader, url: str, origin: _UrlOrigin) -> str:
    """The broker of ``url`` (checked, for Redis, as redis-py will read it) and of ``broker``."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError as error:
        detail = PERCENT_ENCODE if misplaced_at(url) else str(error)
        raise origin.error(
            f"the URL cannot be parsed ({detail}); expected redis://[:password@]host:port/db"
        ) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise origin.error(
            f"scheme {scheme!r} is not known; expected redis://, rediss:// or unix:// (or amqp://, amqps://)",
        )
    broker = reader.get("broker") or SCHEMES[scheme]
    if broker not in SCHEMES.values():
        raise reader.fail("broker", "redis or rabbitmq")
    if SCHEMES[scheme] != broker:
        of = "" if origin.profile is None else f" of connection profile {origin.profile.name!r}"
        raise InvalidMetadata(
            "broker",
            f"broker {broker!r} does not match the {scheme}:// URL{of}; drop broker or fix the URL",
        )
    if broker not in SUPPORTED_BROKERS:
        raise InvalidMetadata(
            "broker",
            f"{broker} is not supported by this version yet; supported: {', '.join(SUPPORTED_BROKERS)}",
        )
    if broker == "redis":
        try:
            check_redis_url(url, parts)
        except ValueError as error:
            raise origin.error(str(error)) from None
        if origin.profile is not None and origin.profile.management_url is not None:
            raise origin.error("managementUrl applies to RabbitMQ profiles only; remove it")
    return broker


def _applies(key: str) -> str:
    """Where a layout key that does not apply to a format does: ``list``'s keys, celery's own."""
    for name in ("list", "celery"):
        if key in FORMATS[name].layout_keys:
            return f" (it applies to format {name})"
    return ""


_STEPS_EXPECTED = (
    "kombu's priority_steps: whole numbers of at least 0, comma-separated, or a range FIRST-LAST, "
    "for example 0,3,6,9 (kombu's default) or 0-9 (Celery's recipe, list(range(10)))"
)


def _parse_priority_steps(reader: _Reader) -> tuple[int, ...]:
    """``prioritySteps``: ``0,3,6,9``, ``0-9`` or both forms mixed; sorted, each step once."""
    text = reader.get("prioritySteps")
    if text is None:
        return PRIORITY_STEPS
    steps: set[int] = set()
    for part in (item.strip() for item in text.split(",")):
        match = _PRIORITY_STEP.match(part)
        if match is None:
            raise reader.fail("prioritySteps", f"{_STEPS_EXPECTED}; {part!r} is neither")
        first = int(match[1])
        last = first if match[2] is None else int(match[2])
        if last < first:
            raise reader.fail(
                "prioritySteps", f"{_STEPS_EXPECTED}; the range {part!r} runs backwards"
            )
        if len(steps) + last - first + 1 > MAX_PRIORITY_STEPS:
            raise reader.fail(
                "prioritySteps",
                f"at most {MAX_PRIORITY_STEPS} steps (kombu keeps a list per step, and each is read)",
            )
        twice = steps.intersection(range(first, last + 1))
        if twice:
            raise reader.fail(
                "prioritySteps",
                f"each step once; repeated: {', '.join(map(str, sorted(twice)))}",
            )
        steps.update(range(first, last + 1))
    return tuple(sorted(steps))


def _parse_priority_separator(reader: _Reader) -> str:
    """``prioritySeparator``, taken as is (blanks included): kombu's ``sep``, never empty."""
    text = reader.values.get("prioritySeparator")
    if text is None:
        return SEP
    if not text:
        raise reader.fail(
            "prioritySeparator",
            "kombu's sep, at least one character, for example ':' (Celery's recipe); "
            "kombu's default is \\x06\\x16",
        )
    return text


def _management_url(reader: _Reader, url: str, origin: _UrlOrigin, urls: UrlPolicy) -> str | None:
    """The profile's ``managementUrl``, or the trigger's own, checked with the AMQP URL to make
    a management endpoint; the trigger's own only where it may point."""
    try:
        parse_amqp_url(url)
    except ValueError as error:
        raise origin.error(str(error)) from None
    if origin.profile is not None:
        try:
            management_endpoint(url, origin.profile.management_url)
        except ValueError as error:
            raise origin.error(str(error)) from None
        return origin.profile.management_url
    management_url = reader.get("managementUrl") or None
    if management_url is not None:
        refuse_local_resources("managementUrl", management_url)
    try:
        endpoint = management_endpoint(url, management_url)
    except ValueError as error:
        raise InvalidMetadata("managementUrl", str(error)) from None
    urls.check("managementUrl" if management_url else "url", endpoint.base_url)
    return management_url


def _connection_url(
    reader: _Reader, profiles: Mapping[str, Profile], namespace: str | None, urls: UrlPolicy
) -> tuple[str, _UrlOrigin]:
    """The URL to connect with: the named profile's (a whole: a trigger that names one cannot
    set the keys that carry or use its credentials), or the trigger's own, if the operator
    allows it (nothing is connected to for this check)."""
    name, url = reader.get("connection"), reader.get("url")
    if name:
        for key in ("url", "managementUrl"):
            if reader.get(key) is not None:
                raise InvalidMetadata(
                    key,
                    f"set beside connection; it belongs in the connection profile: a trigger that "
                    f"names a profile takes its URL, management URL, host, vhost and TLS files "
                    f"from the profile alone. Remove {key} (the scaler's operator sets it in the "
                    "profile)",
                )
        profile = find_profile(name, profiles, namespace)
        return profile.url, _UrlOrigin("connection", profile)
    if url:
        urls.admit_trigger_url("url")
        refuse_local_resources("url", url)
        return url, _UrlOrigin()
    raise InvalidMetadata(
        "url", "missing; set connection (a profile held by the scaler), url, or urlFromEnv"
    )


def _parse_format(reader: _Reader, broker: str) -> str:
    text = reader.get("format")
    if text is None:
        return DEFAULT_FORMAT[broker]
    names = [n for n, info in FORMATS.items() if info.broker == broker]
    return reader.choice("format", names, DEFAULT_FORMAT[broker])


def _parse_capacity(reader: _Reader) -> tuple[float | None, int | None]:
    throughput = reader.number("workerThroughput")
    duration = reader.get("jobDuration")
    concurrency = reader.integer("workerConcurrency", None, minimum=1)
    if throughput is not None and duration is not None:
        raise InvalidMetadata(
            "jobDuration",
            "both workerThroughput and jobDuration are set; set one (workerThroughput = workerConcurrency / jobDuration)",
        )
    if duration is not None:
        seconds = reader.duration("jobDuration", 0.0, positive=True)
        throughput = (concurrency or 1) / seconds
    return throughput, concurrency


def _parse_dependencies(
    text: str | None, profiles: Mapping[str, Profile], namespace: str | None
) -> tuple[Dependency, ...]:
    if not text:
        return ()
    deps: list[Dependency] = []
    for part in (item.strip() for item in text.split(",")):
        shown = _shown("dependencies", part)  # a URL pasted here may hold a password
        match = _DEPENDENCY.match(part)
        if not match:
            raise InvalidMetadata("dependencies", f"got {shown}; expected {_DEPENDENCY_EXPECTED}")
        name, profile, fallback_text, limit_text, per_text = match.groups()
        try:
            per_worker = float(per_text)
            limit_given = limit_text if profile is None else fallback_text
            limit = None if limit_given is None else float(limit_given)
        except ValueError:
            raise InvalidMetadata(
                "dependencies", f"got {shown}; expected {_DEPENDENCY_EXPECTED}"
            ) from None
        if (limit is not None and limit <= 0) or per_worker <= 0:
            raise InvalidMetadata(
                "dependencies", f"got {shown}; LIMIT and PER_WORKER must be above zero"
            )
        if limit is not None and math.floor(limit / per_worker + 1e-9) < 1:
            raise InvalidMetadata(
                "dependencies", f"got {shown}; a LIMIT below PER_WORKER allows no worker at all"
            )
        if any(d.name == name for d in deps):
            raise InvalidMetadata(
                "dependencies", f"{name!r} appears twice; name each dependency once"
            )
        if profile is None:
            deps.append(Dependency(name, limit, per_worker))
            continue
        found, url = probe_profile_url(profile, profiles, namespace)
        try:
            kind = probe_kind(url)
        except ValueError as error:
            raise InvalidMetadata(
                "dependencies",
                f"{name!r}: the URL of connection profile {found!r}: {error}",
            ) from None
        deps.append(Dependency(name, limit, per_worker, found, url, kind))
    return tuple(deps)


def probe_profile_url(
    name: str, profiles: Mapping[str, Profile], namespace: str | None
) -> tuple[str, str]:
    """The connection profile a ``probe:NAME`` names, if ``namespace`` may use it (None: not
    checked), and its URL: the one place where a probe looks a profile up."""
    try:
        profile = find_profile(name, profiles, namespace)
    except (InvalidMetadata, PermissionDenied) as error:
        message = str(error).removeprefix("connection: ")
        raise type(error)("dependencies", f"probe:{name}: {message}") from None
    return profile.name, profile.url


def _check_consistency(spec: TriggerSpec, values: Mapping[str, str]) -> None:
    info = FORMATS[spec.source.format]
    ceiling, limiter = spec.ceiling
    if spec.max_workers is not None and spec.min_workers > spec.max_workers:
        raise InvalidMetadata(
            "minWorkers",
            f"got {spec.min_workers}; expected at most maxWorkers ({spec.max_workers})",
        )
    if ceiling is not None and spec.min_workers > ceiling:
        raise InvalidMetadata(
            "minWorkers",
            f"got {spec.min_workers}; the dependency {limiter!r} allows at most {ceiling} workers",
        )
    if spec.rate_window < 2 * spec.sample_interval:
        raise InvalidMetadata(
            "rateWindow",
            f"got {values.get('rateWindow', '60s (the default)')!r}; expected at least two sampleIntervals ({2 * spec.sample_interval:g}s)",
        )
    if spec.metric is not Metric.WORKERS and spec.has_ceiling and not info.reports_consumers:
        limiter = limiter if ceiling is not None else spec.dependencies[0].name
        raise InvalidMetadata(
            "metric",
            f"metric {spec.metric.value} with a ceiling ({limiter}) needs the observed worker count, which "
            f"format {spec.source.format} does not report; use metric workers (the ceiling then applies "
            "directly), or drop maxWorkers/dependencies and set the ScaledObject's maxReplicaCount",
        )
    if (
        spec.metric is Metric.WORKERS
        and spec.worker_throughput is None
        and not info.reports_consumers
    ):
        raise InvalidMetadata(
            "workerThroughput",
            f"missing; format {spec.source.format} does not report attached workers, so per-worker throughput "
            "cannot be learned. Set workerThroughput (jobs per second one worker completes), or jobDuration "
            "and workerConcurrency",
        )
