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
from scaler.connections import profile_key
from scaler.durations import parse_duration
from scaler.errors import InvalidMetadata

#: keys KEDA itself sets on every external trigger; accepted and ignored
KEDA_KEYS = frozenset({"scalerAddress", "enableTLS", "unsafeSsl"})
#: the suffix KEDA resolves from the scale target's environment
FROM_ENV = "FromEnv"

DEFAULT_TARGET_AGE = 60.0
DEFAULT_RATE_WINDOW = 60.0
DEFAULT_SAMPLE_INTERVAL = 1.0
MIN_SAMPLE_INTERVAL = 0.1
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
_DEPENDENCY = re.compile(r"^([A-Za-z0-9_.-]+)=([0-9.]+)/([0-9.]+)$")
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
    """A shared dependency: ``limit`` slots in all, ``per_worker`` held by each worker."""

    name: str
    limit: float
    per_worker: float

    @property
    def max_workers(self) -> int:
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
        """The most workers allowed, and what sets that limit (``maxWorkers`` or a dependency)."""
        best: tuple[int | None, str] = (self.max_workers, "maxWorkers")
        for dep in self.dependencies:
            if best[0] is None or dep.max_workers < best[0]:
                best = (dep.max_workers, dep.name)
        return best

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
    metadata: Mapping[str, str], profiles: Mapping[str, str] | None = None
) -> TriggerSpec:
    """Parse KEDA's ``scalerMetadata`` into a spec, or raise :class:`InvalidMetadata`.

    ``profiles`` maps connection profile names to URLs (the scaler's own configuration). The
    server, ``probe``, ``check`` and the simulator all parse with this, so they accept and refuse
    the same triggers with the same messages.
    """
    values = _resolve_keys(metadata)
    reader = _Reader(values)
    source = _parse_source(reader, profiles or {})

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
        dependencies=_parse_dependencies(reader.get("dependencies")),
        activation_age=reader.duration("activationAge", 0.0),
        activation_depth=reader.integer("activationDepth", 0, minimum=0) or 0,
        rate_window=reader.duration("rateWindow", DEFAULT_RATE_WINDOW, positive=True),
        sample_interval=_parse_sample_interval(reader),
    )
    _check_consistency(spec, values)
    return spec


def _parse_sample_interval(reader: _Reader) -> float:
    seconds = reader.duration("sampleInterval", DEFAULT_SAMPLE_INTERVAL)
    if seconds < MIN_SAMPLE_INTERVAL:
        raise reader.fail(
            "sampleInterval",
            f"a duration of at least {MIN_SAMPLE_INTERVAL * 1000:g}ms: one sampler reads a queue "
            "for all its triggers, as often as the shortest sampleInterval among them asks",
        )
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
    profile: str | None = None

    def error(self, message: str) -> InvalidMetadata:
        if self.profile is None:
            return InvalidMetadata(self.key, message)
        return InvalidMetadata(
            self.key, f"the URL of connection profile {self.profile!r}: {message}"
        )


def _parse_source(reader: _Reader, profiles: Mapping[str, str]) -> QueueSource:
    url, origin = _connection_url(reader, profiles)
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
        raise InvalidMetadata(
            "broker",
            f"broker {broker!r} does not match the {scheme}:// URL; drop broker or fix the URL",
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
        management_url=_management_url(reader, url, origin) if broker == "rabbitmq" else None,
        priority_steps=_parse_priority_steps(reader),
        priority_separator=_parse_priority_separator(reader),
    )


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


def _management_url(reader: _Reader, url: str, origin: _UrlOrigin) -> str | None:
    """``managementUrl``, once the AMQP URL and it are known to make a management endpoint."""
    management_url = reader.get("managementUrl") or None
    try:
        parse_amqp_url(url)
    except ValueError as error:
        raise origin.error(str(error)) from None
    try:
        management_endpoint(url, management_url)
    except ValueError as error:
        raise InvalidMetadata("managementUrl", str(error)) from None
    return management_url


def _connection_url(reader: _Reader, profiles: Mapping[str, str]) -> tuple[str, _UrlOrigin]:
    name, url = reader.get("connection"), reader.get("url")
    if name and url:
        raise InvalidMetadata("connection", "both connection and url are set; set only one")
    if name:
        profile = _find_profile(name, profiles)
        return profiles[profile], _UrlOrigin("connection", profile)
    if url:
        return url, _UrlOrigin()
    raise InvalidMetadata(
        "url", "missing; set connection (a profile held by the scaler), url, or urlFromEnv"
    )


def _find_profile(name: str, profiles: Mapping[str, str]) -> str:
    """The profile ``name`` names: itself, else the one alike by :func:`profile_key` (as
    ``orders-redis`` is to ``QUEUE_AGE_SCALER_CONNECTION_ORDERS_REDIS``)."""
    if name in profiles:
        return name
    alike = sorted(known for known in profiles if profile_key(known) == profile_key(name))
    if len(alike) == 1:
        return alike[0]
    if alike:
        raise InvalidMetadata(
            "connection",
            f"got {_shown('connection', name)}; it names several connection profiles "
            f"({', '.join(map(repr, alike))}: case, '-', '.' and '_' do not count); "
            "give one of them exactly, or remove all but one from the scaler's configuration",
        )
    known = ", ".join(sorted(profiles)) or "none are configured"
    raise InvalidMetadata(
        "connection",
        f"got {_shown('connection', name)}; no such connection profile in the scaler's configuration (known: {known}). "
        "Profiles come from QUEUE_AGE_SCALER_CONNECTION_<NAME> variables or --connections-dir; "
        "names match whatever their case, with '-', '.' and '_' alike",
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


def _parse_dependencies(text: str | None) -> tuple[Dependency, ...]:
    if not text:
        return ()
    deps: list[Dependency] = []
    for part in text.split(","):
        match = _DEPENDENCY.match(part.strip())
        expected = "NAME=LIMIT/PER_WORKER[,...], for example postgres=100/5,payments-api=20/2"
        if not match:
            raise InvalidMetadata("dependencies", f"got {part.strip()!r}; expected {expected}")
        name, limit_text, per_text = match.groups()
        try:
            limit, per_worker = float(limit_text), float(per_text)
        except ValueError:
            raise InvalidMetadata(
                "dependencies", f"got {part.strip()!r}; expected {expected}"
            ) from None
        if limit <= 0 or per_worker <= 0:
            raise InvalidMetadata(
                "dependencies", f"got {part.strip()!r}; LIMIT and PER_WORKER must be above zero"
            )
        if math.floor(limit / per_worker + 1e-9) < 1:
            raise InvalidMetadata(
                "dependencies",
                f"got {part.strip()!r}; a LIMIT below PER_WORKER allows no worker at all",
            )
        if any(d.name == name for d in deps):
            raise InvalidMetadata(
                "dependencies", f"{name!r} appears twice; name each dependency once"
            )
        deps.append(Dependency(name, limit, per_worker))
    return tuple(deps)


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
    if spec.metric is not Metric.WORKERS and ceiling is not None and not info.reports_consumers:
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
