"""A connection profile: a named whole of URL, management URL and the namespaces that may use it.

A profile's value (a ``QUEUE_AGE_SCALER_CONNECTION_<NAME>`` variable, or a file in
``--connections-dir``) is either a bare URL, usable from every namespace::

    redis://:secret@redis-master.shop.svc:6379/0

or a YAML (or JSON) mapping::

    url: amqp://scaler:secret@rabbitmq.shop.svc:5672/%2F
    managementUrl: http://rabbitmq.shop.svc:15672    # RabbitMQ only; optional
    namespaces: [shop, "team-*"]                     # names or globs; optional

A trigger that names a profile (``connection``) gets everything that carries or uses the
profile's credentials from the profile: its URL with host, vhost and TLS files, and its
management URL. Without ``namespaces`` the profile is usable from every namespace (as a bare
URL is); with it, only from the namespaces listed, where ``*``, ``?`` and ``[...]`` are globs.

Profile names are compared by :func:`profile_key`: case does not count, and ``-``, ``.`` and
``_`` are alike.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import yaml

from scaler.errors import InvalidMetadata, InvalidProfile, PermissionDenied

#: the keys of a profile given as a mapping
PROFILE_KEYS = ("url", "managementUrl", "namespaces")
#: a value that starts as a mapping does: ``{`` (JSON, or YAML's flow style), a YAML comment or
#: document start, or ``key:`` and a blank (a URL's ``scheme:`` is followed by ``//``)
_MAPPING = re.compile(r"\A\s*(\{|#|---|[A-Za-z][A-Za-z0-9_-]*:(\s|\Z))")
#: a namespace name (a DNS label) or a glob over them
_NAMESPACE = re.compile(r"\A[a-z0-9*?\[\]!-]{1,63}\Z")
HOW_PROFILES_ARE_SET = (
    "Profiles are set by the scaler's operator: QUEUE_AGE_SCALER_CONNECTION_<NAME> variables or "
    "files in --connections-dir (names match whatever their case, with '-', '.' and '_' alike)"
)


def profile_key(name: str) -> str:
    """The form in which profile names are compared: upper case, ``-`` and ``.`` as ``_``."""
    return re.sub(r"[-.]", "_", name).upper()


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    url: str = field(repr=False)
    #: the RabbitMQ management API's URL; derived from ``url`` when None
    management_url: str | None = field(default=None, repr=False)
    #: names or globs of the namespaces that may use the profile; None: every namespace
    namespaces: tuple[str, ...] | None = None

    def allows(self, namespace: str) -> bool:
        return self.namespaces is None or any(
            fnmatch.fnmatchcase(namespace, pattern) for pattern in self.namespaces
        )


def parse_profile(name: str, text: str, origin: str) -> Profile:
    """A profile from its configured value; :class:`InvalidProfile` naming ``origin`` (the
    variable or file) and the problem, never the value, when it cannot be read."""
    text = text.strip()
    if not _MAPPING.match(text):
        return Profile(name, text)

    def fail(problem: str) -> InvalidProfile:
        return InvalidProfile(f"connection profile {name!r} ({origin}): {problem}")

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)  # the error's text may quote the password
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise fail(
            f"not valid YAML or JSON{where}; expected a URL, or a mapping with "
            f"{', '.join(PROFILE_KEYS)}"
        ) from None
    if not isinstance(data, dict):
        raise fail(f"expected a URL, or a mapping with {', '.join(PROFILE_KEYS)}")
    unknown = sorted(str(key)[:40] for key in data if key not in PROFILE_KEYS)
    if unknown:
        raise fail(
            f"unknown key(s) {', '.join(map(repr, unknown))}; expected {', '.join(PROFILE_KEYS)}"
        )
    url, management_url = data.get("url"), data.get("managementUrl")
    if not isinstance(url, str) or not url.strip():
        raise fail("url: missing or not a string; set url to the broker's URL")
    if management_url is not None and (
        not isinstance(management_url, str) or not management_url.strip()
    ):
        raise fail("managementUrl: not a string; set it to http(s)://HOST:PORT or remove it")
    return Profile(
        name,
        url.strip(),
        management_url.strip() if management_url is not None else None,
        _namespaces(data["namespaces"], fail) if "namespaces" in data else None,
    )


def _namespaces(value: object, fail: Callable[[str], InvalidProfile]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part for part in re.split(r"[\s,]+", value) if part]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise fail("namespaces: expected a list of namespace names or globs, e.g. [shop, 'team-*']")
    if not value:
        raise fail(
            "namespaces: an empty list lets no namespace use the profile; list the namespaces, "
            "or remove the key to let every namespace use it"
        )
    for item in value:
        if not _NAMESPACE.match(item):
            raise fail(
                f"namespaces: {item[:70]!r} is neither a namespace name nor a glob over them "
                "(lower-case letters, digits, '-', and the globs *, ?, [...])"
            )
    return tuple(value)


def find_profile(name: str, profiles: Mapping[str, Profile], namespace: str | None) -> Profile:
    """The profile that ``connection: name`` names: itself, else the one alike by
    :func:`profile_key`, if ``namespace`` may use it (None: not checked, for the operator's own
    tools). Unknown names are refused without naming the profiles there are."""
    profile = profiles.get(name)
    if profile is None:
        alike = sorted(known for known in profiles if profile_key(known) == profile_key(name))
        if len(alike) > 1:
            raise InvalidMetadata(
                "connection",
                f"got {_shown(name)}; it names several connection profiles "
                f"({', '.join(map(repr, alike))}: case, '-', '.' and '_' do not count); "
                "give one of them exactly, or remove all but one from the scaler's configuration",
            )
        if not alike:
            raise InvalidMetadata(
                "connection",
                f"got {_shown(name)}; the scaler has no such connection profile. "
                + HOW_PROFILES_ARE_SET,
            )
        profile = profiles[alike[0]]
    if namespace is not None and not profile.allows(namespace):
        raise PermissionDenied(
            "connection",
            f"connection profile {profile.name!r} may not be used from namespace {namespace!r}: "
            "the profile's namespaces do not include it (ask the scaler's operator)",
        )
    return profile


def _shown(name: str) -> str:
    """A profile name as a message may show it: not if it looks like a URL (a password)."""
    if "://" in name or "@" in name:
        return "<hidden: may hold a password>"
    return repr(name[:100])


def as_profiles(profiles: Mapping[str, Profile | str]) -> dict[str, Profile]:
    """Profiles, where a bare URL stands for a profile of that URL usable from every namespace."""
    return {
        name: value if isinstance(value, Profile) else Profile(name, value)
        for name, value in profiles.items()
    }
