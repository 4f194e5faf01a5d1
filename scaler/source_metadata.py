"""The queue source of a trigger: its URL (its own or a connection profile's), broker, queue and
format, and the format's options, which the format's own broker module parses
(:attr:`brokers.format_api.FormatInfo.options`, found through :mod:`brokers.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from brokers import registry
from brokers.base import QueueSource
from brokers.format_api import PERCENT_ENCODE, SourceContext, UrlOrigin, misplaced_at
from brokers.registry import format_info
from scaler.errors import InvalidMetadata
from scaler.metadata_reader import MetadataReader
from scaler.profiles import Profile, find_profile
from scaler.url_policy import UrlPolicy, refuse_local_resources


@dataclass(frozen=True, slots=True)
class _Gate:
    """The operator's URL rules, as a format's option parser may apply them."""

    urls: UrlPolicy

    def refuse_local(self, key: str, url: str) -> None:
        refuse_local_resources(key, url)

    def check(self, key: str, url: str) -> None:
        self.urls.check(key, url)


def parse_source(
    reader: MetadataReader, profiles: Mapping[str, Profile], namespace: str | None, urls: UrlPolicy
) -> QueueSource:
    url, origin = _connection_url(reader, profiles, namespace, urls)
    broker = _broker(reader, url, origin)
    if origin.profile is None:
        urls.check("url", url)

    queue = _queue(reader)
    format_name = _parse_format(reader, broker)
    info = format_info(format_name)
    for key in registry.layout_keys():
        if reader.get(key) is not None and key not in info.layout_keys:
            raise InvalidMetadata(
                key, f"does not apply to format {format_name}; remove it{_applies(key)}"
            )
    context = SourceContext(reader, url, origin, info, _Gate(urls))
    return QueueSource(
        broker=broker, url=url, queue=queue, format=format_name, options=info.options(context)
    )


def _queue(reader: MetadataReader) -> str:
    """``queue``, or a pool's ``queues`` as written (:mod:`scaler.pool_metadata` reads them)."""
    queue, queues = reader.get("queue"), reader.get("queues")
    if queue and queues is not None:
        raise InvalidMetadata(
            "queues",
            "set beside queue; set queue for one queue, or queues for the queues one pool of "
            "workers serves (critical,default,low), not both",
        )
    if not queue and queues is None:
        raise InvalidMetadata(
            "queue", "missing; set queue to the queue name as the job library names it"
        )
    if not queue and not queues:
        raise InvalidMetadata(
            "queues", "empty; list the queues one pool of workers serves: critical,default,low"
        )
    return queue or queues or ""


def _broker(reader: MetadataReader, url: str, origin: UrlOrigin) -> str:
    """The broker of ``url`` (checked as the broker's module says) and of ``broker``."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError as error:
        detail = PERCENT_ENCODE if misplaced_at(url) else str(error)
        form = next(iter(registry.brokers().values())).url_form
        raise origin.error(f"the URL cannot be parsed ({detail}); expected {form}") from None
    scheme = parts.scheme.lower()
    by_scheme = registry.schemes()
    if scheme not in by_scheme:
        raise origin.error(f"scheme {scheme!r} is not known; expected {_known_schemes()}")
    known = registry.brokers()
    broker = reader.get("broker") or by_scheme[scheme].name
    if broker not in known:
        raise reader.fail("broker", " or ".join(known))
    if by_scheme[scheme].name != broker:
        of = "" if origin.profile is None else f" of connection profile {origin.profile!r}"
        raise InvalidMetadata(
            "broker",
            f"broker {broker!r} does not match the {scheme}:// URL{of}; drop broker or fix the URL",
        )
    info = known[broker]
    if info.check_url is not None:
        try:
            info.check_url(url, parts)
        except ValueError as error:
            raise origin.error(str(error)) from None
    if origin.management_url is not None and "managementUrl" not in info.profile_keys:
        takers = [b.title for b in known.values() if "managementUrl" in b.profile_keys]
        raise origin.error(
            f"managementUrl applies to {' and '.join(takers)} profiles only; remove it"
        )
    return broker


def _known_schemes() -> str:
    """The URL schemes a trigger may use: the first broker's (``a://, b:// or c://``), then
    the others' in parentheses."""
    first, *others = registry.brokers().values()
    *most, last = [f"{scheme}://" for scheme in first.schemes]
    shown = f"{', '.join(most)} or {last}" if most else last
    rest = [f"{scheme}://" for broker in others for scheme in broker.schemes]
    return f"{shown} (or {', '.join(rest)})" if rest else shown


def _applies(key: str) -> str:
    """Where a layout key that does not apply to a format does, as the format registry says."""
    name = registry.applies_to(key)
    return "" if name is None else f" (it applies to format {name})"


def _connection_url(
    reader: MetadataReader, profiles: Mapping[str, Profile], namespace: str | None, urls: UrlPolicy
) -> tuple[str, UrlOrigin]:
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
        return profile.url, UrlOrigin("connection", profile.name, profile.management_url)
    if url:
        urls.admit_trigger_url("url")
        refuse_local_resources("url", url)
        return url, UrlOrigin()
    raise InvalidMetadata(
        "url", "missing; set connection (a profile held by the scaler), url, or urlFromEnv"
    )


def _parse_format(reader: MetadataReader, broker: str) -> str:
    default = registry.brokers()[broker].default_format
    if reader.get("format") is None:
        return default
    names = [n for n, info in registry.formats().items() if info.broker.name == broker]
    return reader.choice("format", names, default)
