"""Redis URLs, checked when a trigger is parsed as redis-py will read them at every sample.

A URL that redis-py would refuse (an unknown query option: a TypeError; a database that is not a
whole number: a ValueError) or misread (``redis://h/abc`` is database 0) fails here once, with a
message naming the part and the fix, rather than at every sample. The allowed query options are
read from redis-py itself: the ones it converts (``URL_QUERY_ARGUMENT_PARSERS``) or passes as
text, that the connection class of the URL's scheme takes. No message shows the password.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, parse_qs, unquote

from brokers.format_api import PERCENT_ENCODE, misplaced_at
from brokers.suggest import nearest

if TYPE_CHECKING:  # redis-py is imported when a Redis URL is first checked, not before
    from redis.asyncio.connection import AbstractConnection
    from redis.driver_info import DriverInfo

#: query options whose text redis-py hands to its connection as is; it converts those in
#: ``redis.asyncio.connection.URL_QUERY_ARGUMENT_PARSERS``, and the other arguments of a
#: connection take Python objects
REDIS_TEXT_OPTIONS = frozenset(
    {
        "username", "password", "client_name", "lib_name", "lib_version", "ssl_keyfile",
        "ssl_certfile", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_data", "ssl_ca_path",
        "ssl_ciphers", "ssl_password",
    }
)  # fmt: skip
#: arguments of a connection that a Redis URL gives in its own parts, not as query options
_REDIS_URL_PARTS = {"host": "HOST", "port": "PORT", "path": "the socket's path"}
_REDIS_CERT_REQS = ("none", "optional", "required")
_REDIS_FORMS = {
    "redis": "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?OPTION=VALUE&...]",
    "rediss": "rediss://[[USER]:PASSWORD@]HOST[:PORT][/DB][?OPTION=VALUE&...]",
    "unix": "unix:///PATH/TO/redis.sock[?db=DB&password=PASSWORD&...]",
}
_DB_PATH = re.compile(r"/[0-9]+/?")


def _redis_connection(scheme: str) -> type[AbstractConnection]:
    """The class of connection redis-py's client makes for a Redis URL of ``scheme``."""
    from redis.asyncio import connection

    classes: dict[str, type[AbstractConnection]] = {
        "redis": connection.Connection,
        "rediss": connection.SSLConnection,
        "unix": connection.UnixDomainSocketConnection,
    }
    return classes[scheme]


@functools.cache
def _redis_arguments(scheme: str) -> frozenset[str]:
    """The keyword arguments of redis-py's pool and of its connection class for ``scheme``
    (with the class's bases)."""
    from redis.asyncio.connection import ConnectionPool

    names: set[str] = set()
    for cls in (ConnectionPool, *_redis_connection(scheme).__mro__):
        init = vars(cls).get("__init__")
        if init is None or cls is object:
            continue
        names.update(
            p.name
            for p in inspect.signature(init).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        )
    return frozenset(names)


@functools.cache
def redis_url_options(scheme: str) -> frozenset[str]:
    """The query options a Redis URL of ``scheme`` may hold: those redis-py reads from a URL's
    text (converted or as is) and its connection for that scheme takes."""
    from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS

    known = frozenset(URL_QUERY_ARGUMENT_PARSERS) | REDIS_TEXT_OPTIONS
    return known & _redis_arguments(scheme)


@dataclass(frozen=True)
class _RedisUrl:
    """A Redis URL under check: every failure names the part, never the password."""

    url: str
    parts: SplitResult

    @functools.cached_property
    def scheme(self) -> str:
        return self.parts.scheme.lower()

    @functools.cached_property
    def form(self) -> str:
        return f"expected {_REDIS_FORMS[self.scheme]}"

    @functools.cached_property
    def hidden(self) -> bool:
        return misplaced_at(self.url)

    @functools.cached_property
    def password(self) -> str:
        return unquote(self.parts.password or "")

    def shown(self, text: str) -> str:
        """A part of the URL as a message may show it."""
        if self.hidden or "@" in text or (self.password and self.password in unquote(text)):
            return "<hidden>"
        return repr(text)

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{message}{f' ({PERCENT_ENCODE})' if self.hidden else ''}")


@functools.cache
def driver_info() -> DriverInfo:
    """What every connection tells Redis about its library (CLIENT SETINFO), worked out once:
    by default redis-py reads its own package metadata from disk for each connection it makes,
    the check of each new trigger's URL included."""
    from redis.driver_info import DriverInfo

    return DriverInfo()


