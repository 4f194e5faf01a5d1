"""RabbitMQ URLs -> where and how to connect, for AMQP and for the management API.

No broker client is imported here, so the metadata parser can validate URLs with it.

``amqp://[USER[:PASSWORD]@]HOST[:PORT][/VHOST][?TLS options]`` (``amqps://`` for TLS):

- the vhost is the percent-encoded path: ``/%2F`` or no path is ``/``, ``/orders`` is
  ``orders``; no user is ``guest``/``guest``, as RabbitMQ's URI spec says;
- TLS options, named as in RabbitMQ's URI query parameters: ``cacertfile`` (CA bundle to
  verify the server with; the system's CAs if unset), ``certfile`` and ``keyfile`` (a client
  certificate), ``verify`` (``verify_peer``, the default, or ``verify_none``),
  ``server_name_indication`` (the name to check the certificate against, if not the host).

The management API base URL (``managementUrl``) is ``http(s)://[USER[:PASSWORD]@]HOST[:PORT]``
with an optional path prefix and the same TLS options. Without it, it is derived from the AMQP
URL: ``http://HOST:15672`` for ``amqp``, ``https://HOST:15671`` (RabbitMQ's TLS port for the
management listener) with the same TLS options for ``amqps``. Without a user of its own it uses
the AMQP URL's credentials.

Error messages never include a URL or a password.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass, field
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

AMQP_PORTS = {"amqp": 5672, "amqps": 5671}
MANAGEMENT_PORTS = {"http": 15672, "https": 15671}
TLS_OPTIONS = ("cacertfile", "certfile", "keyfile", "verify", "server_name_indication")
VERIFY_MODES = ("verify_peer", "verify_none")
DEFAULT_USER = "guest"


@dataclass(frozen=True, slots=True)
class Tls:
    """TLS settings from a URL's query parameters."""

    cacertfile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    verify: bool = True
    server_name: str | None = None

    def context(self, user: str = "amqp") -> ssl.SSLContext:
        """An SSL context for ``user`` ("amqp" or "http"); raises OSError or ssl.SSLError when
        a file cannot be loaded.

        Without files of its own it is one context per process, verify mode and user: reading
        the system's CAs costs 20-30 ms of CPU under the GIL, too much for every connection
        attempt (a flood of triggers at ports that are no broker made it a third of the
        server's CPU). With files, a new context each time, so that rotated files are read on
        the next connection."""
        if self.cacertfile is None and self.certfile is None:
            return _system_context(self.verify, user)
        return _new_context(self.verify, self.cacertfile, self.certfile, self.keyfile)


def _new_context(
    verify: bool, cacertfile: str | None, certfile: str | None, keyfile: str | None
) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=cacertfile)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if certfile:
        context.load_cert_chain(certfile, keyfile)
    return context


@functools.cache
def _system_context(verify: bool, user: str) -> ssl.SSLContext:
    """The context with the system's CAs, shared by one user's connections; not across users,
    as httpx sets its ALPN protocols on the context it is given."""
    return _new_context(verify, None, None, None)


@dataclass(frozen=True, slots=True)
class AmqpEndpoint:
    """One AMQP connection's worth of settings: adapters with equal endpoints share it."""

    host: str
    port: int
    vhost: str
    username: str
    password: str = field(repr=False)
    tls: Tls | None = None


@dataclass(frozen=True, slots=True)
class ManagementEndpoint:
    """The management API of a broker: adapters with equal endpoints share one HTTP client."""

    base_url: str
    username: str
    password: str = field(repr=False)
    tls: Tls | None = None


def parse_amqp_url(url: str) -> AmqpEndpoint:
    """The AMQP endpoint of ``url``; ValueError (naming no secret) when it is not one."""
    parts = _split(url, "the AMQP URL")
    if parts.scheme not in AMQP_PORTS:
        raise ValueError(f"scheme {parts.scheme!r} is not amqp or amqps")
    if not parts.hostname:
        raise ValueError("the AMQP URL has no host")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return AmqpEndpoint(
        host=parts.hostname,
        port=parts.port or AMQP_PORTS[parts.scheme],
        vhost=unquote(path) or "/",
        username=unquote(parts.username) if parts.username else DEFAULT_USER,
        password=unquote(parts.password) if parts.password is not None else DEFAULT_USER,
        tls=_tls(parts, "url") if parts.scheme == "amqps" else _no_tls(parts, "url"),
    )


def management_endpoint(amqp_url: str, management_url: str | None) -> ManagementEndpoint:
    """The management API for ``amqp_url``: ``management_url`` if given, else derived."""
    amqp = parse_amqp_url(amqp_url)
    if management_url is None:
        scheme = "https" if amqp.tls is not None else "http"
        host = f"[{amqp.host}]" if ":" in amqp.host else amqp.host
        return ManagementEndpoint(
            f"{scheme}://{host}:{MANAGEMENT_PORTS[scheme]}", amqp.username, amqp.password, amqp.tls
        )
    parts = _split(management_url, "managementUrl")
    if parts.scheme not in MANAGEMENT_PORTS:
        raise ValueError(f"managementUrl: scheme {parts.scheme!r} is not http or https")
    if not parts.hostname:
        raise ValueError("managementUrl has no host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    base = f"{parts.scheme}://{host}:{parts.port or MANAGEMENT_PORTS[parts.scheme]}"
    if parts.username is not None:
        username, password = unquote(parts.username), unquote(parts.password or "")
    else:
        username, password = amqp.username, amqp.password
    if parts.scheme == "http":
        tls = _no_tls(parts, "managementUrl")
    else:  # TLS options of its own, else the AMQP URL's
        tls = _tls(parts, "managementUrl") if parts.query else (amqp.tls or Tls())
    return ManagementEndpoint(base + parts.path.rstrip("/"), username, password, tls)


def _split(url: str, name: str) -> SplitResult:
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError:
        raise ValueError(f"{name} cannot be parsed (a bad port, or brackets)") from None
    return parts


def _options(parts: SplitResult, name: str) -> dict[str, str]:
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - set(TLS_OPTIONS))
    if unknown:
        raise ValueError(
            f"{name}: unknown query parameter(s) {', '.join(unknown)}; "
            f"expected TLS options: {', '.join(TLS_OPTIONS)}"
        )
    return options


def _no_tls(parts: SplitResult, name: str) -> Tls | None:
    """None, as a plain-text URL has no TLS: refuses TLS options on it."""
    if _options(parts, name):
        raise ValueError(f"{name}: TLS options need amqps:// or https://")
    return None


def _tls(parts: SplitResult, name: str) -> Tls:
    options = _options(parts, name)
    verify = options.get("verify", "verify_peer")
    if verify not in VERIFY_MODES:
        raise ValueError(f"{name}: verify={verify!r}; expected verify_peer or verify_none")
    if options.get("keyfile") and not options.get("certfile"):
        raise ValueError(f"{name}: keyfile needs certfile (the client certificate)")
    return Tls(
        cacertfile=options.get("cacertfile") or None,
        certfile=options.get("certfile") or None,
        keyfile=options.get("keyfile") or None,
        verify=verify == "verify_peer",
        server_name=options.get("server_name_indication") or None,
    )
