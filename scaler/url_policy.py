"""Where a trigger that gives its own URL (``url``, ``urlFromEnv``, ``managementUrl``) may make the
scaler connect: the operator's ``serve --allow-url`` rules and ``--profiles-only``.

Whatever the rules, a trigger's own URL never names a file or a socket on the scaler's machine:
TLS file options (Redis ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_ca_path``;
AMQP ``cacertfile``, ``certfile``, ``keyfile``) and ``unix://`` are refused without looking at
the file; a connection profile may have them. The URLs of profiles are the operator's own and
are not checked against the rules.

A rule is ``SCHEME://HOST[:PORT]``:

- ``SCHEME``: ``redis``, ``rediss``, ``amqp``, ``amqps``, ``http``, ``https`` (a RabbitMQ
  management API) or ``*``;
- ``HOST``: a host name or glob over host names (``*.redis.svc``), an IP address, or a network
  in CIDR form (``10.0.0.0/8``, ``[fd00::/8]``). A CIDR rule matches URLs that give an IP
  address: host names are not resolved (a name could resolve elsewhere when connecting);
- ``PORT``: a port, or ``*``; left out, any port.

A URL is allowed when one rule matches its scheme, host and port (the scheme's default port
when the URL gives none). With RabbitMQ the management API is a second URL: ``managementUrl``,
else ``http://HOST:15672`` (``https://HOST:15671`` for ``amqps``), and it needs a rule too.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from brokers.format_api import misplaced_at
from scaler.errors import InvalidMetadata, PermissionDenied

#: query options that name a file on the scaler's filesystem (redis-py's, then RabbitMQ's)
FILE_OPTIONS = frozenset(
    {
        "ssl_ca_certs",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_ca_path",
        "cacertfile",
        "certfile",
        "keyfile",
    }
)
DEFAULT_PORTS = {
    "redis": 6379, "rediss": 6379, "amqp": 5672, "amqps": 5671, "http": 15672, "https": 15671,
}  # fmt: skip
_RULE = re.compile(
    r"\A(?P<scheme>[a-z*]+)://(?P<host>\[[^\]]+\]|[^:\[\]]+)(?::(?P<port>\*|[0-9]+))?\Z"
)
_HOST_NAME = re.compile(r"[a-z0-9_.-]+")
_NETWORK = ipaddress.IPv4Network | ipaddress.IPv6Network
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class UrlRule:
    """One ``--allow-url`` rule, as given and parsed."""

    text: str
    scheme: str | None
    #: a host glob (lower case); None when the rule is a network
    host: str | None
    network: _NETWORK | None
    port: int | None

    @classmethod
    def parse(cls, text: str) -> UrlRule:
        """A rule from ``SCHEME://HOST[:PORT]``; ValueError saying what is wrong."""
        match = _RULE.match(text.strip().lower())
        if match is None:
            raise ValueError(
                f"--allow-url {text!r}: expected SCHEME://HOST[:PORT], for example "
                "redis://*.redis.svc:6379, amqp://10.0.0.0/8 or https://rabbitmq.internal"
            )
        scheme = match["scheme"]
        if scheme != "*" and scheme not in DEFAULT_PORTS:
            raise ValueError(
                f"--allow-url {text!r}: scheme {scheme!r} is not one of "
                f"{', '.join(DEFAULT_PORTS)} or *"
            )
        host = match["host"].strip("[]")
        network: _NETWORK | None = None
        if "/" in host or _is_ip(host):
            try:
                network = ipaddress.ip_network(host, strict=False)
            except ValueError:
                raise ValueError(f"--allow-url {text!r}: {host!r} is not a network") from None
        port = match["port"]
        if port not in (None, "*") and not 0 < int(port) < 65536:
            raise ValueError(f"--allow-url {text!r}: port {port} is not from 1 to 65535")
        return cls(
            text=text.strip(),
            scheme=None if scheme == "*" else scheme,
            host=None if network is not None else host,
            network=network,
            port=None if port in (None, "*") else int(port),
        )

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if self.scheme is not None and scheme != self.scheme:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.network is not None:
            address = _ip(host)
            return address is not None and address in self.network
        # a glob matches host names only: nothing a client could read another way
        # (percent-escapes, which redis-py decodes; blanks; NULs)
        return (
            self.host is not None
            and _HOST_NAME.fullmatch(host) is not None
            and fnmatch.fnmatchcase(host, self.host)
        )


def _ip(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _is_ip(host: str) -> bool:
    return _ip(host) is not None


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    """Where triggers' own URLs may point. No rules and not ``profiles_only``: anywhere."""

    rules: tuple[UrlRule, ...] = ()
    profiles_only: bool = False

    @classmethod
    def of(cls, rules: list[str] | tuple[str, ...], *, profiles_only: bool = False) -> UrlPolicy:
        return cls(tuple(UrlRule.parse(rule) for rule in rules), profiles_only)

    @property
    def open(self) -> bool:
        """Whether a trigger may make the scaler connect anywhere it can reach."""
        return not self.rules and not self.profiles_only

    def admit_trigger_url(self, key: str) -> None:
        """Refuse, before any parsing, a trigger's own URL under ``--profiles-only``."""
        if self.profiles_only:
            raise PermissionDenied(
                key,
                "this scaler takes connections only from its connection profiles (serve "
                "--profiles-only): set connection to a profile's name, and remove url/urlFromEnv "
                "and managementUrl",
            )

    def check(self, key: str, url: str) -> None:
        """Refuse a trigger's own URL that no ``--allow-url`` rule matches (PermissionDenied),
        naming the URL's scheme, host and port and the rules; never its credentials."""
        self.admit_trigger_url(key)
        if not self.rules:
            return
        parts = urlsplit(url.strip())
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        port = parts.port or DEFAULT_PORTS.get(scheme, 0)
        if any(rule.matches(scheme, host, port) for rule in self.rules):
            return
        shown = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
        if misplaced_at(url):  # the "host" and "port" may be parts of the password
            shown = "the URL (not shown: it has an '@' after its host)"
        raise PermissionDenied(
            key,
            f"{shown} is not allowed by the scaler's --allow-url rules "
            f"({', '.join(rule.text for rule in self.rules)}); point the trigger at an allowed "
            "host, or name a connection profile (connection)",
        )


#: any URL (``serve``'s default, with a warning at start)
OPEN_URLS = UrlPolicy()


def refuse_local_resources(key: str, url: str) -> None:
    """Refuse a trigger's own URL that names a file or a socket on the scaler's machine (TLS
    files, ``unix://``), with one message whatever the file: nothing is looked up."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return  # not a URL: the parser says what is wrong with it
    if parts.scheme.lower() == "unix":
        raise InvalidMetadata(
            key,
            "unix:// sockets are reachable only through a connection profile that the scaler's "
            "operator configures; set connection to a profile's name",
        )
    files = sorted(FILE_OPTIONS & set(parse_qs(parts.query, keep_blank_values=True)))
    if files:
        raise InvalidMetadata(
            key,
            f"query option {files[0]} names a file on the scaler's machine; a trigger's own URL "
            "cannot (TLS files come only from a connection profile that the scaler's operator "
            "configures): set connection to a profile's name",
        )
