"""Connection profiles: names that triggers use, mapped to URLs with credentials by the scaler.

KEDA does not pass TriggerAuthentication values to external scalers, so secrets live here:
``QUEUE_AGE_SCALER_CONNECTION_<NAME>`` variables (``orders-redis`` -> ``..._ORDERS_REDIS``), and
``--connections-dir``, a folder with one file per profile (a mounted Secret), named as the profile
and holding its URL.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

ENV_PREFIX = "QUEUE_AGE_SCALER_CONNECTION_"


def env_name(profile: str) -> str:
    """The environment variable that holds ``profile``'s URL."""
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", profile).upper()


def load_profiles(
    environ: Mapping[str, str] | None = None, directory: Path | None = None
) -> dict[str, str]:
    """Profiles from the environment and from ``directory``; the directory wins on a clash."""
    environ = os.environ if environ is None else environ
    profiles = {
        key[len(ENV_PREFIX) :].lower().replace("_", "-"): value.strip()
        for key, value in environ.items()
        if key.startswith(ENV_PREFIX) and value.strip()
    }
    if directory is not None:
        for path in sorted(directory.iterdir()):
            if path.is_file() and not path.name.startswith("."):
                profiles[path.name] = path.read_text().strip()
    return profiles
