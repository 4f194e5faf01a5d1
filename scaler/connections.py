"""Connection profiles (:mod:`scaler.profiles`), loaded from where the operator keeps them.

KEDA does not pass TriggerAuthentication values to external scalers, so secrets live here:
``QUEUE_AGE_SCALER_CONNECTION_<NAME>`` variables (``orders-redis`` -> ``..._ORDERS_REDIS``), and
``--connections-dir``, a folder with one file per profile (a mounted Secret), named as the profile
and holding its value: a URL, or a mapping of ``url``, ``managementUrl`` and ``namespaces``.

Profile names are compared by :func:`~scaler.profiles.profile_key`: case does not count, and
``-``, ``.`` and ``_`` are alike, so a trigger's ``connection: orders-redis``, ``orders_redis``
or ``Orders.Redis`` all find ``QUEUE_AGE_SCALER_CONNECTION_ORDERS_REDIS`` (or a file
``orders-redis``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from scaler.profiles import Profile, parse_profile, profile_key

ENV_PREFIX = "QUEUE_AGE_SCALER_CONNECTION_"

log = logging.getLogger(__name__)


def env_name(profile: str) -> str:
    """The environment variable that holds ``profile``'s value."""
    return ENV_PREFIX + profile_key(profile)


def load_profiles(
    environ: Mapping[str, str] | None = None, directory: Path | None = None
) -> dict[str, Profile]:
    """Profiles from the environment and from ``directory``; the directory wins on a clash.

    A variable's profile is named in lower case with ``-`` for ``_`` (``..._ORDERS_REDIS`` ->
    ``orders-redis``), a file's as the file. Two sources naming one profile (by
    :func:`profile_key`) are a clash: a file wins over a variable; between two variables or two
    files, the first in sorted order is kept, with a warning. A value that cannot be read is an
    :class:`~scaler.errors.InvalidProfile`.
    """
    environ = os.environ if environ is None else environ
    found: dict[str, tuple[str, str, str]] = {}  # key -> (name, value, where it came from)
    for variable, value in sorted(environ.items()):
        if variable.startswith(ENV_PREFIX) and value.strip():
            name = variable[len(ENV_PREFIX) :].lower().replace("_", "-")
            _add(found, name, value, variable)
    if directory is not None:
        from_files: dict[str, tuple[str, str, str]] = {}
        for path in sorted(directory.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                _add(from_files, path.name, path.read_text(), str(path))
        found.update(from_files)
    return {name: parse_profile(name, value, origin) for name, value, origin in found.values()}


def _add(found: dict[str, tuple[str, str, str]], name: str, value: str, origin: str) -> None:
    key = profile_key(name)
    if key in found:
        kept = found[key][2]
        log.warning(
            "connection profile %r: %s and %s name the same profile (case, '-', '.' and '_' do "
            "not count); using %s",
            name,
            kept,
            origin,
            kept,
        )
        return
    found[key] = (name, value, origin)
