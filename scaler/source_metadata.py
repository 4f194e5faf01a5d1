"""The queue source of a trigger: its URL (its own or a connection profile's), broker, queue,
format and the format's layout keys."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from brokers.formats import DEFAULT_FORMAT, FORMATS, End
from brokers.kombu_layout import PRIORITY_STEPS, SEP
from brokers.rabbitmq_url import management_endpoint, parse_amqp_url
from brokers.redis_url import PERCENT_ENCODE, check_redis_url, misplaced_at
from scaler.errors import InvalidMetadata
from scaler.metadata_reader import MetadataReader
from scaler.profiles import Profile, find_profile
from scaler.trigger_spec import QueueSource
from scaler.url_policy import UrlPolicy, refuse_local_resources

TIMESTAMP_UNITS = ("auto", "s", "ms", "iso")
SCHEMES = {
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "amqp": "rabbitmq",
    "amqps": "rabbitmq",
}
SUPPORTED_BROKERS = ("redis", "rabbitmq")
#: one item of ``prioritySteps``: a step, or an inclusive range of steps
_PRIORITY_STEP = re.compile(r"^([0-9]+)(?:\s*-\s*([0-9]+))?$")
#: the most ``prioritySteps``: kombu keeps one list per step, and a sample reads each one
MAX_PRIORITY_STEPS = 256


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


def parse_source(
    reader: MetadataReader, profiles: Mapping[str, Profile], namespace: str | None, urls: UrlPolicy
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


def _broker(reader: MetadataReader, url: str, origin: _UrlOrigin) -> str:
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


def _parse_priority_steps(reader: MetadataReader) -> tuple[int, ...]:
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


def _parse_priority_separator(reader: MetadataReader) -> str:
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


def _management_url(
    reader: MetadataReader, url: str, origin: _UrlOrigin, urls: UrlPolicy
) -> str | None:
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
    reader: MetadataReader, profiles: Mapping[str, Profile], namespace: str | None, urls: UrlPolicy
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


def _parse_format(reader: MetadataReader, broker: str) -> str:
    text = reader.get("format")
    if text is None:
        return DEFAULT_FORMAT[broker]
    names = [n for n, info in FORMATS.items() if info.broker == broker]
    return reader.choice("format", names, DEFAULT_FORMAT[broker])