def check_redis_url(url: str, parts: SplitResult) -> None:
    """Refuse, now, a Redis URL that redis-py would refuse (or misread) at every sample: raises
    ValueError saying which part is wrong and how to fix it, never showing the password."""
    checked = _RedisUrl(url, parts)
    if checked.scheme != "unix" and parts.port == 0:
        raise checked.fail(f"port 0; {checked.form}, PORT from 1 to 65535 (6379 if left out)")
    _check_redis_options(checked)
    if checked.scheme == "unix" and not parts.path:
        raise checked.fail(f"a unix:// URL needs the socket's path; {checked.form}")
    path = unquote(parts.path)
    if checked.scheme != "unix" and path not in ("", "/") and not _DB_PATH.fullmatch(path):
        raise checked.fail(
            f"the path {checked.shown(parts.path)} is not a database number; {checked.form}, "
            "DB a whole number, at least 0 (or ?db=DB)"
        )
    refusal = _redis_py_refusal(url)
    if refusal is not None:
        detail = refusal
        for secret in (url, parts.password, checked.password):
            if secret:
                detail = detail.replace(secret, "<hidden>")
        shown = "<hidden>" if checked.hidden else detail
        raise checked.fail(f"redis-py cannot use the URL ({shown}); {checked.form}") from None


@functools.lru_cache(maxsize=256)
def _redis_py_refusal(url: str) -> str | None:
    """What redis-py says of ``url`` (None: it takes it): its own reading, and the connection its
    client would make (no I/O). Worked out once per URL: many triggers share one Redis, and
    making the connection object was a tenth of a new trigger's parse."""
    from redis.asyncio.connection import ConnectionPool
    from redis.asyncio.connection import parse_url as redis_parse_url
    from redis.exceptions import RedisError

    try:
        redis_parse_url(url)
        pool = ConnectionPool.from_url(url, driver_info=driver_info())
        pool.make_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    except (RedisError, TypeError, ValueError) as error:
        return str(error)
    return None


def _check_redis_options(checked: _RedisUrl) -> None:
    """The query's options: each one redis-py takes from a URL, with a value it can use."""
    from redis.asyncio.connection import URL_QUERY_ARGUMENT_PARSERS

    # parse_qs as redis-py calls it: an option without a value is dropped, the first one counts
    options = {name: values[0] for name, values in parse_qs(checked.parts.query).items()}
    allowed = redis_url_options(checked.scheme)
    for name in options:
        if name not in allowed:
            raise checked.fail(_redis_option_problem(name, checked.scheme, checked.shown(name)))
    for name, text in options.items():
        parser = URL_QUERY_ARGUMENT_PARSERS.get(name)
        expected = _redis_option_values(name, parser)
        try:
            value = parser(text) if parser is not None else text
        except (TypeError, ValueError):
            raise checked.fail(f"?{name}={checked.shown(text)}: expected {expected}") from None
        if (name == "db" and isinstance(value, int) and value < 0) or (
            name == "ssl_cert_reqs" and value not in _REDIS_CERT_REQS
        ):
            raise checked.fail(f"?{name}={checked.shown(text)}: expected {expected}")


def _redis_option_problem(name: str, scheme: str, shown: str) -> str:
    """Why query option ``name`` cannot be in a ``scheme`` URL."""
    if name in _REDIS_URL_PARTS:
        return (
            f"query option {shown} is a part of the URL itself; give {_REDIS_URL_PARTS[name]} "
            f"there: {_REDIS_FORMS[scheme]}"
        )
    if name in redis_url_options("rediss"):
        return f"query option {shown} is a TLS option: it applies to rediss:// URLs only"
    if name in _redis_arguments(scheme):
        return (
            f"query option {shown} is a redis-py argument that the scaler does not take from a "
            "URL (it needs a Python value, or changes how commands and replies are encoded); "
            "remove it"
        )
    allowed = sorted(redis_url_options(scheme))
    close = nearest(name.lower(), allowed, cutoff=0.6)
    hint = f" (did you mean {close!r}?)" if close and shown != "<hidden>" else ""
    return (
        f"query option {shown} is not one redis-py takes from a {scheme}:// URL{hint}; "
        f"it takes: {', '.join(allowed)}"
    )


def _redis_option_values(name: str, parser: Callable[..., object] | None) -> str:
    """What a query option's value should be, for messages."""
    if name == "db":
        return "a database number: a whole number, at least 0"
    if name == "ssl_cert_reqs":
        return f"{', '.join(_REDIS_CERT_REQS[:-1])} or {_REDIS_CERT_REQS[-1]}"
    if parser is int:
        return "a whole number"
    if parser is float:
        return "a number"
    return f"a value redis-py's {getattr(parser, '__name__', 'parser')} reads"
