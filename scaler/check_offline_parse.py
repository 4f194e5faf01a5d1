"""The scaler's parser over a trigger's metadata, offline: what only run time knows (connection
profiles, values resolved from the workload's environment) is stood in for."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from brokers import registry
from brokers.format_api import BrokerInfo
from scaler.check_findings import Finding, Where
from scaler.errors import InvalidMetadata, PermissionDenied
from scaler.metadata_reader import FROM_ENV, value_keys
from scaler.profiles import Profile
from scaler.spec import parse_metadata

#: stands in for a profile named by connectionFromEnv
PLACEHOLDER_PROFILE = "offline-check"
#: the profile a probed dependency names (``postgres=probe:orders-pg|100/5``)
PROBE_PROFILE = re.compile(r"=\s*probe:([A-Za-z0-9_.-]+)")
#: stands in for another key's value that KEDA resolves from the workload's environment
PLACEHOLDER_VALUE = "1"


def parse_offline(
    where: Where,
    at: str,
    metadata: Mapping[str, str],
    profiles: Mapping[str, Profile | str],
    profile_names: Iterable[str],
) -> list[Finding]:
    """The scaler's parser over the metadata, with what only run time knows stood in for."""
    findings: list[Finding] = []
    placeholder = _placeholder_url(metadata)
    known: dict[str, Profile | str] = {**dict.fromkeys(profile_names, placeholder), **profiles}
    values = dict(metadata)
    from_env = {key.removesuffix(FROM_ENV) for key in values if key.endswith(FROM_ENV)}
    for key in sorted(from_env):
        value = values.pop(key + FROM_ENV)
        if key not in value_keys() or key in values:
            values[key + FROM_ENV] = value  # the parser names the problem
        elif key == "url":
            values[key] = placeholder
        elif key == "connection":
            values[key] = PLACEHOLDER_PROFILE
            known[PLACEHOLDER_PROFILE] = placeholder
        else:
            values[key] = PLACEHOLDER_VALUE
    offline = not known
    connection = values.get("connection")
    if connection and "connection" not in from_env and connection not in known and not known:
        known[connection] = placeholder
        findings.append(
            where.warning(
                f"{at}.metadata.connection",
                f"profile {connection!r} not verified: no profile is known offline; pass "
                f"--profile {connection} or --connections-dir to check it",
            )
        )
    if offline and "dependencies" not in from_env:
        for probe in PROBE_PROFILE.findall(values.get("dependencies", "")):
            known[probe] = _first_broker().offline_url
            findings.append(
                where.warning(
                    f"{at}.metadata.dependencies",
                    f"probe profile {probe!r} not verified: no profile is known offline; pass "
                    f"--profile {probe} or --connections-dir to check it",
                )
            )
    rules = where.rules
    try:
        parse_metadata(
            values, known, namespace=where.namespace, urls=rules.urls, bounds=rules.bounds
        )
    except (InvalidMetadata, PermissionDenied) as error:
        message = str(error).removeprefix(f"{error.key}: ")
        path = f"{at}.metadata.{_source_key(error.key, metadata)}"
        # under --profiles-only, any url is refused, whatever value the environment gives
        refused_whatever = isinstance(error, PermissionDenied) and rules.urls.profiles_only
        if error.key in from_env and not refused_whatever:
            findings.append(
                where.warning(
                    path,
                    f"comes from the workload's environment, so it is not checked offline "
                    f"(with a stand-in value: {message})",
                )
            )
        else:
            findings.append(where.problem(path, message))
    return findings


def _first_broker() -> BrokerInfo:
    return next(iter(registry.brokers().values()))


def _placeholder_url(metadata: Mapping[str, str]) -> str:
    """Stands in for a URL that only the scaler (a profile) or the workload (urlFromEnv) holds:
    one of the trigger's broker (its ``broker``, or its format's)."""
    broker = registry.brokers().get(metadata.get("broker", ""))
    info = registry.formats().get(metadata.get("format", ""))
    if broker is None and info is not None and not metadata.get("broker"):
        broker = info.broker
    return (broker or _first_broker()).offline_url


def _source_key(key: str, metadata: Mapping[str, str]) -> str:
    """The key as the manifest spells it (``urlFromEnv`` where the parser says ``url``)."""
    if key not in metadata and key + FROM_ENV in metadata:
        return key + FROM_ENV
    return key
