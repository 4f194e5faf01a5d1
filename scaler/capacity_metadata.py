"""A trigger's capacity (``workerThroughput`` or ``jobDuration``, ``workerConcurrency``) and
its shared ``dependencies``, static or probed."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from scaler.ceilings.kinds import probe_kind
from scaler.errors import InvalidMetadata, PermissionDenied
from scaler.metadata_reader import MetadataReader, shown_value
from scaler.profiles import Profile, find_profile
from scaler.trigger_spec import NOT_SHARED, Dependency

_DEPENDENCY = re.compile(
    r"^([A-Za-z0-9_.-]+)=(?:probe:([A-Za-z0-9_.-]+)(?:\|([0-9.]+))?|([0-9.]+))/([0-9.]+)$"
)
_DEPENDENCY_EXPECTED = (
    "NAME=LIMIT/PER_WORKER or NAME=probe:PROFILE[|LIMIT]/PER_WORKER[,...], for example "
    "postgres=100/5,payments-api=20/2 or postgres=probe:orders-pg|100/5"
)


def parse_capacity(reader: MetadataReader) -> tuple[float | None, int | None]:
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


def parse_learn_knee(reader: MetadataReader) -> bool:
    """``learnKnee``: ``true`` caps the ceiling at the throughput knee learned from the pool."""
    text = reader.get("learnKnee")
    if text is None or text.strip().lower() == "false":
        return False
    if text.strip().lower() != "true":
        raise reader.fail("learnKnee", "true or false")
    return True


_SCOPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def parse_dependency_scope(reader: MetadataReader) -> str | None:
    """``dependencyScope``: ``none`` (shared with nobody), or a name grouping the namespace's
    triggers that share their dependencies' limits; None without it (the default scope)."""
    text = reader.get("dependencyScope")
    if text is None:
        return None
    if text == NOT_SHARED or _SCOPE.match(text):
        return text
    raise reader.fail(
        "dependencyScope",
        f"{NOT_SHARED} (share with no other trigger), or a name of letters, digits, '.', '_' "
        "and '-' (at most 63) that the triggers sharing the limits all give",
    )


def parse_dependencies(
    text: str | None, profiles: Mapping[str, Profile], namespace: str | None
) -> tuple[Dependency, ...]:
    if not text:
        return ()
    deps: list[Dependency] = []
    for part in (item.strip() for item in text.split(",")):
        shown = shown_value("dependencies", part)  # a URL pasted here may hold a password
        match = _DEPENDENCY.match(part)
        if not match:
            raise InvalidMetadata("dependencies", f"got {shown}; expected {_DEPENDENCY_EXPECTED}")
        name, profile, fallback_text, limit_text, per_text = match.groups()
        try:
            per_worker = float(per_text)
            limit_given = limit_text if profile is None else fallback_text
            limit = None if limit_given is None else float(limit_given)
        except ValueError:
            raise InvalidMetadata(
                "dependencies", f"got {shown}; expected {_DEPENDENCY_EXPECTED}"
            ) from None
        if (limit is not None and limit <= 0) or per_worker <= 0:
            raise InvalidMetadata(
                "dependencies", f"got {shown}; LIMIT and PER_WORKER must be above zero"
            )
        if limit is not None and math.floor(limit / per_worker + 1e-9) < 1:
            raise InvalidMetadata(
                "dependencies", f"got {shown}; a LIMIT below PER_WORKER allows no worker at all"
            )
        if any(d.name == name for d in deps):
            raise InvalidMetadata(
                "dependencies", f"{name!r} appears twice; name each dependency once"
            )
        if profile is None:
            deps.append(Dependency(name, limit, per_worker))
            continue
        found, url = probe_profile_url(profile, profiles, namespace)
        try:
            kind = probe_kind(url)
        except ValueError as error:
            raise InvalidMetadata(
                "dependencies",
                f"{name!r}: the URL of connection profile {found!r}: {error}",
            ) from None
        deps.append(Dependency(name, limit, per_worker, found, url, kind))
    return tuple(deps)


def probe_profile_url(
    name: str, profiles: Mapping[str, Profile], namespace: str | None
) -> tuple[str, str]:
    """The connection profile a ``probe:NAME`` names, if ``namespace`` may use it (None: not
    checked), and its URL: the one place where a probe looks a profile up."""
    try:
        profile = find_profile(name, profiles, namespace)
    except (InvalidMetadata, PermissionDenied) as error:
        message = str(error).removeprefix("connection: ")
        raise type(error)("dependencies", f"probe:{name}: {message}") from None
    return profile.name, profile.url
