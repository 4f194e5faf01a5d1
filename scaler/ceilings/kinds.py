"""The kinds of dependency a probe can read, by the scheme of its connection profile's URL."""

from __future__ import annotations

from urllib.parse import urlsplit

#: URL scheme -> probe kind
KINDS = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "pgbouncer": "pgbouncer",
    "mysql": "mysql",
    "mariadb": "mysql",
    "redis": "redis",
    "rediss": "redis",
    "http": "http",
    "https": "http",
}


def probe_kind(url: str) -> str:
    """The probe kind for ``url``; ValueError naming the schemes known otherwise."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError as error:
        raise ValueError(f"the URL cannot be parsed ({error})") from None
    if scheme not in KINDS:
        known = ", ".join(f"{s}://" for s in KINDS)
        raise ValueError(
            f"scheme {scheme + '://' if scheme else '(none)'} has no probe; expected {known}"
        )
    return KINDS[scheme]
